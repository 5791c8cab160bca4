"""The op support matrix: the spec's declared paths joined with an OpInfo sweep's results.

`generated/<chip>/tests/test_opinfo.py` writes one JSON line per OpInfo x dtype (outcome,
message, the aten ops it ran and on which path); this module turns that file into
docs/ops/<chip>.md, .html and .json. Output is deterministic: sorted, no clock (the date shown is
the one recorded in the results file).

Headline figures, over every OpInfo entry of torch's op_db (name + variant):
  basic  = every tested dtype passes, on any path;
  strict = every tested dtype passes and no aten op it ran fell back to the CPU.
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from .model import ChipSpec
from .opinfo_map import CASES as VENDOR_CASES

PASS, FAIL, ERROR, NOT_COMPARABLE = "pass", "fail", "error", "not_comparable"
# What a passing record may name samples for (test_opinfo.py): decided by the float64 accuracy
# rule; backward not compared because the chip picked other elements among ties.
SAMPLE_NOTES = ("accuracy_rule", "ties_backward_not_compared", "device_outputs")
STATUSES = ("strict", "basic", "not_comparable", "fail", "untested")
PATH_ORDER = {"cpu": 0, "triton": 1, "vendor": 2}


class ResultsError(Exception):
    """The results file is missing or not what test_opinfo.py writes."""


def default_results(spec: ChipSpec) -> Path:
    return Path(".torchfl") / f"opinfo-{spec.chip.name}.jsonl"


def declared_path(spec: ChipSpec, op: str) -> str:
    """What the spec says aten op `op` ("name.overload") runs on: vendor | triton | cpu | error."""
    return spec.route(op).path


def _opinfo_key(op: str, variant: str) -> str:
    return f"{op}.{variant}" if variant else op


def op_db_keys() -> list[str]:
    """Every OpInfo entry of the installed torch's op_db, as name[.variant]."""
    from torch.testing._internal.common_methods_invocations import op_db

    return sorted({_opinfo_key(info.name, info.variant_test_name) for info in op_db})


def load_results(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"{path}: no such results file (run the OpInfo sweep first)")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            for key in ("op", "dtype", "outcome"):
                if not isinstance(record.get(key), str):
                    raise ValueError(f"no {key!r}")
        except ValueError as error:
            raise ResultsError(f"{path}:{number}: not an OpInfo result line ({error})") from None
        records.append(record)
    return records


@dataclass
class OpRow:
    key: str
    dtypes: dict[str, dict] = field(default_factory=dict)   # dtype -> {outcome, message, paths}
    paths: dict[str, dict[str, int]] = field(default_factory=dict)  # aten op -> path -> calls (all dtypes)
    declared: dict[str, str] = field(default_factory=dict)  # aten op -> declared path

    @property
    def status(self) -> str:
        outcomes = [r["outcome"] for r in self.dtypes.values()]
        if not outcomes:
            return "untested"
        if any(o not in (PASS, NOT_COMPARABLE) for o in outcomes):
            return "fail"
        if any(o == NOT_COMPARABLE for o in outcomes):
            return "not_comparable"
        on_cpu = any(calls for p in self.paths.values() for path, calls in p.items() if path == "cpu")
        return "basic" if on_cpu else "strict"

    def passed(self) -> list[str]:
        return sorted(d for d, r in self.dtypes.items() if r["outcome"] == PASS)

    def failed(self) -> list[str]:
        return sorted(d for d, r in self.dtypes.items() if r["outcome"] not in (PASS, NOT_COMPARABLE))

    def not_comparable(self) -> list[str]:
        return sorted(d for d, r in self.dtypes.items() if r["outcome"] == NOT_COMPARABLE)


@dataclass
class Matrix:
    chip: str
    spec_source: str
    results: str
    recorded: str
    torch: str
    dtypes: list[str]
    rows: list[OpRow]
    reproduce: str

    def headline(self) -> dict[str, int]:
        counts = {s: 0 for s in STATUSES}
        for row in self.rows:
            counts[row.status] += 1
        return {
            "opinfos": len(self.rows),
            "tested": len(self.rows) - counts["untested"],
            "basic": counts["basic"] + counts["strict"],
            "strict": counts["strict"],
            "not_comparable": counts["not_comparable"],
            "failing": counts["fail"],
            "untested": counts["untested"],
        }

    def by_dtype(self) -> dict[str, dict[str, int]]:
        """Per dtype, over the OpInfos tested in it: how many pass (basic), and pass with no
        CPU fallback in that dtype's run (strict); not-comparable ones count as neither."""
        figures = {}
        for dtype in self.dtypes:
            tested = basic = strict = 0
            for row in self.rows:
                result = row.dtypes.get(dtype)
                if result is None:
                    continue
                tested += 1
                if result["outcome"] == PASS:
                    basic += 1
                    on_cpu = any(calls for p in result["paths"].values() for path, calls in p.items() if path == "cpu")
                    strict += not on_cpu
            figures[dtype] = {"tested": tested, "basic": basic, "strict": strict}
        return figures


RESUME_NOTE = ("If the test process dies in an op (a crash), rerun the pytest command with "
               "TORCH_FL_OPINFO_RESUME=1 until it completes: finished tests are kept and the crashing one is "
               "recorded as `crash` (docs/ops/README.md).")
FULL_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "bool")


def reproduce_command(spec_source: str, chip: str, dtypes: list[str]) -> str:
    env = "TORCH_FL_OPINFO=full"
    if dtypes and set(dtypes) != set(FULL_DTYPES):
        env += f" TORCH_FL_OPINFO_DTYPES={','.join(dtypes)}"  # already in FULL_DTYPES order, others after
    return (f"{env} python -m pytest generated/{chip}/tests/test_opinfo.py -q -p no:randomly && "
            f"python -m torchfl_gen matrix {spec_source}")


def build_matrix(spec: ChipSpec, records: list[dict], results_name: str,
                 opinfo_keys: list[str] | None = None) -> Matrix:
    """Join the spec with the records; rows for every OpInfo in `opinfo_keys` (default: op_db)."""
    keys = set(op_db_keys() if opinfo_keys is None else opinfo_keys)
    rows: dict[str, OpRow] = {}
    recorded, versions, dtypes = set(), set(), set()
    for record in records:
        key = _opinfo_key(record["op"], record.get("variant") or "")
        keys.add(key)
        row = rows.setdefault(key, OpRow(key))
        paths = {op: {p: int(c) for p, c in by_path.items()} for op, by_path in (record.get("paths") or {}).items()}
        row.dtypes[record["dtype"]] = {"outcome": record["outcome"], "message": record.get("message") or "",
                                       "paths": {op: dict(sorted(p.items())) for op, p in sorted(paths.items())},
                                       **{field: [str(w) for w in record.get(field) or []] for field in SAMPLE_NOTES}}
        for op, by_path in paths.items():
            merged = row.paths.setdefault(op, {})
            for path, calls in by_path.items():
                merged[path] = merged.get(path, 0) + calls
        dtypes.add(record["dtype"])
        if record.get("recorded"):
            recorded.add(record["recorded"])
        if record.get("torch"):
            versions.add(record["torch"])
    # vendor ops the generator checks with an OpInfo: declared for that OpInfo even when unseen
    mapped: dict[str, set[str]] = {}
    for op, cases in VENDOR_CASES.items():
        for case in cases:
            if case[0] == "opinfo" and spec.op(op) is not None and spec.op(op).kernel is not None:
                mapped.setdefault(case[1], set()).add(op)
    for key in keys:
        row = rows.setdefault(key, OpRow(key))
        row.paths = {op: dict(sorted(p.items())) for op, p in sorted(row.paths.items())}
        for op in sorted(set(row.paths) | mapped.get(key, set())):
            row.declared[op] = declared_path(spec, op)
    recorded_text = " .. ".join(sorted(recorded)[::max(1, len(recorded) - 1)]) if recorded else "unknown"
    dtype_list = sorted(dtypes, key=lambda d: (FULL_DTYPES.index(d) if d in FULL_DTYPES else 99, d))
    return Matrix(chip=spec.chip.name, spec_source=spec.source_display, results=results_name,
                  recorded=recorded_text, torch=", ".join(sorted(versions)) or "unknown", dtypes=dtype_list,
                  rows=[rows[k] for k in sorted(rows)],
                  reproduce=reproduce_command(spec.source_display, spec.chip.name, dtype_list))


# -- rendering ---------------------------------------------------------------------------------

def _by_path(paths: dict[str, dict[str, int]]) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {}
    for op, by_path in paths.items():
        for path, calls in by_path.items():
            if calls:
                groups.setdefault(path, []).append(op)
    return [(p, sorted(groups[p])) for p in sorted(groups, key=lambda p: (PATH_ORDER.get(p, 9), p))]


def _declared_groups(declared: dict[str, str]) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {}
    for op, path in declared.items():
        groups.setdefault(path, []).append(op)
    order = {"error": -1, **PATH_ORDER}
    return [(p, sorted(groups[p])) for p in sorted(groups, key=lambda p: (order.get(p, 9), p))]


def _groups_text(groups) -> str:
    return "; ".join(f"{path}: {', '.join(ops)}" for path, ops in groups) or "-"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def _sample_listing(m: Matrix, field: str, title: str, intro: str) -> list[str]:
    """A section listing, per passing (OpInfo, dtype), the samples its record names in `field`."""
    rows = [(row.key, d, r[field]) for row in m.rows for d, r in sorted(row.dtypes.items())
            if r["outcome"] == PASS and r.get(field)]
    if not rows:
        return []
    lines = ["", f"## {title}", "", intro, "", "| OpInfo | dtype | where |", "|---|---|---|"]
    return lines + [f"| `{_md_cell(key)}` | {dtype} | {_md_cell(', '.join(where))} |" for key, dtype, where in rows]


def render_md(m: Matrix) -> str:
    h = m.headline()
    out = [
        f"# Op support matrix: {m.chip}",
        "",
        f"Generated by `torchfl-gen matrix {m.spec_source}` from `{m.results}` "
        f"(recorded {m.recorded}; torch {m.torch}). Do not edit.",
        "",
        f"Reproduce: `{m.reproduce}`",
        "",
        RESUME_NOTE,
        "",
        f"Dtypes swept: {', '.join(m.dtypes) or 'none'}.",
        "",
        f"- OpInfo entries in op_db: **{h['opinfos']}** (tested: {h['tested']}, untested: {h['untested']})",
        f"- **basic**: {h['basic']} (every tested dtype passes, any path)",
        f"- **strict**: {h['strict']} (every tested dtype passes, no CPU fallback observed)",
        f"- failing: {h['failing']}; not comparable (random/uninitialised output): {h['not_comparable']}",
        "",
        "Per dtype (OpInfos tested in that dtype; strict: passed with no CPU fallback in that dtype's run):",
        "",
        "| dtype | tested | basic | strict |",
        "|---|---|---|---|",
        *(f"| {d} | {f['tested']} | {f['basic']} ({_percent(f['basic'], f['tested'])}) | "
          f"{f['strict']} ({_percent(f['strict'], f['tested'])}) |" for d, f in m.by_dtype().items()),
        "",
        "| OpInfo | status | dtypes pass | dtypes fail | paths observed | declared |",
        "|---|---|---|---|---|---|",
    ]
    for row in m.rows:
        failed = row.failed() + [f"{d} (not comparable)" for d in row.not_comparable()]
        out.append("| " + " | ".join(_md_cell(c) for c in (
            f"`{row.key}`", row.status, ", ".join(row.passed()) or "-", ", ".join(failed) or "-",
            _groups_text(_by_path(row.paths)), _groups_text(_declared_groups(row.declared)))) + " |")
    out += _sample_listing(m, "accuracy_rule", "Passed by the float64 accuracy rule",
                           "Outside the fixed tolerances, but no less accurate than the CPU against a float64 "
                           "computation (docs/ops/README.md, \"How results are compared\"):")
    out += _sample_listing(m, "ties_backward_not_compared", "Backward not compared: other elements among ties",
                           "The chip's indices picked other elements of equal value than the CPU's (valid: checked "
                           "by what they select); the gradient follows them, so it was not compared:")
    out += _sample_listing(m, "device_outputs", "Outputs as torch defines them on devices",
                           "Outputs whose dtype or shape torch defines otherwise on devices than on the CPU (its "
                           "meta function): compared in the device's dtype, or, where the CPU's output is empty, "
                           "not compared (docs/ops/README.md, \"How results are compared\"):")
    failures = [(row.key, d, r["outcome"], r["message"]) for row in m.rows for d, r in sorted(row.dtypes.items())
                if r["outcome"] not in (PASS, NOT_COMPARABLE)]
    if failures:
        out += ["", "## Failures", "", "| OpInfo | dtype | outcome | message |", "|---|---|---|---|"]
        for key, dtype, outcome, message in failures:
            out.append(f"| `{_md_cell(key)}` | {dtype} | {outcome} | {_md_cell(message)} |")
    return "\n".join(out) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;font-size:14px}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
th{background:#eee;position:sticky;top:0}code{font-size:13px}
.strict{background:#b7e4b0}.basic{background:#e3f4c4}.fail{background:#f4b6b6}
.not_comparable{background:#e6e6e6}.untested{background:#fff;color:#888}
.pass{background:#c9ecc3}.error{background:#f4b6b6}.nc{background:#e6e6e6}
.p-cpu{color:#b34700;font-weight:bold}.p-triton{color:#5b3fa6}.p-vendor{color:#1d6b1d}.p-error{color:#b00}"""


def _html_groups(groups) -> str:
    return "<br>".join(f'<span class="p-{html.escape(p)}">{html.escape(p)}</span>: '
                       + html.escape(", ".join(ops)) for p, ops in groups) or "-"


def render_html(m: Matrix) -> str:
    h = m.headline()
    e = html.escape
    head = "".join(f"<th>{e(d)}</th>" for d in m.dtypes)
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Op support matrix: {e(m.chip)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Op support matrix: {e(m.chip)}</h1>",
        f"<p>Generated by <code>torchfl-gen matrix {e(m.spec_source)}</code> from <code>{e(m.results)}</code> "
        f"(recorded {e(m.recorded)}; torch {e(m.torch)}). Do not edit.</p>",
        f"<p>Reproduce: <code>{e(m.reproduce)}</code></p>", f"<p>{e(RESUME_NOTE)}</p>",
        f"<ul><li>OpInfo entries in op_db: <b>{h['opinfos']}</b> (tested {h['tested']}, untested {h['untested']})</li>",
        f"<li><b>basic</b>: {h['basic']} (every tested dtype passes, any path)</li>",
        f"<li><b>strict</b>: {h['strict']} (every tested dtype passes, no CPU fallback observed)</li>",
        f"<li>failing: {h['failing']}; not comparable: {h['not_comparable']}</li></ul>",
        f"<table><thead><tr><th>OpInfo</th><th>status</th>{head}<th>paths observed</th><th>declared</th></tr></thead><tbody>",
    ]
    for row in m.rows:
        cells = []
        for d in m.dtypes:
            r = row.dtypes.get(d)
            if r is None:
                cells.append("<td></td>")
                continue
            cls = {"pass": "pass", "not_comparable": "nc"}.get(r["outcome"], "fail")
            title = f' title="{e(r["message"])}"' if r["message"] else ""
            cells.append(f'<td class="{cls}"{title}>{e(r["outcome"])}</td>')
        out.append(f'<tr><td><code>{e(row.key)}</code></td><td class="{row.status}">{e(row.status)}</td>'
                   + "".join(cells) + f"<td>{_html_groups(_by_path(row.paths))}</td>"
                   f"<td>{_html_groups(_declared_groups(row.declared))}</td></tr>")
    out += ["</tbody></table>", "</body></html>"]
    return "\n".join(out) + "\n"


def render_json(m: Matrix) -> str:
    data = {
        "chip": m.chip, "spec": m.spec_source, "results": m.results, "recorded": m.recorded, "torch": m.torch,
        "dtypes": m.dtypes, "reproduce": m.reproduce, "headline": m.headline(), "by_dtype": m.by_dtype(),
        "ops": {row.key: {"status": row.status, "dtypes": row.dtypes, "paths": row.paths,
                          "declared": row.declared} for row in m.rows},
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def write_matrix(m: Matrix, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, text in ((".md", render_md(m)), (".html", render_html(m)), (".json", render_json(m))):
        path = out_dir / f"{m.chip}{suffix}"
        path.write_text(text, encoding="utf-8", newline="\n")
        written.append(path)
    return written
