"""A schema-aware hostile corpus: variants of every real spec in specs/, one class per hole of
issue 23, each of which must end in located errors, quickly, without a traceback.

The variants are derived from the schema and the specs, so a field added to either is covered:
a trailing newline on every string the schema constrains by a pattern (values and keys);
absolute, `~` and newline paths in every path field; Python and C++ keywords and torch's own
names in every identifier field; a lone surrogate in every string; oversized documents (ops,
amp op lists, overlays, driver versions, lists, errors); non-regular files given as the spec;
spellings of spec_version other than `1`; monitor commands other than the parser's read-only
query; overlays without a floating dtype.

Deterministic (no randomness). Run as a script to measure another generator on the same
corpus, e.g. the one before these checks::

    PYTHONPATH=/tmp/before-path:tests python3 tests/generator/test_spec_hostile.py

which prints, per class, the cases tried and their outcomes (docs/reliability.md quotes both).
"""
from __future__ import annotations

import copy
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SPECS = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "specs").glob("*.yaml"))}
DATA = {name: yaml.safe_load(text) for name, text in SPECS.items()}
PRIVATEUSE1 = [n for n, d in DATA.items() if d["chip"].get("integration", "privateuse1") == "privateuse1"]
NATIVE = [n for n, d in DATA.items() if d["chip"].get("integration") == "native"]
LIMIT_S = 10.0   # per case


def _schema() -> dict:
    return json.loads((ROOT / "generator" / "schema" / "chip-spec.schema.json").read_text(encoding="utf-8"))


SCHEMA = _schema()


# --- walking a document with its schema ----------------------------------------------------------

def _resolve(node: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    if isinstance(node, dict) and "oneOf" in node:   # an overlay entry or null
        node = next((_resolve(b) for b in node["oneOf"] if b != {"type": "null"}), node)
    return node


def _child(node: dict, key) -> dict:
    node = _resolve(node)
    if isinstance(key, int):
        prefix = node.get("prefixItems", [])
        return _resolve(prefix[key] if key < len(prefix) else node.get("items", {}))
    props = node.get("properties", {})
    if key in props:
        return _resolve(props[key])
    extra = node.get("additionalProperties")
    return _resolve(extra) if isinstance(extra, dict) else {}


def _strings(data, node=SCHEMA, path=()):
    """(path, schema node, is_key) of every string value and every mapping key of ``data``."""
    node = _resolve(node)
    if isinstance(data, dict):
        for key, value in data.items():
            yield path + (key,), node.get("propertyNames", {}), True
            yield from _strings(value, _child(node, key), path + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _strings(value, _child(node, i), path + (i,))
    elif isinstance(data, str):
        yield path, node, False


def _set(doc, path, value):
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value


def _rename_key(doc, path, new_key):
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    items = list(parent.items())
    parent.clear()
    for key, value in items:
        parent[new_key if key == path[-1] else key] = value


def _dump(doc) -> bytes:
    # allow_unicode=False: a lone surrogate is written as the escape "\uD800", as a hostile spec would.
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=False, width=1 << 30).encode("utf-8")


def _variant(spec: str, path, value=None, *, key=None) -> tuple[str, bytes, tuple]:
    """The spec with ``path``'s value (or key) replaced; errors are expected at or below its parent."""
    doc = copy.deepcopy(DATA[spec])
    if key is not None:
        _rename_key(doc, path, key)
    else:
        _set(doc, path, value)
    return spec, _dump(doc), tuple(path[:-1])


def _text(spec: str, old: str, new: str, count: int = 1) -> tuple[str, bytes]:
    text = SPECS[spec]
    assert old in text, (spec, old)
    return spec, text.replace(old, new, count).encode("utf-8")


def _label(path) -> str:
    return ".".join(str(p) for p in path)


# --- the classes -----------------------------------------------------------------------------------

def trailing_newline():
    """A final newline on every string a pattern constrains, values and keys (ops, versions)."""
    for spec in SPECS:
        for path, node, is_key in _strings(DATA[spec]):
            if "pattern" not in node:
                continue
            if is_key:
                yield f"{spec} key {_label(path)}", _variant(spec, path, key=path[-1] + "\n")
            else:
                value = DATA[spec]
                for part in path:
                    value = value[part]
                yield f"{spec} {_label(path)}", _variant(spec, path, value + "\n")


PATH_FIELDS = {("kernels", "headers"): ["/etc/passwd.h", "/proc/self/environ.h", "//etc/x.h", "~/x.h", "~root/x.h",
                                        "simnpu/x\n.h", "x.h\n", "a/\n/../../etc/passwd.h"],
               ("kernels", "include_dirs"): ["/usr/include", "//usr/include", "~", "~/sdk", "a\nb", "../simnpu\n"],
               ("kernels", "library_dirs"): ["/usr/lib", "~/lib", "lib\n"],
               ("kernels", "sources"): ["/etc/x.cpp", "~/x.cpp", "//x.cpp", "missing\n.cpp", "missing.cpp\n"],
               ("driver", "search_paths"): ["/usr/lib", "~", "//lib", "lib\n"]}


def paths():
    """Absolute, `~` and newline paths in every path field of every spec that has it."""
    for spec in SPECS:
        for (section, key), values in PATH_FIELDS.items():
            block = DATA[spec].get(section)
            if not isinstance(block, dict) or key not in block or not block[key]:
                continue
            for value in values:
                yield f"{spec} {section}.{key}={value!r}", _variant(spec, (section, key, 0), value)


PY_KEYWORDS = ["lambda", "import", "class", "def", "from", "not", "match", "case", "type"]
TORCH_NAMES = ["nn", "fft", "linalg", "special", "testing", "leaf", "float", "half", "sparse", "cuda", "cpu",
               "meta", "hip", "xpu", "mps", "mtia", "distributed", "autograd", "storage", "tensor", "to", "cdouble"]
CPP_NAMES = ["class", "int", "namespace", "delete", "operator", "and", "typename", "co_await", "__builtin_trap",
             "_Exit", "a__b"]
C_SYMBOLS = ["int", "return"]


def identifiers():
    """Keywords of the target language and torch's own names in every identifier field."""
    for spec in SPECS:
        for name in PY_KEYWORDS + ([] if spec in NATIVE else TORCH_NAMES):
            yield f"{spec} chip.name={name}", _variant(spec, ("chip", "name"), name)
        data = DATA[spec]
        if "kernels" in data:
            for name in CPP_NAMES:
                yield f"{spec} kernels.namespace={name}", _variant(spec, ("kernels", "namespace"), name)
                yield f"{spec} kernels.namespace=vendor::{name}", _variant(spec, ("kernels", "namespace"),
                                                                          f"vendor::{name}")
        op = next((op for op, e in (data.get("ops") or {}).items() if isinstance(e, dict) and "kernel" in e), None)
        if op is not None:
            for name in CPP_NAMES:
                yield f"{spec} ops.{op}.kernel={name}", _variant(spec, ("ops", op, "kernel"), name)
        for hook in (data.get("driver") or {}).get("hooks", {}):
            for name in C_SYMBOLS:
                yield f"{spec} driver.hooks.{hook}={name}", _variant(spec, ("driver", "hooks", hook), name)


def surrogates():
    """A lone surrogate in every string of every spec, values and keys."""
    for spec in SPECS:
        for path, _node, is_key in _strings(DATA[spec]):
            if is_key:
                yield f"{spec} key {_label(path)}", _variant(spec, path, key=path[-1] + "\ud800")
            else:
                value = DATA[spec]
                for part in path:
                    value = value[part]
                yield f"{spec} {_label(path)}", _variant(spec, path, "ok" + value + "\udc00")


def _many(n: int, fmt: str, sep: str = "") -> str:
    return sep.join(fmt.format(i=i) for i in range(n))


def oversized():
    """More than a spec may hold: each must stop at its cap, quickly."""
    npu = "npu.yaml"
    yield "50,000 unknown ops", _text(npu, "\nops:\n", "\nops:\n" + _many(50000, "  zz{i}: {{}}\n"))
    yield "5,000 unknown ops", _text(npu, "\nops:\n", "\nops:\n" + _many(5000, "  zz{i}: {{fallback: [cpu]}}\n"))
    yield "4,000 unknown ops (under the cap)", _text(npu, "\nops:\n", "\nops:\n" + _many(4000, "  zz{i}: {{}}\n"))
    yield "50,000 amp.fp32_ops", _text(npu, "\namp:\n", "\namp:\n  fp32_ops: [" + _many(50000, "zz{i}", ", ") + "]\n")
    yield "4,000 amp.fp32_ops (under the cap)", _text(npu, "\namp:\n", "\namp:\n  fp32_ops: ["
                                                       + _many(4000, "zz{i}", ", ") + "]\n")
    yield "50,000 unknown ops in an overlay", _text(npu, "    \"2.0\":\n      ops:\n", "    \"2.0\":\n      ops:\n"
                                                    + _many(50000, "        zz{i}: {{}}\n"))
    yield "1,000 driver versions", _text(npu, "  versions:\n", "  versions:\n"
                                         + _many(1000, '    "9.{i}": {{ops: {{zz{i}: null}}}}\n'))
    yield "65 driver versions", _text(npu, "  versions:\n", "  versions:\n" + _many(65, '    "9.{i}": {{}}\n'))
    yield "200,000-element list", _text(npu, "dtypes: [", "dtypes: [" + "1, " * 200000)
    yield "200,000 distinct items", _text(npu, "dtypes: [", "dtypes: [" + _many(200000, "{i}", ",") + ", ")
    yield "4,000 distinct mappings in a list", _text(npu, "\ndtypes: [", "\ndtypes: ["
                                                      + _many(4000, "{{a: {i}}}", ", ") + ", ")
    yield "4,000 duplicate dtypes", _text(npu, "dtypes: [", "dtypes: [" + "float32, " * 4000)
    yield "100,000 keys in chip", _text(npu, "\nchip:\n", "\nchip:\n" + _many(100000, "  k{i}: 1\n"))
    yield "33 levels of nesting", ("npu.yaml", b"spec_version: 1\nchip: " + b"[" * 33 + b"]" * 33 + b"\n")
    yield "over 1 MiB", _text(npu, "\nchip:\n", "\n#" + "x" * (1 << 20) + "\nchip:\n")
    yield "a 5,000-digit driver version", _text(npu, 'version: "2.1"', 'version: "' + "9" * 5000 + '.1"')
    yield "driver.version 3000000.0", _text(npu, 'version: "2.1"', 'version: "3000000.0"')
    yield "driver.version 2147484.0", _text(npu, 'version: "2.1"', 'version: "2147484.0"')
    yield "overlay version 3000000.0", _text(npu, '    "2.0":', '    "3000000.0":')
    yield "hip encoding, driver.version 300.0", _text("hip_pu1.yaml", 'version: "5.2"', 'version: "300.0"')


def non_regular_files():
    """Given as the spec's path (load_spec): each refused at once, before any read."""
    yield "a FIFO", "fifo"
    yield "a directory", "dir"
    yield "/dev/zero", "/dev/zero"
    yield "/dev/null", "/dev/null"
    yield "a link to a FIFO", "fifo-link"


SPEC_VERSIONS = ["1.0", "0x1", "+1", "01", "0o1", "1_", "1.00", "1e0", "0b1", "+0x1", "!!int 1.0", "1.0e+0"]


def spec_versions():
    for spec in SPECS:
        for written in SPEC_VERSIONS:
            yield f"{spec} spec_version: {written}", _text(spec, "spec_version: 1\n", f"spec_version: {written}\n")


MONITOR_COMMANDS = {
    "nvidia-smi-csv": [["sh", "-c", "id"], ["bash", "-c", "id"], ["env", "nvidia-smi"], ["python3", "-c", "1"],
                       ["rocm-smi", "--json"], ["nvidia-smi", "-r"], ["nvidia-smi", "--gpu-reset"],
                       ["nvidia-smi", "-pl", "100"], ["nvidia-smi", "-pm", "1"], ["nvidia-smi", "-f", "/tmp/x"],
                       ["nvidia-smi", "--query-gpu=index", "--format=csv", "-f", "/etc/x"],
                       ["nvidia-smi", "--query-gpu=index", "extra"], ["nvidia-smi", "--query-gpu"],
                       ["nvidia-smi", "-ac", "5001,1590"], ["nvidia-smi", "-lgc", "0"], ["nvidia-smi\n", "-L"]],
    "rocm-smi-json": [["sh", "-c", "id"], ["nvidia-smi", "--format=csv"], ["rocm-smi", "--setfan", "255"],
                      ["rocm-smi", "--resetclocks"], ["rocm-smi", "--gpureset", "-d", "0"],
                      ["rocm-smi", "--json", "stray"], ["rocm-smi", "--json=1"], ["rocm-smi", "--setpoweroverdrive", "1"],
                      ["rocm-smi", "--showuse", "--setsclk", "7"], ["rocm-smi", "--loglevel", "debug"]],
}


def monitor_commands():
    for spec in NATIVE:
        parser = DATA[spec]["native"]["monitor"]["parser"]
        for command in MONITOR_COMMANDS[parser]:
            yield f"{spec} {command}", _variant(spec, ("native", "monitor", "command"), command)


def overlay_dtypes():
    """An overlay whose dtypes hold no floating type (its amp dtypes dropped, so that is the one error)."""
    for dtypes in (["int32"], ["complex64"], ["complex64", "complex128"], ["bool", "int8", "int64"]):
        doc = copy.deepcopy(DATA["npu.yaml"])
        doc.pop("amp", None)
        doc["driver"]["versions"]["2.0"]["dtypes"] = dtypes
        yield f"npu.yaml overlay dtypes {dtypes}", ("npu.yaml", _dump(doc))


CLASSES = {
    "trailing newline on every patterned string": trailing_newline,
    "absolute, ~ and newline paths": paths,
    "keywords and torch's names as identifiers": identifiers,
    "lone surrogate in every string": surrogates,
    "oversized documents": oversized,
    "non-regular files as the spec": non_regular_files,
    "spec_version spellings other than 1": spec_versions,
    "monitor commands": monitor_commands,
    "overlay without a floating dtype": overlay_dtypes,
}


# --- running a case ------------------------------------------------------------------------------------

class _Timeout(BaseException):   # not caught by a generator's "except Exception"
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _special_file(kind: str, folder: Path) -> Path:
    if kind.startswith("/"):
        return Path(kind)
    if kind == "dir":
        path = folder / "specs" / "dir.yaml"
        path.mkdir(parents=True, exist_ok=True)
        return path
    fifo = folder / "specs" / "fifo.yaml"
    fifo.parent.mkdir(parents=True, exist_ok=True)
    if not fifo.exists():
        os.mkfifo(fifo)
    if kind == "fifo":
        return fifo
    link = folder / "specs" / "link.yaml"
    if not link.exists():
        link.symlink_to(fifo)
    return link


def outcome(case, limit_s: float = LIMIT_S) -> tuple[str, float, str]:
    """("refused" | "accepted" | "unlocated" | "traceback" | "timeout", seconds, detail).

    "refused": SpecErrors whose every error names the file, a line and column >= 1 and a
    message, none an internal error."""
    from torchfl_gen.errors import SpecErrors
    from torchfl_gen.spec import load_spec, parse_spec_bytes

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if isinstance(case, str):   # a non-regular file
                path = _special_file(case, Path(tmp))
                display = str(path)
                load_spec(path, display=display)
            else:
                name, raw, *expect = case
                display = f"specs/{name}"
                parse_spec_bytes(raw, ROOT / "specs" / name, display)
        return "accepted", time.monotonic() - start, ""
    except SpecErrors as errors:
        bad = [e for e in errors.errors if not (e.file == display and e.line >= 1 and e.column >= 1
                                                and e.message.strip() and "internal error" not in e.message)]
        kind = "unlocated" if bad or not errors.errors else "refused"
        if kind == "refused" and not isinstance(case, str) and expect:
            from torchfl_gen.yaml_loader import format_path
            where = format_path(expect[0])
            if not any(e.path.startswith(where) for e in errors.errors):
                kind = "refused elsewhere"   # the variant is broken, or the error misplaced
        return kind, time.monotonic() - start, str(bad[0] if bad else errors.errors[0])
    except _Timeout:
        return "timeout", time.monotonic() - start, f"over {limit_s} s"
    except Exception as e:  # noqa: BLE001
        return "traceback", time.monotonic() - start, f"{type(e).__name__}: {e}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_corpus(limit_s: float = LIMIT_S) -> dict[str, dict]:
    """Per class: the count of each outcome, and the cases that were not refused."""
    out = {}
    for cls, make in CLASSES.items():
        counts, odd, slowest = Counter(), [], 0.0
        for label, case in make():
            kind, seconds, detail = outcome(case, limit_s)
            counts[kind] += 1
            counts["cases"] += 1
            slowest = max(slowest, seconds)
            if kind != "refused":
                odd.append((label, kind, detail))
        out[cls] = {"counts": dict(counts), "not_refused": odd, "slowest_s": round(slowest, 2)}
    return out


# --- the test ---------------------------------------------------------------------------------------

def test_every_hostile_variant_is_a_located_error_within_the_limit():
    """Every case of every class: refused with located errors, within LIMIT_S, no traceback.
    The classes each exercise a real spec (a class yielding nothing would be a broken corpus)."""
    from e2e_helpers import record_figures

    start = time.monotonic()
    results = run_corpus()
    problems = {cls: r["not_refused"] for cls, r in results.items() if r["not_refused"]}
    assert not problems, json.dumps(problems, indent=1, default=str)[:6000]
    assert all(r["counts"].get("cases", 0) > 0 for r in results.values()), results
    total = sum(r["counts"]["cases"] for r in results.values())
    record_figures("spec hostile corpus", cases=total, refused_with_located_errors=total, accepted=0,
                   tracebacks=0, seconds=round(time.monotonic() - start, 1),
                   per_class={cls: r["counts"]["cases"] for cls, r in results.items()},
                   slowest_case_s=max(r["slowest_s"] for r in results.values()))


def test_the_corpus_starts_from_valid_specs():
    """Each spec, dumped as the variants are, validates: a variant's errors are its own."""
    for spec in SPECS:
        assert outcome((spec, _dump(copy.deepcopy(DATA[spec]))))[0] == "accepted", spec


def test_the_monitor_tables_of_generator_and_runtime_agree():
    """The spec check and the runtime's DeviceMonitor refuse the same commands: one table, twice."""
    from torch_fl import monitor
    from torchfl_gen.checks import native

    assert native.MONITOR_TOOLS == monitor.MONITOR_TOOLS
    for spec in NATIVE:
        parser = DATA[spec]["native"]["monitor"]["parser"]
        assert monitor.command_problem(parser, DATA[spec]["native"]["monitor"]["command"]) is None
        assert native.monitor_command_problem(parser, DATA[spec]["native"]["monitor"]["command"]) is None
        for command in MONITOR_COMMANDS[parser]:
            assert monitor.command_problem(parser, command) is not None, command
            assert native.monitor_command_problem(parser, command) is not None, command


if __name__ == "__main__":   # measure any generator on the corpus (see the module's docstring)
    limit = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    import torchfl_gen

    print("generator:", torchfl_gen.__file__, file=sys.stderr)
    results = run_corpus(limit)
    for cls, r in results.items():
        c = r["counts"]
        print(json.dumps({"class": cls, **c, "slowest_s": r["slowest_s"]}))
        for label, kind, detail in r["not_refused"][:200]:
            print("   ", kind, re.sub(r"\s+", " ", label)[:100], "|", detail[:160])
