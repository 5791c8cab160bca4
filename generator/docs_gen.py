"""docs/spec.md, generated from the chip spec JSON Schema and the hook ABI table.

`render_spec_reference(schema)` documents every key of the spec language (path, type,
required/optional, default, allowed values or pattern, description); `render_spec_doc`
wraps it with the intro and the driver hook ABI into the whole docs/spec.md. The output
is deterministic, so a test can regenerate it and compare.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from . import collective_abi
from .hook_abi import HOOK_NOTES, HOOK_SIGNATURES, c_function_type
from .model import REQUIRED_HOOKS

SCHEMA_REL = "generator/schema/chip-spec.schema.json"
DOC_REL = "docs/spec.md"
REGENERATE = "torchfl-gen docs"

HEADER = (f"<!-- Generated from {SCHEMA_REL} by `{REGENERATE}`: do not edit. "
          "Change the schema (or generator/docs_gen.py) and regenerate. -->")

def _rules() -> str:
    """The rules beyond the key reference, with the caps of `limits` (the one place of the numbers)."""
    from . import limits as L
    from .checks.native import MONITOR_TOOLS

    monitor = "; ".join(f"`{parser}`: `{program}` " + ", ".join(
        f"`{o}=VALUE`" if kind == "=" else f"`{o} VALUE...`" if kind == " " else f"`{o}`" for o, kind in options.items())
        for parser, (program, options) in MONITOR_TOOLS.items())
    return f"""\
- The file must be a regular file (not a pipe or a device), UTF-8, at most 1 MiB
  ({L.MAX_BYTES:,} bytes), nested at most {L.MAX_DEPTH} levels; a list or a mapping holds at most
  {L.MAX_ITEMS:,} items (torch has about 3,100 aten ops), `driver.versions` at most
  {L.MAX_DRIVER_VERSIONS:,} overlays. Duplicate keys, non-string keys, YAML anchors and aliases,
  non-standard YAML tags and strings that are not text (a lone surrogate such as `"\\uD800"`)
  are errors.
- Every error is reported as `FILE:LINE:COL: PATH: MESSAGE`, and all errors of a
  file are reported at once, up to {L.MAX_ERRORS:,} (then their count); did-you-mean
  suggestions for the first {L.MAX_SUGGESTIONS} unknown names.
- `spec_version` is written `1`, the integer literal (not `1.0`, `0x1`, `+1`).
- Patterns match the whole value: a trailing newline matches none.
- `chip.name` must not be one of torch's built-in device types (cpu, cuda, meta, xla,
  mps, xpu, hip, ...), a name torch already has (`torch.nn`, `Tensor.is_leaf`: the
  backend adds `torch.<name>`, `Tensor.<name>()`, `Tensor.is_<name>`), or a Python keyword
  (soft keywords too). Kernel names and the kernels' namespace must not be C++ keywords or
  names C++ reserves (`__x`, `_X`); hook symbols not C/C++ keywords.
- Driver versions are `MAJOR.MINOR` with at most {L.MAX_VERSION_DIGITS} digits each, MINOR below 100,
  and encoded (`driver.version_encoding`) within a C int ({L.C_INT_MAX:,}).
- `native.monitor.command` runs the tool its `parser` reads, by its bare name, with
  read-only query options only: {monitor}.
- Op keys are aten operator names exactly as the installed torch spells them
  (`name.overload`, e.g. `add.Tensor`, `random_.from`); unknown names are errors with a
  suggestion. Ops that are CompositeImplicitAutograd decompose before they reach a
  backend and cannot be mapped: map the ops they decompose into. Each kernel is called
  with the driver stream first, then the op's dispatcher arguments.
- `require: vendor` needs a `kernel`. A `kernels` section is required when any op has
  a `kernel`.
- `amp.dtypes` must be a subset of `dtypes`, and `amp.default` one of `amp.dtypes`.
- Relative paths (`driver.search_paths`, `kernels.include_dirs`, `kernels.library_dirs`,
  `kernels.sources`) are resolved against the folder of the spec file; they and
  `kernels.headers` (relative to the include folders) may not be absolute or start with `~`.
"""


INTRO = """\
# The chip spec language (spec_version 1)

A chip spec is one YAML file that tells torchfl-gen everything it needs to build a
PyTorch backend package for an accelerator: the torch device name, the vendor's driver
library and the C symbols of its hooks, the vendor kernel library (optional), the
supported dtypes, and which aten ops run on which vendor kernels or fallbacks.
`specs/npu.yaml` is the reference spec.

```yaml
spec_version: 1
chip: {name: npu, vendor: simnpu}
driver:
  libraries: [libsimnpu_runtime.so]
  version: "2.1"
  status: {success: 0, not_ready: 6, out_of_memory: 2}
  memcpy_kinds: {host_to_host: 0, host_to_device: 1, device_to_host: 2, device_to_device: 3}
  hooks: {driver_version: simnpuDriverGetVersion, ...}   # every hook is required
dtypes: [float32, float16]
ops:
  add.Tensor: {kernel: add}          # a vendor kernel
  mm: {kernel: mm, require: vendor}  # never falls back
  cumsum: {fallback: []}             # raises instead of using fallback.default
fallback: {default: [cpu], warn: once}
```

Rules beyond the key reference below:

""" + _rules() + """"""


# --------------------------------------------------------------------------- schema walk

def _resolve(schema: dict, node: dict) -> dict:
    """Merge a node's ``$ref`` target under the node's own keywords (the node wins)."""
    seen = 0
    while "$ref" in node and seen < 16:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            break
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target[part]
        merged = dict(target)
        merged.update({k: v for k, v in node.items() if k != "$ref"})
        node = merged
        seen += 1
    return node


def _type_of(schema: dict, node: dict) -> str:
    node = _resolve(schema, node)
    t = node.get("type")
    if t == "array":
        items = node.get("items")
        return "list of " + (_type_of(schema, items) if isinstance(items, dict) else "any")
    if t == "object":
        if isinstance(node.get("additionalProperties"), dict):
            return "mapping of " + _type_of(schema, node["additionalProperties"])
        return "mapping"
    if isinstance(t, list):
        return " or ".join(t)
    return t or "any"


def _fmt(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False) + "`"


def _allowed(schema: dict, node: dict) -> str:
    node = _resolve(schema, node)
    parts: list[str] = []
    if "const" in node:
        parts.append(f"exactly {_fmt(node['const'])}")
    if "enum" in node:
        parts.append("one of " + ", ".join(_fmt(v) for v in node["enum"]))
    if "pattern" in node:
        parts.append(f"pattern `{node['pattern']}`")
    if "minimum" in node or "maximum" in node:
        parts.append(f"{node.get('minimum', '-inf')} .. {node.get('maximum', 'inf')}")
    if "maxLength" in node:
        parts.append(f"at most {node['maxLength']} characters")
    if node.get("minItems"):
        parts.append(f"at least {node['minItems']} item" + ("s" if node["minItems"] > 1 else ""))
    if node.get("uniqueItems"):
        parts.append("no duplicates")
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        inner = _allowed(schema, node["items"])
        if inner:
            parts.append("items: " + inner)
    if isinstance(node.get("propertyNames"), dict) and "pattern" in node["propertyNames"]:
        parts.append(f"keys: pattern `{node['propertyNames']['pattern']}`")
    return "; ".join(parts)


def iter_properties(schema: dict) -> Iterator[tuple[str, dict, bool]]:
    """(dotted path, resolved node, required) for every key of the spec language, in
    schema order; a mapping of entries (``ops``) contributes ``ops.<op>`` and below."""

    def walk(node: dict, prefix: str) -> Iterator[tuple[str, dict, bool]]:
        node = _resolve(schema, node)
        required = set(node.get("required", ()))
        for key, sub in node.get("properties", {}).items():
            path = f"{prefix}.{key}" if prefix else key
            rsub = _resolve(schema, sub)
            yield path, rsub, key in required
            yield from walk(rsub, path)
        ap = node.get("additionalProperties")
        if isinstance(ap, dict):
            path = f"{prefix}.<op>" if prefix == "ops" else f"{prefix}.<key>"
            rap = _resolve(schema, ap)
            yield path, rap, False
            yield from walk(rap, path)

    yield from walk(schema, "")


def _cell(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|")


def render_spec_reference(schema: dict) -> str:
    """Markdown reference of every key in ``schema``: one table per top-level key."""
    lines = ["## Key reference", ""]
    top_required = set(schema.get("required", ()))
    for top, sub in schema.get("properties", {}).items():
        rsub = _resolve(schema, sub)
        req = "required" if top in top_required else "optional"
        lines += [f"### `{top}`", "", f"*{_type_of(schema, rsub)}, {req}.* {rsub.get('description', '')}".rstrip(), ""]
        rows = [(top, rsub, top in top_required)]
        rows += [(p, n, r) for p, n, r in iter_properties(schema) if p.startswith(top + ".")]
        lines += ["| Key | Type | Required | Default | Allowed | Description |",
                  "|---|---|---|---|---|---|"]
        for path, node, required in rows:
            default = _fmt(node["default"]) if "default" in node else ""
            lines.append("| " + " | ".join(_cell(c) for c in (
                f"`{path}`", _type_of(schema, node), "required" if required else "optional",
                default, _allowed(schema, node), node.get("description", ""))) + " |")
        lines.append("")
    return "\n".join(lines)


def render_hook_abi() -> str:
    """Markdown table of the driver hook ABI (generator/hook_abi.py)."""
    lines = [
        "## Driver hook ABI",
        "",
        "Every hook in `driver.hooks` names a C symbol of the driver libraries with this fixed",
        "signature (the shape of the CUDA runtime API). Hooks return an `int` status compared",
        "against `driver.status` (anything but `success` is an error, reported through",
        "`error_string`), except `error_string` itself. Streams and events are opaque handles",
        "(`void*`); a NULL stream is the current device's default stream. Device-scoped hooks",
        "act on the calling thread's current device (`set_device`).",
        "",
        "| Hook | C signature | Notes |",
        "|---|---|---|",
    ]
    for hook in REQUIRED_HOOKS:
        lines.append(f"| `{hook}` | `{_cell(c_function_type(hook))}` | {_cell(HOOK_NOTES.get(hook, ''))} |")
    lines.append("")
    return "\n".join(lines)


def render_collective_abi() -> str:
    """Markdown table of the collective hook ABI (generator/collective_abi.py)."""
    lines = [
        "## Collective hook ABI",
        "",
        "Every hook in `distributed.library.hooks` names a C symbol of the collective libraries",
        "with this fixed signature, NCCL's: a library that is NCCL (or RCCL, HCCL, ...) names its",
        "symbols and nothing else. Hooks return an `int` status compared against",
        "`distributed.library.status`, except `error_string`. `unique_id` is the library's id struct",
        "of `unique_id_bytes` bytes, passed by value; communicators and streams are opaque handles",
        "(`void*`, the chip's stream as the driver hooks take it). `datatype` and `op` are the codes",
        "of `distributed.library.dtypes` and `reduce_ops`. Collectives are stream-ordered and",
        "asynchronous: each enqueues its work on `stream` and returns.",
        "",
        "| Hook | C signature | Notes |",
        "|---|---|---|",
    ]
    for hook in collective_abi.COLLECTIVE_HOOKS:
        lines.append(f"| `{hook}` | `{_cell(collective_abi.c_function_type(hook))}` | "
                     f"{_cell(collective_abi.COLLECTIVE_HOOK_NOTES[hook])} |")
    lines.append("")
    return "\n".join(lines)


def render_spec_doc(schema: dict) -> str:
    """The whole docs/spec.md: header, intro, key reference, the driver and collective hook ABIs."""
    assert set(HOOK_SIGNATURES) == set(REQUIRED_HOOKS)
    return "\n".join([HEADER, "", INTRO, render_spec_reference(schema), render_hook_abi(),
                      render_collective_abi()]).rstrip() + "\n"


def write_spec_doc(path: str | Path, schema: dict | None = None) -> bool:
    """Write docs/spec.md to ``path``; True if its content changed."""
    if schema is None:
        from .spec import load_schema
        schema = load_schema()
    path = Path(path)
    text = render_spec_doc(schema)
    old = path.read_text(encoding="utf-8") if path.exists() else None
    if old == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


if __name__ == "__main__":  # python -m torchfl_gen.docs_gen [OUT]
    import sys
    out = sys.argv[1] if len(sys.argv) > 1 else DOC_REL
    print(("wrote " if write_spec_doc(out) else "up to date: ") + out)
