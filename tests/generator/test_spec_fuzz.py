"""Hostile and random specs: every input ends in a valid spec or in located errors.

Property-based (hypothesis) over the loader and validator: random mutations of every real
spec in specs/ (values replaced by values of any type, keys deleted or added), random
byte-level damage to their text, and binary garbage; then the classic attacks on YAML
loaders (alias bombs, deep nesting, huge documents, duplicate keys, odd tags, bad
encodings). Never a traceback, never an "internal error", never a hang; a spec that
validates also renders, and every Python file it renders compiles.
"""
from __future__ import annotations

import copy
import time

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from e2e_helpers import record_figures  # noqa: E402
from spec_helpers import ROOT  # noqa: E402
from torchfl_gen.build import generate  # noqa: E402
from torchfl_gen.errors import SpecErrors  # noqa: E402
from torchfl_gen.model import ChipSpec  # noqa: E402
from torchfl_gen.render import render  # noqa: E402
from torchfl_gen.spec import parse_spec_bytes  # noqa: E402

SPECS = {p.name: p.read_bytes() for p in sorted((ROOT / "specs").glob("*.yaml"))}
DATA = {name: yaml.safe_load(raw) for name, raw in SPECS.items()}
FUZZ = settings(max_examples=150, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TRIED = {"valid": 0, "rejected": 0}


def outcome(raw: bytes, name: str = "npu.yaml"):
    """The spec, or None after checking that every error is located and none is internal."""
    display = f"specs/{name}"
    start = time.monotonic()
    try:
        spec = parse_spec_bytes(raw, ROOT / "specs" / name, display)
    except SpecErrors as errors:
        assert time.monotonic() - start < 10, "validation took over 10 s"
        assert errors.errors, "SpecErrors without an error"
        for e in errors.errors:
            assert e.file == display and e.line >= 1 and e.column >= 1, e
            assert e.message.strip() and "internal error" not in e.message, str(e)
        TRIED["rejected"] += 1
        return None
    assert time.monotonic() - start < 10, "validation took over 10 s"
    TRIED["valid"] += 1
    return spec


def renders(spec, tmp_path) -> None:
    """A valid spec generates a whole package (every file rendered is written, nothing else),
    and its Python files are Python."""
    if not isinstance(spec, ChipSpec):
        return
    out = tmp_path / "pkg"
    files = render(spec, out)
    generate(spec, out)
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert written == set(files), written ^ set(files)
    for path, text in files.items():
        if path.endswith(".py"):
            compile(text, path, "exec")


# --- structured mutations of the real specs -----------------------------------------------------

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
    | st.text(max_size=20) | st.sampled_from(["add", "npu", "../../etc", "/abs", "a.b", "$(id)", "{{ 7*7 }}",
                                              # the shapes of issue 23: each must end in located errors
                                              "npu\n", "2.1\n", "/etc/passwd.h", "//etc/x.h", "~/x.h", "lambda",
                                              "class", "nn", "leaf", "ok\ud800", "3000000.0", "1.0", "sh"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, prefix + (index,))


def _mutate(doc, data) -> object:
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    action = data.draw(st.sampled_from(["replace", "delete", "add", "retype"]))
    if action == "replace":
        parent[last] = data.draw(VALUES)
    elif action == "delete":
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent[data.draw(st.text(max_size=12))] = data.draw(VALUES)
    elif action == "add":
        parent.append(data.draw(VALUES))
    else:  # the same value as another type
        value = parent[last]
        parent[last] = str(value) if not isinstance(value, str) else [value]
    return doc


@FUZZ
@given(data=st.data())
def test_mutated_specs_end_in_a_spec_or_located_errors(data, tmp_path_factory):
    name = data.draw(st.sampled_from(sorted(SPECS)))
    doc = copy.deepcopy(DATA[name])
    for _ in range(data.draw(st.integers(1, 4))):
        if not isinstance(doc, dict) or not doc:
            break
        doc = _mutate(doc, data)
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    spec = outcome(text.encode("utf-8"), name)
    if spec is not None:
        renders(spec, tmp_path_factory.mktemp("render"))


PRIVATEUSE1 = sorted(name for name, doc in DATA.items() if doc["chip"].get("integration") == "privateuse1")
FLOATS = ["float32", "float16", "bfloat16", "float64"]


@FUZZ
@given(data=st.data())
def test_valid_variations_render_to_code_that_parses(data, tmp_path_factory):
    """Changes a spec may legitimately make (any description text, fewer ops, other dtypes, another
    default chain): each validates, and its package renders to Python that compiles."""
    name = data.draw(st.sampled_from(PRIVATEUSE1))
    doc = copy.deepcopy(DATA[name])
    doc["chip"]["description"] = data.draw(st.text(max_size=80))
    ops = doc.get("ops") or {}
    for op in data.draw(st.lists(st.sampled_from(sorted(ops)), unique=True)) if ops else []:
        if op != "copy_":
            del ops[op]
    dtypes = doc["dtypes"]
    keep = data.draw(st.lists(st.sampled_from(dtypes), min_size=1, unique=True))
    amp = doc.get("amp")
    doc["dtypes"] = [d for d in dtypes if d in keep or (amp and d in amp["dtypes"])]
    if not set(doc["dtypes"]) & set(FLOATS):
        doc["dtypes"].append(data.draw(st.sampled_from(FLOATS)))
    doc.get("driver", {}).pop("versions", None)  # overlays name dtypes of their own
    doc["fallback"]["default"] = data.draw(st.sampled_from([["cpu"], [], ["triton", "cpu"], ["triton"]]))
    spec = outcome(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode("utf-8"), name)
    assert spec is not None, "a legitimate variation was refused"
    renders(spec, tmp_path_factory.mktemp("render"))


# --- byte-level damage and garbage --------------------------------------------------------------

@FUZZ
@given(data=st.data())
def test_damaged_spec_bytes_end_in_a_spec_or_located_errors(data):
    name = data.draw(st.sampled_from(sorted(SPECS)))
    raw = bytearray(SPECS[name])
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(raw)))
        action = data.draw(st.sampled_from(["flip", "insert", "delete", "duplicate-line"]))
        if action == "flip" and at < len(raw):
            raw[at] = data.draw(st.integers(0, 255))
        elif action == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=6))
        elif action == "delete":
            del raw[at:at + data.draw(st.integers(1, 40))]
        else:
            lines = bytes(raw).split(b"\n")
            i = data.draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])  # duplicate keys, repeated list items
            raw = bytearray(b"\n".join(lines))
    outcome(bytes(raw), name)


@FUZZ
@given(raw=st.binary(max_size=2048))
def test_binary_garbage_is_a_located_error(raw):
    assert outcome(raw) is None


@FUZZ
@given(text=st.text(max_size=400))
def test_random_text_is_a_located_error(text):
    assert outcome(text.encode("utf-8")) is None


# --- the classic attacks -------------------------------------------------------------------------

def _alias_bomb(levels=9):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


HOSTILE = {
    "alias bomb": _alias_bomb().encode(),
    "alias into the spec": SPECS["npu.yaml"].replace(b"chip:\n", b"chip: &c\n", 1) + b"again: *c\n",
    "deep flow nesting": b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "deep block nesting": "".join(f"{'  ' * i}k{i}:\n" for i in range(200)).encode() + b"  " * 200 + b"v\n",
    "over 1 MiB": b"# " + b"x" * (1 << 20) + b"\n" + SPECS["npu.yaml"],
    "huge list": b"dtypes: [" + b"float32, " * 200000 + b"]\n",
    "duplicate key": SPECS["npu.yaml"] + b"dtypes: [float32]\n",
    "python tag": b"chip: !!python/object/apply:os.system ['true']\n",
    "custom tag": b"chip: !vendor {name: x}\n",
    "not UTF-8": SPECS["npu.yaml"].replace(b"Simulated NPU", b"Simulated \xff\xfe NPU", 1),
    "UTF-16 with BOM": "spec_version: 1\n".encode("utf-16"),
    "NUL byte": SPECS["npu.yaml"].replace(b"name: npu", b"name: n\x00pu", 1),
    "two documents": SPECS["npu.yaml"] + b"---\nspec_version: 1\n",
    "empty": b"",
    "only a comment": b"# nothing\n",
    "a list": b"- spec_version: 1\n",
    "a scalar": b"npu\n",
    "tabs": b"chip:\n\tname: npu\n",
    "unterminated quote": b'chip: {name: "npu}\n',
    "very long key": b"k" * 100000 + b": 1\n",
    "integer overflow": SPECS["npu.yaml"].replace(b"success: 0", b"success: 99999999999999999999999", 1),
    # issue 23 (every field of every spec: test_spec_hostile.py)
    "trailing newline in chip.name": SPECS["npu.yaml"].replace(b"  name: npu\n", b'  name: "npu\\n"\n', 1),
    "trailing newline in driver.version": SPECS["npu.yaml"].replace(b'version: "2.1"', b'version: "2.1\\n"', 1),
    "absolute header": SPECS["npu.yaml"].replace(b"headers: [simnpu/simnpu_kernels.h]", b"headers: [/etc/passwd.h]"),
    "chip named like a torch module": SPECS["npu.yaml"].replace(b"  name: npu\n", b"  name: nn\n", 1),
    "chip named by a Python keyword": SPECS["npu.yaml"].replace(b"  name: npu\n", b"  name: lambda\n", 1),
    "driver version past a C int": SPECS["npu.yaml"].replace(b'version: "2.1"', b'version: "3000000.0"', 1),
    "lone surrogate": SPECS["npu.yaml"].replace(b"  name: npu\n", b'  name: npu\n  x: "ok\\uD800"\n', 1),
    "50,000 unknown ops": SPECS["npu.yaml"].replace(
        b"\nops:\n", b"\nops:\n" + b"".join(b"  zz%d: {}\n" % i for i in range(50000)), 1),
    "50,000 amp ops": SPECS["npu.yaml"].replace(
        b"\namp:\n", b"\namp:\n  fp32_ops: [" + b", ".join(b"zz%d" % i for i in range(50000)) + b"]\n", 1),
    "1,000 driver versions": SPECS["npu.yaml"].replace(
        b"  versions:\n", b"  versions:\n" + b"".join(b'    "9.%d": {ops: {zz: null}}\n' % i for i in range(1000)), 1),
    "200,000 small items": SPECS["npu.yaml"].replace(b"\ndtypes: [", b"\ndtypes: [" + b"1," * 200000, 1),
    "spec_version 1.0": SPECS["npu.yaml"].replace(b"spec_version: 1\n", b"spec_version: 1.0\n", 1),
    "spec_version 0x1": SPECS["npu.yaml"].replace(b"spec_version: 1\n", b"spec_version: 0x1\n", 1),
    "monitor runs a shell": (SPECS["cuda.yaml"].replace(b"command: [nvidia-smi,", b"command: [sh, -c, id,", 1), "cuda.yaml"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_documents_are_located_errors(case):
    raw, name = HOSTILE[case] if isinstance(HOSTILE[case], tuple) else (HOSTILE[case], "npu.yaml")
    assert raw != (SPECS[name]), "the edit did not apply"
    assert outcome(raw, name) is None


def test_the_fuzzing_reached_both_outcomes():
    """Runs last (file order): the mutations produced valid specs as well as rejected ones, so
    both paths (render and located errors) were exercised."""
    assert TRIED["valid"] > 0 and TRIED["rejected"] > 0, TRIED
    record_figures("spec fuzzing", cases=TRIED["valid"] + TRIED["rejected"], valid=TRIED["valid"],
                   rejected_with_located_errors=TRIED["rejected"], hostile_documents=len(HOSTILE),
                   tracebacks=0, internal_errors=0)
