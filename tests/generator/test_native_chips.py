"""Native chips (`integration: native`): specs/cuda.yaml and specs/hip.yaml, their generated
pure-Python packages, and torch_fl reading its facts from them on either torch build.

This host's torch is a CPU build; the ROCm and CUDA builds are stood in for by setting
torch.version.hip / torch.version.cuda (all torch_fl consults), with the device calls
patched. The real CUDA path runs on the H200 (scripts/nvgpu_device_run.sh, stage native).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_fl
from e2e_helpers import ROOT, torchfl_gen
from torchfl_gen.model import NativeSpec
from torchfl_gen.spec import SpecErrors, load_spec, parse_spec_bytes

CUDA_SPEC = (ROOT / "specs" / "cuda.yaml").read_text()
HIP_SPEC = (ROOT / "specs" / "hip.yaml").read_text()
DATA = Path(__file__).resolve().parents[1] / "data" / "monitor"


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        parse_spec_bytes(text.encode(), ROOT / "specs" / "x.yaml", "specs/x.yaml")
    return [e.format() for e in info.value.errors]


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# ------------------------------------------------------------------ the specs

def test_native_specs_load():
    cuda, hip = load_spec(ROOT / "specs" / "cuda.yaml"), load_spec(ROOT / "specs" / "hip.yaml")
    assert isinstance(cuda, NativeSpec) and isinstance(hip, NativeSpec)
    assert (cuda.device_type, cuda.torch_build, cuda.collective.library) == ("cuda", "cuda", "nccl")
    assert (hip.device_type, hip.torch_build, hip.collective.backend, hip.collective.library) == \
        ("cuda", "hip", "nccl", "rccl")
    assert hip.monitor.parser == "rocm-smi-json" and hip.monitor.visible_devices_env == "HIP_VISIBLE_DEVICES"


@pytest.mark.parametrize("section", [
    "driver:\n  version: \"1.0\"\n",
    "ops:\n  mm: {kernel: mm}\n",
    "fallback:\n  default: [cpu]\n",
    "distributed:\n  backend: foo\n",
    "compile:\n  inductor: triton\n",
])
def test_sections_a_native_chip_has_no_use_for(section):
    key = section.split(":")[0]
    errors = _errors(CUDA_SPEC + section)
    assert any(f"'{key}' does not apply to a native chip" in e and e.startswith("specs/x.yaml:") for e in errors), errors


def test_native_spec_errors_are_located():
    no_native = _errors(_edit(CUDA_SPEC, "native:\n  device_type: cuda\n", "other:\n  device_type: cuda\n"))
    assert any("missing required key 'native'" in e for e in no_native), no_native
    lists = _errors(_edit(CUDA_SPEC, "  default: float16\n", "  default: float16\n  fp32_ops: [softmax]\n"))
    assert any("amp.fp32_ops" in e and "torch's own op lists" in e for e in lists), lists
    capability = _errors(_edit(CUDA_SPEC, "  integration: native\n", "  integration: native\n  capability: \"9.0\"\n"))
    assert any(e.startswith("specs/x.yaml:") and "chip.capability: a native chip's capability comes from its "
               "torch build" in e for e in capability), capability
    build = _errors(_edit(HIP_SPEC, "torch_build: hip", "torch_build: rocm"))
    assert any(e.startswith("specs/x.yaml:") and "native.torch_build: invalid value 'rocm' (expected one of: "
               "cuda, hip)" in e for e in build), build
    amp = _errors(_edit(CUDA_SPEC, "default: float16", "default: float32"))
    assert any("amp default 'float32' is not one of amp.dtypes" in e for e in amp), amp


@pytest.mark.parametrize("command", [
    '[nvidia-smi, "; rm -rf /"]',          # a shell would run it; no shell here, and refused anyway
    '["/bin/sh", "-c", "id"]',               # a path instead of a tool on PATH
    '[nvidia-smi, "$(id)"]',
    '[nvidia-smi, "a b"]',
])
def test_monitor_command_is_validated(command):
    text = _edit(CUDA_SPEC, CUDA_SPEC[CUDA_SPEC.index("    command:"):CUDA_SPEC.index("    parser:")],
                 f"    command: {command}\n")
    errors = _errors(text)
    assert any("native.monitor.command" in e for e in errors), errors


def test_privateuse1_spec_may_not_carry_a_native_section():
    npu = (ROOT / "specs" / "npu.yaml").read_text()
    errors = _errors(npu + "native:\n  device_type: cuda\n  torch_build: cuda\n"
                     "  collective: {backend: nccl, library: nccl}\n")
    assert any("'native' applies only to chip.integration: native" in e for e in errors), errors


def test_native_name_may_be_a_torch_device_type_a_generated_chip_may_not():
    errors = _errors(_edit(CUDA_SPEC, "integration: native", "integration: privateuse1"))
    assert any("'cuda' is a built-in torch device type" in e for e in errors), errors
    assert any("missing required key 'driver'" in e for e in errors), errors


# ------------------------------------------------------------------ the packages

def test_generated_package_is_pure_python_and_deterministic(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        result = torchfl_gen("generate", "specs/hip.yaml", "--output", str(out))
        assert result.returncode == 0, result.stderr
    files = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert files == [".gitignore", ".torchfl-generated", "README.md", "pyproject.toml", "tests/test_native_hip.py",
                     "torch_fl_hip/__init__.py", "torch_fl_hip/spec.py"]
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
    spec_py = (first / "torch_fl_hip" / "spec.py").read_text()
    assert re.fullmatch(r"# Generated by torchfl-gen \S+ from \S*hip\.yaml \(sha256 [0-9a-f]{16}\), native chip\.",
                        spec_py.splitlines()[0]), spec_py.splitlines()[0]
    assert "DIST_LIBRARY = 'rccl'" in spec_py and "TORCH_BUILD = 'hip'" in spec_py
    compile(spec_py, "spec.py", "exec")


def test_commands_that_need_a_driver_refuse_a_native_spec():
    for args in (["diff", "specs/cuda.yaml", "--from", "1.0", "--to", "2.0"], ["matrix", "specs/cuda.yaml"]):
        result = torchfl_gen(*args)
        assert result.returncode == 1 and "is a native chip (integration: native)" in result.stderr, result.stderr
    result = torchfl_gen("build", "specs/cuda.yaml", "--driver-version", "2.0")
    assert result.returncode == 1 and "a native chip has no driver versions" in result.stderr, result.stderr


# ------------------------------------------------------------------ torch_fl reads the facts

def test_init_reports_native_chips_unavailable_on_a_cpu_build(native_packages):
    assert native_packages == ["cuda", "hip"]
    backends = torch_fl.init(check_autograd=False)
    for name, build in (("cuda", "cuda"), ("hip", "hip")):
        info = backends[name]
        assert info.kind == "native" and info.package == f"torch_fl_{name}" and not info.available
        assert info.error == f"needs a {build} build of torch; this torch ({torch.__version__}) is a CPU build"


def test_facts_by_chip_and_by_device_type(native_packages):
    assert torch_fl.chip_facts("hip").dist_library == "rccl"
    assert torch_fl.chip_facts("cuda").dist_library == "nccl"
    # on a CPU build no native chip is driven: the device type's facts are the chip named like it
    assert torch_fl.device_facts("cuda").name == "cuda"
    assert torch_fl.chip_facts("npu").kind == "generated" and torch_fl.device_facts("npu").dist_backend == "npuccl"
    assert torch_fl.chip_facts("xpu") is None and torch_fl.device_facts("xpu") is None


@pytest.fixture
def rocm_build(monkeypatch, native_packages):
    """torch as a ROCm build with two devices, as far as torch_fl looks."""
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    torch_fl._api._backends.pop("hip", None)
    torch_fl._api._backends.pop("cuda", None)
    yield
    torch_fl._api._backends.pop("hip", None)
    torch_fl._api._backends.pop("cuda", None)


def test_the_same_calls_give_the_rocm_facts_on_a_rocm_build(rocm_build, monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    backends = torch_fl.init(check_autograd=False)
    assert backends["hip"].available and backends["hip"].device_count == 2
    assert backends["hip"].driver_version == "6.2.41133"
    assert not backends["cuda"].available and "needs a cuda build of torch" in backends["cuda"].error
    assert torch_fl.device_facts("cuda").name == "hip" and torch_fl.chip_facts("cuda").name == "cuda"
    config = torch_fl.distributed.get_backend_config("cuda:1")
    assert (config["backend"], config["library"], config["init_method"]) == ("nccl", "rccl", "tcp://10.0.0.1:29500")
    assert torch_fl.amp.supported_dtypes("cuda") == (torch.float16, torch.bfloat16)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert torch_fl.amp.supported_dtypes("cuda") == (torch.float16,)


def test_default_monitor_is_the_driven_chips_tool(rocm_build, monkeypatch):
    import torch_fl.monitor as monitor

    monkeypatch.setattr(monitor.shutil, "which", lambda tool: f"/opt/rocm/bin/{tool}")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    seen = []

    def recorded(command):
        seen.append(command)
        return (DATA / "rocm-smi-mi300x-rocm6.json").read_text()

    m = monitor.DeviceMonitor(run=recorded, generated=[])
    stats = m.sample()
    assert m.native == "hip" and seen == [list(load_spec(ROOT / "specs" / "hip.yaml").monitor.command)]
    assert [s.device for s in stats] == ["cuda:0"] and stats[0].source == "rocm-smi"  # physical card 1


def test_monitor_refuses_an_unknown_native_chip(native_packages):
    import torch_fl.monitor as monitor

    with pytest.raises(ValueError, match=r"native must be 'none' or a native chip with a monitor tool, not 'npu' "
                                         r"\(installed: \['cuda', 'hip'\]"):
        monitor.DeviceMonitor(native="npu")


def test_doctor_lists_native_chips(native_packages):
    result = subprocess.run([sys.executable, "-m", "torch_fl", "doctor", "--json"], capture_output=True, text=True,
                            cwd=ROOT)
    findings = [f for section in json.loads(result.stdout)["sections"].values() for f in section]
    native = [f for f in findings if f["subject"] in ("cuda", "hip")]
    assert {f["subject"] for f in native} == {"cuda", "hip"}, native
    assert all("needs a" in f["message"] and "build of torch" in f["message"] for f in native), native
