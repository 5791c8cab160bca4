"""Each step of the fallback chain, on a real build (issue: op coverage).

A variant of the npu spec whose vendor header declares kernels its library does
not define (as when headers are newer than the installed library): their weak
references resolve to null at load, so the ops take their chains.
  - mm                      -> vendor (present)
  - relu_   kernel missing, chain [triton, cpu] -> triton
  - exp.out     kernel missing, chain [cpu]     -> cpu
  - cumsum.out  kernel missing, no chain        -> located error
(exp.out and cumsum.out are called with out= so that the functional ops, which
the default chain may serve on Triton, do not stand in for them.)
  - a second build with `require: vendor` on a missing kernel fails at init.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from e2e_helpers import ROOT, run_python, torchfl_gen

MISSING = {  # op -> (kernel name, chain line)
    "relu_": ("fancy_relu_", "fallback: [triton, cpu]"),
    "exp.out": ("missing_exp_out", "fallback: [cpu]"),
    "cumsum.out": ("missing_cumsum_out", None),
}


def variant_spec(root, chip: str, extra_ops: str) -> str:
    """The npu spec renamed to `chip`, with an extra vendor header and ops."""
    from torchfl_gen import torch_ops

    header = root / "include" / "extra" / "missing_kernels.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    decls = []
    for op, (kernel, _) in MISSING.items():
        sig = torch_ops.signature(op)
        args = ", ".join(["simnpuStream_t stream"] + [f"{a.cpp_type} {a.name}" for a in sig.arguments])
        decls.append(f"{sig.returns} {kernel}({args});")
    decls.append("at::Tensor missing_tanh(simnpuStream_t stream, const at::Tensor & self);")
    header.write_text("#pragma once\n#include <simnpu/simnpu_kernels.h>\n"
                      "// Declared by a newer SDK header; this library build lacks them.\n"
                      "namespace simnpu::ops {\n" + "\n".join(decls) + "\n}\n")
    text = (ROOT / "specs" / "npu.yaml").read_text()
    # A spec's paths stay inside its project: the SDK travels with the variant.
    shutil.copytree(ROOT / "simnpu" / "include", root / "sdk" / "include")
    shutil.copytree(ROOT / "simnpu" / "build" / "lib", root / "sdk" / "lib")
    replacements = {
        "name: npu\n": f"name: {chip}\n",
        "search_paths: [../simnpu/build/lib]": "search_paths: [sdk/lib]",
        "headers: [simnpu/simnpu_kernels.h]": "headers: [simnpu/simnpu_kernels.h, extra/missing_kernels.h]",
        "include_dirs: [../simnpu/include]": "include_dirs: [sdk/include, include]",
        "library_dirs: [../simnpu/build/lib]": "library_dirs: [sdk/lib]",
        "  relu_: {kernel: relu_}\n": "",
    }
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    text = text.replace("  copy_: {kernel: copy_}\n", "  copy_: {kernel: copy_}\n" + extra_ops)
    return text


def build_variant(root, chip: str, extra_ops: str):
    spec = root / f"{chip}.yaml"
    spec.write_text(variant_spec(root, chip, extra_ops))
    result = torchfl_gen("build", str(spec), "--output", str(root / "pkg"), "--no-install")
    assert result.returncode == 0, result.stderr
    site = root / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                          result.stdout.strip().splitlines()[-1]], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    return root


def run_chip(root, chip: str, code: str) -> subprocess.CompletedProcess:
    return run_python(f"""
        import json, torch, torch_fl_{chip} as backend
        backend._register()
        C = backend._C
        {code}
    """, env={"PYTHONPATH": str(root / "site"), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})


CHAIN_OPS = "".join(f"  {op}: {{kernel: {kernel}{', ' + chain if chain else ''}}}\n"
                    for op, (kernel, chain) in MISSING.items())


@pytest.fixture(scope="session")
def chains_backend(tmp_path_factory):
    return build_variant(tmp_path_factory.mktemp("chains"), "npuchains", CHAIN_OPS)


def test_chain_steps_observed(chains_backend):
    proc = run_chip(chains_backend, "npuchains", """
        dev = "npuchains"
        C.reset_fallback_stats()
        a = torch.randn(4, 4)
        b = torch.randn(4, 4)
        out = {}
        out["mm"] = torch.allclose(torch.mm(a.to(dev), b.to(dev)).cpu(), a @ b, atol=1e-6)
        out["relu_"] = torch.equal(a.to(dev).relu_().cpu(), a.relu())
        out["exp"] = torch.allclose(torch.exp(a.to(dev), out=torch.empty(4, 4, device=dev)).cpu(), a.exp())
        try:
            torch.cumsum(a.to(dev), 0, out=torch.empty(4, 4, device=dev))
            out["cumsum"] = "no error"
        except NotImplementedError as e:
            out["cumsum"] = str(e).splitlines()[0]
        out["stats"] = C.fallback_stats()
        out["missing"] = sorted(C._missing_kernel_ops())
        out["triton"] = backend.triton_status
        print(json.dumps(out))
    """)
    assert proc.returncode == 0, proc.stderr
    r = __import__("json").loads(proc.stdout.strip().splitlines()[-1])
    assert r["missing"] == ["cumsum.out", "exp.out", "relu_"]
    assert r["mm"] and r["relu_"] and r["exp"]
    stats = r["stats"]
    assert stats["mm"] == {"vendor": 1}
    assert stats["relu_"] == {"triton": 1}, r["triton"]
    assert stats["exp.out"] == {"cpu": 1}
    assert "cumsum.out" not in stats
    assert r["cumsum"].startswith("aten::cumsum.out is not supported on chip 'npuchains'")
    assert "npuchains.yaml:" in r["cumsum"]


def test_require_vendor_fails_at_init(tmp_path_factory):
    root = build_variant(tmp_path_factory.mktemp("required"), "npurequired",
                         "  tanh: {kernel: missing_tanh, require: vendor}\n")
    proc = run_chip(root, "npurequired", "torch.ones(1, device='npurequired')")
    assert proc.returncode != 0
    error = proc.stderr.strip().splitlines()[-1]
    assert "chip 'npurequired' cannot initialise" in error
    assert "aten::tanh requires the vendor kernel 'missing_tanh'" in error
    assert "npurequired.yaml:" in error and "require: vendor" in error


def test_declined_triton_kernel_takes_the_next_step():
    """A Triton kernel that declines its inputs (nextafter on float16: it steps fp32/fp64 bit
    patterns only) hands the call to the next step of the chain: the CPU here, counted there;
    float32 stays on Triton; in strict mode the error says so and why the kernel declined."""
    proc = run_python("""
        import json, torch, torch_fl
        def stats():
            return {k: v for k, v in torch_fl.fallback_stats().items() if k.startswith("nextafter")}
        a, b = torch.randn(5), torch.randn(5)
        torch_fl.reset_fallback_stats()
        h = torch.nextafter(a.half().to("npu"), b.half().to("npu")).cpu()
        out = {"equal": torch.equal(h, torch.nextafter(a.half(), b.half())), "half_stats": stats()}
        torch_fl.reset_fallback_stats()
        f = torch.nextafter(a.to("npu"), b.to("npu")).cpu()
        out["float_equal"] = torch.equal(f, torch.nextafter(a, b))
        out["float_stats"] = stats()
        try:
            with torch_fl.strict_fallback():
                torch.nextafter(a.half().to("npu"), b.half().to("npu"))
            out["strict"] = "no error"
        except NotImplementedError as e:
            out["strict"] = str(e)
        print(json.dumps(out))
    """)
    assert proc.returncode == 0, proc.stderr
    r = __import__("json").loads(proc.stdout.strip().splitlines()[-1])
    assert r["equal"] and r["float_equal"]
    assert list(r["half_stats"].values()) == [{"cpu": 1}], r["half_stats"]
    assert list(r["float_stats"].values()) == [{"triton": 1}], r["float_stats"]
    assert "strict fallback mode: aten::nextafter" in r["strict"]
    assert "would fall back to the CPU on chip 'npu'" in r["strict"]
    assert "its Triton kernel declined these inputs: nextafter on torch.float16" in r["strict"]


def test_next_step_keeps_python_numbers_wrapped():
    """A Python kernel gets a wrapped number (the 2.0 of `x * 2.0`) as a Python number; when it
    declines, the next step must get it back as a wrapped-number tensor: accepted where the
    schema wants a Tensor, and promoting by category only (a 0-dim float16 stays float16)."""
    proc = run_python("""
        import json, torch, torch_fl, torch_fl_npu
        step = torch_fl_npu._C._next_step
        z = torch.randn(4, dtype=torch.complex64)
        half = torch.tensor(1.5, dtype=torch.float16)
        squared = step("aten::pow", "Tensor_Tensor", z.to("npu"), 2.0)
        out = {"complex": [str(squared.dtype), torch.allclose(squared.cpu(), z ** 2)],
               "half": str(step("aten::atan2", "", half.to("npu"), 2.0).dtype),
               "bool": str(step("aten::pow", "Tensor_Tensor", half.to("npu"), True).dtype)}
        print(json.dumps(out))
    """)
    assert proc.returncode == 0, proc.stderr
    r = __import__("json").loads(proc.stdout.strip().splitlines()[-1])
    assert r == {"complex": ["torch.complex64", True], "half": "torch.float16", "bool": "torch.float16"}
