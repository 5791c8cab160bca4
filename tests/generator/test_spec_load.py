"""The reference spec loads into the expected frozen model."""
from __future__ import annotations

import dataclasses
import hashlib

import pytest

from torchfl_gen import model
from torchfl_gen.spec import load_spec, parse_spec_bytes
from spec_helpers import NPU, NPU_TEXT, ROOT, edit, line_of, write


@pytest.fixture(scope="module")
def npu() -> model.ChipSpec:
    return load_spec(NPU)


def test_identity_and_source(npu):
    assert npu.spec_version == 1
    assert npu.chip == model.Chip(name="npu", vendor="simnpu", integration="privateuse1",
                                  description="Simulated NPU (reference chip, runs on any CPU host)",
                                  capability=(1, 0))
    assert npu.chip.package == "torch_fl_npu"
    assert npu.source == NPU and npu.source.is_absolute()
    assert npu.source_display == str(NPU)
    assert npu.spec_sha256 == hashlib.sha256(NPU.read_bytes()).hexdigest()
    assert load_spec(NPU, display="x/npu.yaml").source_display == "x/npu.yaml"


def test_driver(npu):
    d = npu.driver
    assert d.libraries == ("libsimnpu_runtime.so",)
    assert d.search_paths == (ROOT / "simnpu" / "build" / "lib",)
    assert d.home_env == "SIMNPU_HOME"
    assert d.version == "2.1" and d.version_code == 2010
    assert d.status == model.DriverStatus(success=0, not_ready=6, out_of_memory=2, launch_failure=7, device_lost=8,
                                          timeout=9)
    assert d.memcpy_kinds == model.MemcpyKinds(0, 1, 2, 3)
    assert tuple(h for h, _ in d.hooks) == model.REQUIRED_HOOKS
    assert d.symbol("malloc") == "simnpuMalloc"
    assert d.symbol("event_elapsed_time") == "simnpuEventElapsedTime"


def test_shared_memory_with_a_native_device(npu):
    # npu has memory of its own; nvgpu's driver is the CUDA runtime, its memory cuda's.
    assert npu.driver.shares_memory_with is None and npu.driver.shared_memory_device_type is None
    nvgpu = load_spec(ROOT / "specs" / "nvgpu.yaml").driver
    assert nvgpu.shares_memory_with == "cuda" and nvgpu.shared_memory_device_type == "CUDA"
    with pytest.raises(ValueError, match="unknown native device type 'xpu'"):
        dataclasses.replace(nvgpu, shares_memory_with="xpu")


def test_compile_section(npu):
    # Both run Inductor's Triton kernels as their Triton step runs: interpreted (npu), compiled (nvgpu).
    assert npu.compile.inductor == "triton" and npu.fallback.triton == "interpret"
    nvgpu = load_spec(ROOT / "specs" / "nvgpu.yaml")
    assert nvgpu.compile.inductor == "triton" and nvgpu.fallback.triton == "compile"
    assert load_spec(ROOT / "specs" / "edge.yaml").compile.inductor == "none"
    with pytest.raises(ValueError, match="out of range"):
        model.Compile(inductor="cpp")


def test_kernels_dtypes_fallback_amp(npu):
    k = npu.kernels
    assert k.namespace == "simnpu::ops"
    assert k.headers == ("simnpu/simnpu_kernels.h",)
    assert k.include_dirs == (ROOT / "simnpu" / "include",)
    assert k.libraries == ("simnpu_kernels",)
    assert k.library_dirs == (ROOT / "simnpu" / "build" / "lib",)
    assert npu.dtypes[:4] == ("float32", "float64", "float16", "bfloat16") and len(npu.dtypes) == 12
    assert npu.dtypes[-2:] == ("complex64", "complex128")
    assert npu.fallback == model.FallbackPolicy(default=("triton", "cpu"), warn="once", triton="interpret")
    assert (npu.amp.dtypes, npu.amp.default) == (("float16", "bfloat16"), "float16")


def test_ops_in_spec_order_with_lines(npu):
    names = [op.name for op in npu.ops]
    assert names[:3] == ["add.Tensor", "add_.Tensor", "sub.Tensor"]
    assert names[-1] == "randperm.generator_out" and len(names) == 43
    add = npu.op("add.Tensor")
    assert (add.kernel, add.fallback, add.require_vendor) == ("add", (), False)
    assert add.line == line_of(NPU_TEXT, "  add.Tensor:")
    assert npu.op("randperm.generator_out").line == line_of(NPU_TEXT, "  randperm.generator_out:")
    assert npu.op("random_.from").kernel == "random_from"
    assert len(npu.vendor_ops) == 43
    assert add.cpp_ident == "add_Tensor"


def test_add_tensor_signature(npu):
    sig = npu.op("add.Tensor").signature
    assert sig.schema == "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert sig.returns == "at::Tensor"
    assert sig.arguments == (model.Argument("self", "const at::Tensor &"),
                             model.Argument("other", "const at::Tensor &"),
                             model.Argument("alpha", "const at::Scalar &"))
    assert sig.decl("add") == ("at::Tensor add(const at::Tensor & self, const at::Tensor & other, "
                               "const at::Scalar & alpha)")


def test_other_signatures(npu):
    rf = npu.op("random_.from").signature
    assert rf.returns == "at::Tensor &"
    assert rf.call_args() == "self, from, to, generator"
    assert rf.arguments[2].cpp_type == "::std::optional<int64_t>"
    assert npu.op("cat").signature.arguments[0].cpp_type == "const at::ITensorListRef &"
    assert npu.op("randperm.generator_out").signature.arguments[-1] == model.Argument("out", "at::Tensor &")


def test_model_is_frozen(npu):
    with pytest.raises(dataclasses.FrozenInstanceError):
        npu.chip.name = "x"  # type: ignore[misc]


def test_minimal_spec_defaults(tmp_path):
    """No kernels, no ops, no fallback, no amp: all optional."""
    lines = NPU_TEXT.splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.startswith("kernels:"))
    minimal = "".join(lines[:start])
    minimal = minimal[:minimal.index("  # Other SDK releases")]  # no driver overlays either
    minimal = edit(("  integration: privateuse1\n", ""), ("  search_paths: [../simnpu/build/lib]\n", ""),
                   ("  home_env: SIMNPU_HOME\n", ""), ("  capability: \"1.0\"\n", ""), text=minimal) + "dtypes: [float32]\n"
    s = load_spec(write(tmp_path, minimal))
    assert s.kernels is None and s.ops == () and s.amp is None
    assert s.chip.capability == (0, 0)
    assert s.fallback == model.FallbackPolicy(default=("cpu",), warn="once", triton="compile")
    assert s.chip.integration == "privateuse1"
    assert s.driver.search_paths == () and s.driver.home_env is None


def test_fallback_only_ops(tmp_path):
    text = edit(("  relu: {kernel: relu}\n", "  relu: {fallback: [cpu]}\n  cumsum: {fallback: []}\n"),
                ("  default: [triton, cpu]", "  default: []"), ("  warn: once", "  warn: never"))
    s = load_spec(write(tmp_path, text))
    assert s.op("relu").kernel is None and s.op("relu").fallback == ("cpu",)
    assert s.op("cumsum").fallback == ()
    assert s.fallback == model.FallbackPolicy(default=(), warn="never", triton="interpret")


def test_parse_spec_bytes_matches_file(npu):
    s = parse_spec_bytes(NPU.read_bytes(), NPU, display="specs/npu.yaml")
    assert s.ops == npu.ops and s.driver == npu.driver and s.source_display == "specs/npu.yaml"


def test_the_model_checks_its_own_invariants():
    """Model classes refuse values the checks would have refused (a bug in construction
    surfaces at the model, not in a template)."""
    with pytest.raises(ValueError, match="unknown fallback step"):
        model.FallbackPolicy(default=("gpu",), warn="once", triton="compile")
    with pytest.raises(ValueError, match="out of range"):
        model.FallbackPolicy(default=("cpu",), warn="sometimes", triton="compile")
    with pytest.raises(ValueError, match="not a lowercase ASCII identifier"):
        model.Chip(name="npu\n", vendor="v", integration="privateuse1", description="")
    with pytest.raises(ValueError, match="amp default"):
        model.Amp(dtypes=("float16",), default="bfloat16")
    with pytest.raises(ValueError, match="starts with triton"):
        model.Route(op="add.Tensor", kernel=None, chain=("cpu",), triton=True)
