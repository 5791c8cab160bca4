"""Every kind of spec error produces an exact, located message: FILE:LINE:COL: PATH: MESSAGE.

Bad specs are text edits of specs/npu.yaml; expected lines are found in the edited text (line_of).
"""
from __future__ import annotations

import pytest

from torchfl_gen import spec as spec_mod
from torchfl_gen.errors import SpecError, SpecErrors
from spec_helpers import NPU_TEXT, ROOT, edit, errors_of, line_of, spec_errors, write
from torchfl_gen.spec import load_spec

F = "specs/npu.yaml"


def test_error_str_format():
    e = SpecError("specs/npu.yaml", 14, 3, "ops", "unknown aten op 'add.Tensr' (did you mean 'add.Tensor'?)",
                  hint="x")
    assert str(e) == "specs/npu.yaml:14:3: ops: unknown aten op 'add.Tensr' (did you mean 'add.Tensor'?)"
    assert e.format().splitlines()[1].strip() == "hint: x"


def test_misspelled_key(tmp_path):
    text = edit(("\n  hooks:\n", "\n  hoks:\n"))
    errs = spec_errors(tmp_path, text)
    assert [str(e) for e in errs] == [f"{F}:{line_of(text, '  hoks:')}:3: driver: unknown key 'hoks' (did you mean 'hooks'?)"]
    assert "hooks" in errs.errors[0].hint


def test_misspelled_op(tmp_path):
    text = edit(("  add.Tensor: {kernel: add}", "  add.Tensr: {kernel: add}"))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, 'add.Tensr')}:3: ops: unknown aten op 'add.Tensr' (did you mean 'add.Tensor'?)"]


def test_unknown_op_without_suggestion(tmp_path):
    text = edit(("  addmm: {kernel: addmm}", "  zzqqxx_frob: {kernel: addmm}"))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, 'zzqqxx_frob')}:3: ops: unknown aten op 'zzqqxx_frob'"]


def test_wrong_type_string(tmp_path):
    text = edit(('  version: "2.1"', "  version: 2.10"))
    errs = spec_errors(tmp_path, text)
    assert [str(e) for e in errs] == [f"{F}:{line_of(text, 'version: 2.10')}:12: driver.version: expected a string, got a number (2.10)"]
    assert errs.errors[0].hint == 'quote it: "2.10"'


def test_wrong_type_integer(tmp_path):
    text = edit(("    success: 0", "    success: zero"))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, 'success: zero')}:14: driver.status.success: expected an integer, got a string ('zero')"]


def test_missing_required_hook(tmp_path):
    text = edit(("    malloc: simnpuMalloc\n", ""))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, '  hooks:', exact=True)}:3: driver.hooks: missing required key 'malloc'"]


def test_missing_required_top_level(tmp_path):
    text = edit(("spec_version: 1\n", ""))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, 'chip:')}:1: <document>: missing required key 'spec_version'"]


def test_duplicate_key(tmp_path):
    text = edit(("    free: simnpuFree\n", "    free: simnpuFree\n    malloc: simnpuMalloc2\n"))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, 'simnpuMalloc2')}:5: driver.hooks: duplicate key 'malloc' "
        f"(first defined at line {line_of(text, 'malloc: simnpuMalloc', whole=True)})"]


def test_duplicate_op(tmp_path):
    text = edit(("  addmm: {kernel: addmm}", "  addmm: {kernel: addmm}\n  add.Tensor: {kernel: add}"))
    first, duplicate = (n for n, line in enumerate(text.splitlines(), 1) if line == "  add.Tensor: {kernel: add}")
    assert errors_of(tmp_path, text) == [
        f"{F}:{duplicate}:3: ops: duplicate key 'add.Tensor' (first defined at line {first})"]


def test_alias_and_anchor(tmp_path):
    text = edit(("  search_paths: [../simnpu/build/lib]", "  search_paths: &p [../simnpu/build/lib]"),
                ("  library_dirs: [../simnpu/build/lib]", "  library_dirs: *p"))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(NPU_TEXT, '  search_paths:')}:17: driver.search_paths: YAML anchor '&p' is not allowed in a spec",
        f"{F}:{line_of(NPU_TEXT, '  library_dirs:')}:17: kernels.library_dirs: YAML alias '*p' is not allowed in a spec",
    ]


def test_non_utf8(tmp_path):
    raw = NPU_TEXT.encode().replace(b"Simulated NPU", b"Simulated NP\xff")
    assert errors_of(tmp_path, raw) == [f"{F}:{line_of(NPU_TEXT, 'Simulated NPU')}:28: <document>: file is not valid UTF-8 (byte 0xff)"]


def test_yaml_syntax_error(tmp_path):
    assert errors_of(tmp_path, edit(("  vendor: simnpu", "  vendor: simnpu: x"))) == [
        f"{F}:{line_of(NPU_TEXT, '  vendor: simnpu')}:17: <document>: YAML syntax error: mapping values are not allowed here"]


def test_yaml_unclosed_flow(tmp_path):
    # the spec's last line: the flow sequence runs into the end of the file
    last = NPU_TEXT.splitlines()[-1]
    key, _, value = last.partition(": ")
    assert errors_of(tmp_path, edit((last, f"{key}: [{value}"))) == [
        f"{F}:{len(NPU_TEXT.splitlines()) + 1}:1: <document>: YAML syntax error: expected ',' or ']', but got '<stream end>' "
        f"(while parsing a flow sequence at line {line_of(NPU_TEXT, last)}, column {len(key) + 3})"]


def test_composite_implicit_op(tmp_path):
    text = edit(("  add.Tensor: {kernel: add}\n", "  add.Tensor: {kernel: add}\n  linear: {kernel: linear}\n"))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, '  linear:')}:3: ops: aten op 'linear' is CompositeImplicitAutograd: it decomposes before it reaches "
        "a backend; map the ops it decomposes into"]


def test_require_vendor_without_kernel(tmp_path):
    assert errors_of(tmp_path, edit(("  relu_: {kernel: relu_}", "  relu_: {require: vendor}"))) == [
        f"{F}:{line_of(NPU_TEXT, '  relu_: {kernel: relu_}')}:11: ops.relu_.require: 'require: vendor' needs a 'kernel'"]


def test_require_vendor_with_fallback(tmp_path):
    text = edit(("  relu_: {kernel: relu_}", "  relu_: {kernel: relu_, require: vendor, fallback: [cpu]}"))
    assert errors_of(tmp_path, text) == [f"{F}:{line_of(NPU_TEXT, '  relu_: {kernel: relu_}')}:43: ops.relu_.fallback: 'require: vendor' forbids a fallback"]


def test_amp_dtype_not_in_dtypes(tmp_path):
    assert errors_of(tmp_path, edit(("float16, bfloat16, int8", "float16, int8"))) == [
        f"{F}:{line_of(NPU_TEXT, '  dtypes: [float16, bfloat16]')}:21: amp.dtypes[1]: amp dtype 'bfloat16' is not in dtypes"]


def test_a_chip_without_a_floating_dtype_is_refused(tmp_path):
    text = edit(("dtypes: [float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool, complex64, "
                 "complex128]", "dtypes: [int8, int32, bool]"),
                ("amp:\n  dtypes: [float16, bfloat16]\n  default: float16\n", ""))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, 'dtypes: [int8, int32, bool]')}:9: dtypes: the chip lists no floating dtype; autograd, "
        "optimizers and the generated tests compute in one"]


def test_amp_default_not_in_amp_dtypes(tmp_path):
    assert errors_of(tmp_path, edit(("  default: float16", "  default: float32"))) == [
        f"{F}:{line_of(NPU_TEXT, '  default: float16')}:12: amp.default: amp default 'float32' is not one of amp.dtypes"]


def test_unknown_top_level_key(tmp_path):
    assert errors_of(tmp_path, edit(("amp:\n", "amps:\n"))) == [
        f"{F}:{line_of(NPU_TEXT, 'amp:')}:1: <document>: unknown key 'amps' (did you mean 'amp'?)"]


def test_builtin_device_name(tmp_path):
    assert errors_of(tmp_path, edit(("  name: npu", "  name: cuda"))) == [
        f"{F}:{line_of(NPU_TEXT, '  name: npu')}:9: chip.name: 'cuda' is a built-in torch device type"]


@pytest.mark.parametrize("name", ["cpu", "meta", "xla", "mps", "xpu", "hip", "privateuseone"])
def test_builtin_device_names(name):
    assert spec_mod.is_builtin_device_type(name)
    assert not spec_mod.is_builtin_device_type("npu")


@pytest.mark.parametrize("name", ["NPU", "npu2", "_npu"])
def test_chip_name_pattern(tmp_path, name):
    # torch.device("npu2") is "Invalid device string": a device type has no digits
    assert errors_of(tmp_path, edit(("  name: npu", f"  name: {name}"))) == [
        f"{F}:{line_of(NPU_TEXT, '  name: npu')}:9: chip.name: '{name}' is not a lowercase name of letters and '_' "
        "of at most 31 characters (torch's device strings take no digits)"]


def test_kernels_section_required_for_kernels(tmp_path):
    lines = NPU_TEXT.splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.startswith("kernels:"))
    end = next(i for i, l in enumerate(lines) if l.startswith("dtypes:"))
    text = "".join(lines[:start] + ["\n"] * (end - start) + lines[end:])   # keep line numbers
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(NPU_TEXT, '  add.Tensor: {kernel: add}')}:16: ops.\"add.Tensor\".kernel: op has a kernel but the spec has no 'kernels' section"]


def test_unknown_fallback_step(tmp_path):
    assert errors_of(tmp_path, edit(("  default: [triton, cpu]", "  default: [tritn]"))) == [
        f"{F}:{line_of(NPU_TEXT, '  default: [triton, cpu]')}:13: fallback.default[0]: invalid value 'tritn' (did you mean 'triton'? expected one of: triton, cpu)"]


@pytest.mark.parametrize("old,new,expected", [
    ('  version: "2.1"', '  version: "v2"', "12: driver.version: 'v2' is not a \"MAJOR.MINOR\" version"),
    ("    - libsimnpu_runtime.so", "    - simnpu_runtime.dll",
     "7: driver.libraries[0]: 'simnpu_runtime.dll' is not a shared library file name (like libfoo.so or libfoo.so.1)"),
    ("  headers: [simnpu/simnpu_kernels.h]", "  headers: [../simnpu/simnpu_kernels.h]",
     "13: kernels.headers[0]: '../simnpu/simnpu_kernels.h' is not a header path ending in .h, .hpp or .hh, without '..'"),
    ("  namespace: simnpu::ops", "  namespace: simnpu:ops",
     "14: kernels.namespace: 'simnpu:ops' is not a C++ namespace (like vendor::ops)"),
    ("  home_env: SIMNPU_HOME", "  home_env: simnpu-home",
     "13: driver.home_env: 'simnpu-home' is not an environment variable name (A-Z, 0-9, _)"),
    ("  home_env: SIMNPU_HOME", "  home_env: SIMNPU_HOME\n  shares_memory_with: cudaa",
     "23: driver.shares_memory_with: invalid value 'cudaa' (did you mean 'cuda'? expected one of: cuda)"),
    ("    malloc: simnpuMalloc", "    malloc: simnpu-malloc", "13: driver.hooks.malloc: 'simnpu-malloc' is not a C identifier"),
    ("  libraries: [simnpu_kernels]", "  libraries: [-lsimnpu_kernels]",
     "15: kernels.libraries[0]: '-lsimnpu_kernels' is not a linker name (like foo for -lfoo)"),
    ("spec_version: 1", "spec_version: 2", "15: spec_version: unsupported spec_version 2 (this torchfl-gen reads spec_version 1)"),
    ("  relu_: {kernel: relu_}", "  relu_: {}", "10: ops.relu_: an op entry needs 'kernel' and/or 'fallback'"),
    ("  relu_: {kernel: relu_}", "  relu_:", "9: ops.relu_: expected a mapping, got null"),
    ("  relu_: {kernel: relu_}", "  relu-x: {kernel: relu_}",
     "3: ops: invalid op name 'relu-x': must be an aten op name (name or name.overload)"),
    ("  relu_: {kernel: relu_}", "  relu_: {kernel: relu_, fallback: [cpu, cpu]}", "42: ops.relu_.fallback[1]: duplicate item 'cpu'"),
    ("  relu_: {kernel: relu_}", "  relu_: {kernal: relu_}", "11: ops.relu_: unknown key 'kernal' (did you mean 'kernel'?)"),
    ("[float32, float64,", "[float32, float32,", "19: dtypes[1]: duplicate item 'float32'"),
    ("[float32, float64,", "[float32, float65,",
     "19: dtypes[1]: invalid value 'float65' (did you mean 'float64'? expected one of: float32, float64, float16, "
     "bfloat16, int8, uint8, int16, int32, int64, bool, complex64, complex128)"),
    ("  inductor: triton", "  inductor: cpp",
     "13: compile.inductor: invalid value 'cpp' (expected one of: triton, none)"),
    ("  warn: once", "  warn: onse", "9: fallback.warn: invalid value 'onse' (did you mean 'once'? expected one of: once, always, never)"),
    ("  integration: privateuse1", "  integration: nativ",
     "16: chip.integration: invalid value 'nativ' (did you mean 'native'? expected one of: privateuse1, native, composite)"),
    ("    not_ready: 6", "    not_ready: 99999999999", "16: driver.status.not_ready: 99999999999 is out of range (must be <= 2147483647)"),
    ("  libraries:\n    - libsimnpu_runtime.so", "  libraries: []", "14: driver.libraries: must not be empty"),
    ("  warn: once", "  warn: once\n  on: 1", "3: fallback: mapping key must be a string, not bool true"),
    ("  warn: once", "  warn: !!python/name:os.system once", "9: fallback.warn: YAML tag '!!python/name:os.system' is not allowed in a spec"),
    ("  warn: once", "  warn: !custom once", "9: fallback.warn: YAML tag '!custom' is not allowed in a spec"),
])
def test_located_messages(tmp_path, old, new, expected):
    # each error is on the (last) line the edit wrote; `expected` is "COL: PATH: MESSAGE"
    text = edit((old, new))
    assert errors_of(tmp_path, text) == [f"{F}:{line_of(text, new.splitlines()[-1])}:{expected}"]


def test_multiple_errors_collected_in_order(tmp_path):
    text = edit(("  name: npu", "  name: cuda"),
                ("\n  hooks:\n", "\n  hoks:\n"),
                ("    success: 0", "    success: zero"),
                ("  add.Tensor: {kernel: add}", "  add.Tensr: {kernel: add}"),
                ("  relu_: {kernel: relu_}", "  relu_: {require: vendor}"),
                ("  default: [triton, cpu]", "  default: [gpu]"),
                ("  default: float16", "  default: float32"))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(NPU_TEXT, '  name: npu')}:9: chip.name: 'cuda' is a built-in torch device type",
        f"{F}:{line_of(NPU_TEXT, '    success: 0')}:14: driver.status.success: expected an integer, got a string ('zero')",
        f"{F}:{line_of(NPU_TEXT, '  hooks:', exact=True)}:3: driver: unknown key 'hoks' (did you mean 'hooks'?)",
        f"{F}:{line_of(NPU_TEXT, '  add.Tensor: {kernel: add}')}:3: ops: unknown aten op 'add.Tensr' (did you mean 'add.Tensor'?)",
        f"{F}:{line_of(NPU_TEXT, '  relu_: {kernel: relu_}')}:11: ops.relu_.require: 'require: vendor' needs a 'kernel'",
        f"{F}:{line_of(NPU_TEXT, '  default: [triton, cpu]')}:13: fallback.default[0]: invalid value 'gpu' (did you mean 'cpu'? expected one of: triton, cpu)",
        f"{F}:{line_of(NPU_TEXT, '  default: float16')}:12: amp.default: amp default 'float32' is not one of amp.dtypes",
    ]


def test_multiple_yaml_errors_collected(tmp_path):
    text = edit(("    free: simnpuFree\n", "    free: simnpuFree\n    malloc: x\n"),
                ("  addmm: {kernel: addmm}", "  addmm: {kernel: addmm}\n  add.Tensor: {kernel: add}"))
    first_add, duplicate_add = (n for n, line in enumerate(text.splitlines(), 1)
                                if line == "  add.Tensor: {kernel: add}")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(text, 'malloc: x')}:5: driver.hooks: duplicate key 'malloc' "
        f"(first defined at line {line_of(text, 'malloc: simnpuMalloc', whole=True)})",
        f"{F}:{duplicate_add}:3: ops: duplicate key 'add.Tensor' (first defined at line {first_add})",
    ]


@pytest.mark.parametrize("content,expected", [
    ("", "1:1: <document>: a spec must be a YAML mapping, got null"),
    ("- a\n", "1:1: <document>: a spec must be a YAML mapping, got a list"),
    ("spec_version: 1\n", "1:1: <document>: missing required key 'chip'"),
])
def test_not_a_spec(tmp_path, content, expected):
    assert errors_of(tmp_path, content)[0] == f"{F}:{expected}"


def test_missing_file(tmp_path):
    with pytest.raises(SpecErrors) as ei:
        spec_mod.load_spec(tmp_path / "nope.yaml", display="nope.yaml")
    assert str(ei.value) == "nope.yaml:1:1: <document>: cannot read spec: No such file or directory"


def test_unexpected_exception_becomes_located_error(tmp_path, monkeypatch):
    def boom(doc, base=None):
        raise ValueError("kaboom")
    monkeypatch.setattr(spec_mod, "_semantic_errors", boom)
    assert errors_of(tmp_path, NPU_TEXT) == [
        f"{F}:1:1: <document>: internal error while checking the spec: ValueError: kaboom"]


def test_errors_are_sorted_and_unique():
    a = SpecError("f", 3, 1, "x", "m")
    b = SpecError("f", 1, 5, "y", "n")
    errs = SpecErrors([a, b, a])
    assert errs.errors == [b, a] and len(errs) == 2
    assert str(errs) == "f:1:5: y: n\nf:3:1: x: m"


def test_too_big_file(tmp_path):
    assert errors_of(tmp_path, NPU_TEXT + "#" * (1 << 20)) == [
        f"{F}:1:1: <document>: file is larger than 1 MiB (1048576 bytes), the most a spec may be (limits.MAX_BYTES)"]


def test_missing_kernel_source_is_located(tmp_path):
    nvgpu = (ROOT / "specs" / "nvgpu.yaml").read_text(encoding="utf-8")
    path = write(tmp_path, nvgpu, name="nvgpu.yaml")  # specs/ of tmp_path: ../chips does not exist there
    with pytest.raises(SpecErrors) as ei:
        load_spec(path, display="nvgpu.yaml")
    line = line_of(nvgpu, "  sources: [../chips/nvgpu/src/nvgpu_kernels.cpp]")
    assert str(ei.value).startswith(
        f"nvgpu.yaml:{line}:13: kernels.sources[0]: kernel source '../chips/nvgpu/src/nvgpu_kernels.cpp' "
        "does not exist (looked in ")


def test_kernel_source_must_be_cpp(tmp_path):
    text = edit(("  headers: [simnpu/simnpu_kernels.h]",
                 "  headers: [simnpu/simnpu_kernels.h]\n  sources: [kernels.py]"))
    errors = errors_of(tmp_path, text)
    assert len(errors) == 1 and "kernels.sources[0]" in errors[0] and "kernels.py" in errors[0]


def test_a_driver_overlay_without_a_floating_dtype_is_refused(tmp_path):
    """An overlay's dtypes hold a floating dtype, like the spec's own (before, validation passed
    and generating that driver version died in the suite's dtype choice)."""
    text = edit(("      dtypes: [bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64]",
                 "      dtypes: [bool, uint8, int8]"))
    with pytest.raises(SpecErrors) as info:
        load_spec(write(tmp_path, text))
    (error,) = [e for e in info.value.errors if "floating" in e.message]
    assert error.path == 'driver.versions."2.0".dtypes'
    assert error.line == line_of(text, "      dtypes: [bool, uint8, int8]") and error.hint.startswith("add one of float32")


def test_kernel_dtypes_without_kernel(tmp_path):
    text = edit(("  relu_: {kernel: relu_}", "  relu_: {dtypes: [float32], fallback: [cpu]}"))
    assert errors_of(tmp_path, text) == [
        f"{F}:{line_of(NPU_TEXT, '  relu_: {kernel: relu_}')}:11: ops.relu_.dtypes: 'dtypes' says which dtypes the "
        "vendor kernel computes in, and this op has no 'kernel'"]

