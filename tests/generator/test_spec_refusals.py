"""One test per spec-validation hole of issue 23, each refusal a located error.

Trailing newlines (full-match patterns), absolute header paths, monitor commands, names torch or
Python or C++ own, driver versions past the generated C++ int, lone surrogates, bounded cost
(caps, a did-you-mean budget, an error cap, non-regular files), spec_version spellings. The
corpus over every field of every spec is tests/generator/test_spec_hostile.py.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spec_helpers import NPU_TEXT, ROOT, edit, errors_of, line_of, write
from torchfl_gen import limits
from torchfl_gen.errors import SpecError, SpecErrors
from torchfl_gen.patterns import matches, python_regex
from torchfl_gen.spec import load_spec, parse_spec_bytes

F = "specs/npu.yaml"
CUDA_TEXT = (ROOT / "specs" / "cuda.yaml").read_text(encoding="utf-8")
HIP_PU1_TEXT = (ROOT / "specs" / "hip_pu1.yaml").read_text(encoding="utf-8")


def _errors(text: str, name: str = "npu.yaml") -> list[str]:
    with pytest.raises(SpecErrors) as info:
        parse_spec_bytes(text.encode("utf-8"), ROOT / "specs" / name, f"specs/{name}")
    for e in info.value.errors:
        assert e.line >= 1 and e.column >= 1 and "internal error" not in e.message, str(e)
    return [str(e) for e in info.value.errors]


def _one(text: str, path: str, name: str = "npu.yaml") -> str:
    """The one error of ``text``, at ``path`` (or an item of it)."""
    errors = _errors(text, name)
    assert len(errors) == 1 and re.search(f": {re.escape(path)}(\\[[0-9]+\\])?: ", errors[0]), errors
    return errors[0]


def _some(text: str, path: str, why: str, name: str = "npu.yaml") -> str:
    """The error of ``text`` at ``path`` (or an item of it) that says ``why``."""
    errors = _errors(text, name)
    hits = [e for e in errors if re.search(f": {re.escape(path)}(\\[[0-9]+\\])?: ", e) and why in e]
    assert hits, errors
    return hits[0]


# --- 1. a trailing newline passes no pattern -----------------------------------------------------

@pytest.mark.parametrize("old, new, path", [
    ("  name: npu", '  name: "npu\\n"', "chip.name"),
    ("  vendor: simnpu", '  vendor: "simnpu\\n"', "chip.vendor"),
    ('  version: "2.1"', '  version: "2.1\\n"', "driver.version"),
    ("  home_env: SIMNPU_HOME", '  home_env: "SIMNPU_HOME\\n"', "driver.home_env"),
    ("    - libsimnpu_runtime.so", '    - "libsimnpu_runtime.so\\n"', "driver.libraries[0]"),
    ("    malloc: simnpuMalloc", '    malloc: "simnpuMalloc\\n"', "driver.hooks.malloc"),
    ("  namespace: simnpu::ops", '  namespace: "simnpu::ops\\n"', "kernels.namespace"),
    ("  headers: [simnpu/simnpu_kernels.h]", '  headers: ["simnpu/simnpu_kernels.h\\n"]', "kernels.headers[0]"),
    ("  libraries: [simnpu_kernels]", '  libraries: ["simnpu_kernels\\n"]', "kernels.libraries[0]"),
    ("  include_dirs: [../simnpu/include]", '  include_dirs: ["../simnpu/include\\n"]', "kernels.include_dirs[0]"),
    ("  add.Tensor: {kernel: add}", '  add.Tensor: {kernel: "add\\n"}', 'ops."add.Tensor".kernel'),
    ("  add.Tensor: {kernel: add}", '  "add.Tensor\\n": {kernel: add}', "ops"),
    ('    "2.0":', '    "2.0\\n":', "driver.versions"),
    ("  backend: npuccl", '  backend: "npuccl\\n"', "distributed.backend"),
])
def test_a_trailing_newline_matches_no_pattern(old, new, path):
    _one(edit((old, new)), path)


def test_a_source_path_with_a_newline_is_refused_not_skipped(tmp_path):
    """'x.cpp\\n' matched the source pattern and skipped the existence check."""
    text = edit(("  namespace: simnpu::ops", '  namespace: simnpu::ops\n  sources: ["../simnpu/src/runtime.cpp\\n"]'))
    errors = errors_of(tmp_path, text)
    assert any("kernels.sources[0]" in e and "C++ source path on one line" in e for e in errors), errors


def test_schema_patterns_have_json_schemas_meaning():
    """`$` anchors at the very end (ECMA-262), not before a final newline (Python's `$`)."""
    schema = json.loads((ROOT / "generator" / "schema" / "chip-spec.schema.json").read_text())
    patterns = set(re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', json.dumps(schema)))
    assert patterns
    for pattern in (json.loads(f'"{p}"') for p in patterns):
        assert pattern.startswith("^") and pattern.endswith("$"), pattern
        assert python_regex(pattern).pattern.endswith(r"\Z"), pattern
    assert matches(r"^[a-z]+$", "npu") and not matches(r"^[a-z]+$", "npu\n")
    assert python_regex(r"^[$]a$").pattern == r"^[$]a\Z" and python_regex(r"^\$$").pattern == r"^\$\Z"


def test_checks_written_in_python_match_whole_strings():
    """No `re.match` / `.match(` / `re.search` in the checks: a `$` there repeats the hole."""
    for path in [*(ROOT / "generator" / "checks").glob("*.py"), ROOT / "generator" / "paths.py",
                 ROOT / "generator" / "yaml_loader.py"]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bre\.(match|search)\(|_re\.match\(", text), path


# --- 2. absolute header paths ------------------------------------------------------------------------

@pytest.mark.parametrize("header", ["/etc/passwd.h", "/proc/self/environ.h", "//etc/x.h", "~/x.h", "~root/x.h"])
def test_an_absolute_header_is_refused(header):
    _some(edit(("  headers: [simnpu/simnpu_kernels.h]", f"  headers: [{header!r}]")), "kernels.headers[0]",
          f"header '{header}' must be relative to the kernels' include folders")


@pytest.mark.parametrize("source", ["/etc/x.cpp", "//etc/x.cpp", "~/x.cpp"])
def test_an_absolute_source_is_refused(source):
    text = edit(("  namespace: simnpu::ops", f"  namespace: simnpu::ops\n  sources: [{source!r}]"))
    errors = _errors(text)
    assert any("kernels.sources[0]" in e and "must be relative to the spec's folder" in e for e in errors), errors


# --- 3. the monitor runs its parser's read-only query only ---------------------------------------------

@pytest.mark.parametrize("command, why", [
    ("[sh, -c, id]", "the monitor program must be nvidia-smi (the tool parser nvidia-smi-csv reads), not 'sh'"),
    ("[/usr/bin/nvidia-smi, --format=csv]", "is not a name of letters"),
    ("[rocm-smi, --json]", "must be nvidia-smi"),
    ("[nvidia-smi, -r]", "'-r' is not an option nvidia-smi may be run with here"),
    ("[nvidia-smi, --query-gpu=index, --format=csv, -f, /etc/x]", "'-f' is not an option"),
    ("[nvidia-smi, --query-gpu]", "'--query-gpu' takes its value as --query-gpu=VALUE"),
    ("[nvidia-smi, --query-gpu=index, extra]", "'extra' follows no option that takes a value"),
])
def test_a_monitor_command_other_than_the_parsers_query_is_refused(command, why):
    old = CUDA_TEXT[CUDA_TEXT.index("    command: ["):CUDA_TEXT.index("    parser:")]
    _some(CUDA_TEXT.replace(old, f"    command: {command}\n"), "native.monitor.command", why, "cuda.yaml")


# --- 4. names Python, C++ or torch own -------------------------------------------------------------------

@pytest.mark.parametrize("name, owner", [("nn", "torch.nn"), ("fft", "torch.fft"), ("testing", "torch.testing"),
                                         ("leaf", "torch.Tensor.is_leaf"), ("half", "torch.half")])
def test_a_chip_name_torch_uses_is_refused(name, owner):
    error = _one(edit(("  name: npu", f"  name: {name}")), "chip.name")
    assert f"'{name}' is already a name of torch's ({owner})" in error


@pytest.mark.parametrize("name", ["lambda", "import", "class", "match"])
def test_a_python_keyword_as_chip_name_is_refused(name):
    assert "is a Python keyword" in _one(edit(("  name: npu", f"  name: {name}")), "chip.name")


@pytest.mark.parametrize("old, new, path, why", [
    ("  add.Tensor: {kernel: add}", "  add.Tensor: {kernel: class}", 'ops."add.Tensor".kernel', "is a C++ keyword"),
    ("  add.Tensor: {kernel: add}", "  add.Tensor: {kernel: __builtin_trap}", 'ops."add.Tensor".kernel',
     "reserved for the C++ implementation"),
    ("  namespace: simnpu::ops", "  namespace: simnpu::delete", "kernels.namespace", "is a C++ keyword"),
    ("  namespace: simnpu::ops", "  namespace: int", "kernels.namespace", "is a C++ keyword"),
    ("    malloc: simnpuMalloc", "    malloc: return", "driver.hooks.malloc", "is a C/C++ keyword"),
])
def test_a_cpp_keyword_as_identifier_is_refused(old, new, path, why):
    assert why in _one(edit((old, new)), path)


def test_the_real_chip_names_pass_the_name_checks():
    from torchfl_gen.identifiers import torch_name_owner

    for name in ("npu", "edge", "fpgacard", "nvgpu", "hip_pu"):
        assert torch_name_owner(name) is None or name == "npu", name


# --- 5. a driver version fits the generated C++ int ----------------------------------------------------

@pytest.mark.parametrize("version, ok", [("2147482.99", True), ("3000000.0", False), ("2147484.0", False)])
def test_a_driver_version_past_the_cpp_int_is_refused(version, ok):
    text = edit(('  version: "2.1"', f'  version: "{version}"'))
    if ok:
        parse_spec_bytes(text.encode(), ROOT / "specs" / "npu.yaml", F)
    else:
        error = _one(text, "driver.version")
        line = line_of(text, f'  version: "{version}"')
        assert error.startswith(f"{F}:{line}:12: driver.version: version '{version}' does not fit"), error


def test_an_overlay_version_and_the_hip_encoding_are_bounded_too():
    assert "does not fit" in _one(edit(('    "2.0":', '    "3000000.0":')), 'driver.versions."3000000.0"')
    text = HIP_PU1_TEXT.replace('version: "5.2"', 'version: "300.0"')
    error = _one(text, "driver.version", "hip_pu1.yaml")
    assert "MAJOR*10000000 + MINOR*100000" in error
    error = _one(edit(('  version: "2.1"', f'  version: "{"9" * 5000}.1"')), "driver.version")
    assert f"more than {limits.MAX_VERSION_DIGITS} digits" in error


# --- 6. every string encodable -------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, path", [
    ("  description: Simulated NPU (reference chip, runs on any CPU host)", '  description: "ok\\uD800"',
     "chip.description"),
    ("    malloc: simnpuMalloc", '    malloc: "simnpu\\uDC00Malloc"', "driver.hooks.malloc"),
    ("  name: npu", '  "k\\uD800": 1\n  name: npu', "chip"),
])
def test_a_lone_surrogate_is_a_located_error(old, new, path):
    error = _one(edit((old, new)), path)
    assert "a lone surrogate" in error


def test_a_lone_surrogate_fails_validate_not_generate(tmp_path):
    spec = write(tmp_path, edit(("  description: Simulated NPU (reference chip, runs on any CPU host)",
                                 '  description: "ok\\uD800"')))
    result = subprocess.run([sys.executable, "-m", "torchfl_gen", "generate", str(spec), "-o", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert result.returncode == 1 and "lone surrogate" in result.stderr and "Traceback" not in result.stderr, \
        result.stderr


# --- 7. bounded cost -------------------------------------------------------------------------------------

def _timed(text: str) -> tuple[list[str], float]:
    start = time.monotonic()
    errors = _errors(text)
    return errors, time.monotonic() - start


@pytest.mark.parametrize("what, old, new, path, cap", [
    ("50,000 unknown ops", "\nops:\n", "\nops:\n" + "".join(f"  zz{i}: {{}}\n" for i in range(50000)), "ops",
     "limits.MAX_ITEMS"),
    ("50,000 amp ops", "\namp:\n", "\namp:\n  fp32_ops: [" + ", ".join(f"zz{i}" for i in range(50000)) + "]\n",
     "amp.fp32_ops", "limits.MAX_ITEMS"),
    ("a 200,000-element list", "\ndtypes: [", "\ndtypes: [" + "1, " * 200000, "dtypes", "limits.MAX_ITEMS"),
    ("1,000 driver versions", "  versions:\n",
     "  versions:\n" + "".join(f'    "9.{i}": {{}}\n' for i in range(1000)), 'driver.versions."9.64"',
     "limits.MAX_DRIVER_VERSIONS"),
], ids=lambda value: value if isinstance(value, str) and len(value) < 30 and "\n" not in value else "")
def test_a_spec_over_a_cap_is_refused_quickly(what, old, new, path, cap):
    errors, seconds = _timed(edit((old, new)))
    assert seconds < 10, (what, seconds)
    assert any(f": {path}: " in e and cap in e for e in errors), errors[:3]


def test_unique_items_is_checked_in_linear_time():
    """jsonschema compared every pair of items it could not sort: 4,000 mappings took 10 s."""
    text = edit(("\ndtypes: [", "\ndtypes: [" + ", ".join("{a: %d}" % i for i in range(4000)) + ", "))
    errors, seconds = _timed(text)
    assert seconds < 5 and errors, seconds
    errors = _errors(edit(("\ndtypes: [", "\ndtypes: [float32, ")))
    assert any("dtypes[1]: duplicate item 'float32'" in e for e in errors), errors


def test_many_errors_are_cut_at_the_error_cap_with_few_suggestions():
    """4,000 unknown ops (under MAX_ITEMS): MAX_ERRORS reported, then a count; did-you-mean for
    the first MAX_SUGGESTIONS only (one difflib search each made 50,000 take minutes)."""
    text = edit(("\nops:\n", "\nops:\n" + "".join(f"  abs{i}: {{fallback: [cpu]}}\n" for i in range(4000))))
    errors, seconds = _timed(text)
    assert seconds < 10
    assert len(errors) == limits.MAX_ERRORS + 1
    assert f"... and {4000 - limits.MAX_ERRORS} more errors (at most {limits.MAX_ERRORS} are reported" in errors[-1]
    assert 0 < sum("did you mean" in e for e in errors) <= limits.MAX_SUGGESTIONS


def test_spec_errors_keep_the_first_errors_by_position():
    errors = SpecErrors(SpecError("f", line, 1, "p", "m") for line in range(1, 300))
    assert len(errors) == limits.MAX_ERRORS + 1 and errors.errors[-1].line == limits.MAX_ERRORS + 1


@pytest.mark.parametrize("kind", ["fifo", "directory", "/dev/zero"])
def test_a_spec_that_is_no_regular_file_is_refused_at_once(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "spec.yaml"
        os.mkfifo(path)
        what = "a named pipe (FIFO)"
    elif kind == "directory":
        path = tmp_path / "spec.yaml"
        path.mkdir()
        what = "a directory"
    else:
        path, what = Path(kind), "a character device"
    start = time.monotonic()
    with pytest.raises(SpecErrors) as info:
        load_spec(path, display="spec.yaml")
    assert time.monotonic() - start < 2
    assert [str(e) for e in info.value.errors] == [f"spec.yaml:1:1: <document>: cannot read spec: it is {what}, "
                                                   "not a regular file"]


def test_validate_on_a_fifo_exits_at_once(tmp_path):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    result = subprocess.run([sys.executable, "-m", "torchfl_gen", "validate", str(fifo)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and "named pipe (FIFO), not a regular file" in result.stderr, result.stderr


# --- 8. spec_version is written 1 -----------------------------------------------------------------------

@pytest.mark.parametrize("written", ["1.0", "0x1", "+1", "01", "1.00", "1_"])
def test_spec_version_other_than_the_literal_1_is_refused(written):
    text = edit(("spec_version: 1\n", f"spec_version: {written}\n"))
    assert _one(text, "spec_version") == (f"{F}:{line_of(text, 'spec_version:')}:15: spec_version: spec_version is "
                                          f"written '{written}': write the integer 1")


# --- the caps are documented ------------------------------------------------------------------------------

def test_docs_spec_md_states_the_caps():
    text = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    for number in (limits.MAX_ITEMS, limits.MAX_DRIVER_VERSIONS, limits.MAX_ERRORS, limits.MAX_DEPTH):
        assert f"{number:,}" in text, number
