"""Driver versions of one spec: what differs between two builds (`torchfl-gen diff`)."""
from __future__ import annotations

from .model import ChipSpec


def describe(spec: ChipSpec, name: str) -> str:
    """An op's route (ChipSpec.route), in words: 'vendor kernel add' or 'chain [triton, cpu]'."""
    route = spec.route(name)
    if route.kernel:
        entry = spec.op(name)
        required = entry is not None and entry.require_vendor
        text = f"vendor kernel {route.kernel}" + (" (required)" if required else "")
        return text + (f", then [{', '.join(route.chain)}]" if route.chain else "")
    return f"chain [{', '.join(route.chain)}]"


def diff(a: ChipSpec, b: ChipSpec) -> dict:
    """Ops gained, lost and re-routed, and dtypes gained and lost, from build `a` to build `b`."""
    ra = {op.name: describe(a, op.name) for op in a.ops}
    rb = {op.name: describe(b, op.name) for op in b.ops}
    default_a = f"fallback.default [{', '.join(a.fallback.default)}]"
    default_b = f"fallback.default [{', '.join(b.fallback.default)}]"
    return {
        "chip": a.chip.name,
        "spec": a.source_display,
        "from": a.driver.version,
        "to": b.driver.version,
        "ops_gained": {op: {"from": default_a, "to": rb[op]} for op in sorted(rb.keys() - ra.keys())},
        "ops_lost": {op: {"from": ra[op], "to": default_b} for op in sorted(ra.keys() - rb.keys())},
        "ops_rerouted": {op: {"from": ra[op], "to": rb[op]} for op in sorted(ra.keys() & rb.keys())
                         if ra[op] != rb[op]},
        "dtypes_gained": [d for d in b.dtypes if d not in a.dtypes],
        "dtypes_lost": [d for d in a.dtypes if d not in b.dtypes],
    }


def format_diff(changes: dict) -> str:
    lines = [f"{changes['chip']}: driver {changes['from']} -> {changes['to']} ({changes['spec']})"]
    for key, title in (("ops_gained", "ops gained"), ("ops_lost", "ops lost"), ("ops_rerouted", "ops re-routed")):
        entries = changes[key]
        lines.append(f"{title} ({len(entries)}):" + ("" if entries else " none"))
        lines += [f"  {op}: {v['from']} -> {v['to']}" for op, v in entries.items()]
    for key, title in (("dtypes_gained", "dtypes gained"), ("dtypes_lost", "dtypes lost")):
        lines.append(f"{title}: {', '.join(changes[key]) or 'none'}")
    return "\n".join(lines)
