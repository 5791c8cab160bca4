"""The doctor: a missing driver library, a version mismatch, a parameter left on the CPU, AMP and cudnn misuse."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import torch_fl
from torch_fl import doctor
from torch_fl.placement import DevicePlacementPolicy

from e2e_helpers import ROOT, run_python


def run_doctor(*args: str, env: dict | None = None, cli: str = "torch_fl") -> subprocess.CompletedProcess:
    command = ["-m", "torch_fl", "doctor"] if cli == "torch_fl" else ["-m", "torchfl_gen", "doctor"]
    return subprocess.run([sys.executable, *command, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, **(env or {})))


def findings(output: str, section: str = "Backends") -> list[dict]:
    return json.loads(output)["sections"][section]


def test_healthy_npu_backend():
    proc = run_doctor("--backend", "npu", "--json")
    assert proc.returncode == 0, proc.stderr
    by_check = {f["check"]: f for f in findings(proc.stdout)}
    assert by_check["driver"]["status"] == "ok" and "libsimnpu_runtime.so" in by_check["driver"]["message"]
    assert by_check["version"]["details"] == {"driver": "2.1", "built_for": "2.1"}
    assert by_check["devices"]["details"]["devices"][1].endswith("(npu:1)")
    assert by_check["collectives"]["status"] == "ok", by_check["collectives"]
    assert by_check["collectives"]["message"].startswith("npuccl over /")
    assert by_check["collectives"]["message"].endswith("/libsimnpu_ccl.so")
    assert by_check["compile"]["status"] == "ok", by_check["compile"]
    assert by_check["compile"]["message"] == ("Inductor's Triton kernels, run by Triton's interpreter on the host "
                                              "(fallback.triton: interpret): right answers, not speed")


@pytest.mark.parametrize("probe, status, says", [
    ({"inductor": "none"}, "info", "backend='aot_eager'"),
    ({"inductor": "triton", "triton_mode": "compile", "triton_installed": True}, "ok", "compiled by Triton for the chip"),
    ({"inductor": "triton", "triton_mode": "compile", "triton_installed": False}, "warn", "Triton is not installed"),
])
def test_what_torch_compile_does_on_the_chip(probe, status, says):
    [finding] = doctor._compile_findings("chip", probe)
    assert finding.status == status and says in finding.message, finding


def test_a_collective_library_that_does_not_load_is_diagnosed(driverless_chip, tmp_path):
    """The variant chip finds its driver on the loader path (a folder holding the driver alone):
    the driver loads, its collective library is found nowhere."""
    (tmp_path / "libsimnpu_runtime.so").symlink_to(ROOT / "simnpu" / "build" / "lib" / "libsimnpu_runtime.so")
    env = {"PYTHONPATH": str(driverless_chip / "site"), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
           "LD_LIBRARY_PATH": str(tmp_path)}
    proc = run_doctor("--backend", "npuvariant", "--json", env=env)
    assert proc.returncode == doctor.EXIT_PROBLEMS, proc.stdout + proc.stderr
    by_check = {f["check"]: f for f in findings(proc.stdout)}
    assert by_check["driver"]["status"] == "ok", by_check["driver"]
    collectives = by_check["collectives"]
    assert collectives["status"] == "error", collectives
    assert collectives["message"].startswith("npuccl: libsimnpu_ccl.so does not load: npuccl: cannot "
                                             "load the collective library: 'libsimnpu_ccl.so'"), collectives["message"]
    assert "cannot open shared object file" in collectives["message"]
    assert str(driverless_chip / "lib") in collectives["message"]               # where it looked
    assert "init_process_group(backend='npuccl') fails" in collectives["hint"]


def test_missing_driver_library_is_diagnosed_with_the_loader_text(driverless_chip):
    site = {"PYTHONPATH": str(driverless_chip / "site")}
    # Two generated backends are visible now: `import torch` would autoload both and abort on the
    # second, so `python -m torch_fl` runs with autoload off; torchfl-gen doctor turns it off itself.
    proc = run_doctor("--backend", "npuvariant", "--json", env=site | {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert proc.returncode == doctor.EXIT_PROBLEMS, proc.stderr
    (driver,) = [f for f in findings(proc.stdout) if f["check"] == "driver"]
    assert driver["status"] == "error" and driver["subject"] == "npuvariant"
    assert "cannot load driver library 'libsimnpu_runtime.so'" in driver["message"]
    assert "cannot open shared object file" in driver["message"]  # dlerror's own words
    assert str(driverless_chip / "lib") in driver["message"]
    text = run_doctor(env=site, cli="torchfl_gen")
    assert text.returncode == 7, text.stderr
    assert "error  driver     npuvariant: libsimnpu_runtime.so does not load" in text.stdout
    assert "warn   backend    torch_fl: 2 generated backends installed" in text.stdout
    assert "  ok     version    npu: driver 2.1, backend built for 2.1" in text.stdout  # the other one is fine
    assert text.stderr.strip().splitlines()[-1] == "error: the doctor found 1 problem(s)"


def test_driver_version_mismatch_is_diagnosed():
    proc = run_doctor("--backend", "npu", "--json", env={"SIMNPU_DRIVER_VERSION_OVERRIDE": "2.0"})
    assert proc.returncode == doctor.EXIT_PROBLEMS
    (version,) = [f for f in findings(proc.stdout) if f["check"] == "version"]
    assert version["status"] == "error" and version["message"] == "driver 2.0, backend built for 2.1"
    assert version["details"]["driver"] == "2.0" and version["details"]["built_for"] == "2.1"
    assert "torch-fl-npu==0.1.0+driver2.0" in version["hint"]


BAD_SCRIPT = """
    import torch
    from torch import nn

    torch.backends.cudnn.deterministic = True
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU()).to("npu")
    model.append(nn.Linear(8, 2))  # added after .to(): left on the CPU
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.cuda.amp.GradScaler(enabled=False)
    for step in range(1000):
        with torch.cuda.amp.autocast():
            loss = model(torch.randn(16, 4, device="npu")).sum()
        loss.backward()
        optimizer.step()
"""


def test_script_with_a_parameter_left_on_cpu_cuda_amp_and_cudnn(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(BAD_SCRIPT))
    proc = run_doctor("--json", "--backend", "npu", "--script", str(script))
    assert proc.returncode == doctor.EXIT_PROBLEMS, proc.stderr
    report = findings(proc.stdout, f"Script {script}")
    placement = [f for f in report if f["check"] == "placement"]
    assert [f["subject"] for f in placement] == ["parameter 'weight' of module '2' (Linear)",
                                                 "parameter 'bias' of module '2' (Linear)"]
    assert all(f["message"] == "on cpu, but the module's input is on npu:0" for f in placement)
    amp = {f["subject"]: f for f in report if f["check"] == "amp"}
    assert set(amp) == {"torch.cuda.amp.grad_scaler.GradScaler", "torch.cuda.amp.autocast_mode.autocast"}
    assert amp["torch.cuda.amp.autocast_mode.autocast"]["details"]["where"] == f"{script}:11"
    assert amp["torch.cuda.amp.grad_scaler.GradScaler"]["details"]["where"] == f"{script}:9"
    (cudnn,) = [f for f in report if f["check"] == "cudnn"]
    assert cudnn["subject"] == "torch.backends.cudnn.deterministic" and "use_deterministic_algorithms" in cudnn["hint"]
    (failed,) = [f for f in report if f["check"] == "run"]
    assert "expected all tensors on a" in failed["message"]


def _cpu_only_op() -> str:
    """An op the npu serves neither with a vendor kernel nor with Triton: it takes the CPU fallback."""
    import torch_fl_npu
    from torch_fl import routes

    for op in ("histc", "bucketize.Tensor", "kthvalue.values", "logcumsumexp"):
        if routes.route(torch_fl_npu.spec, op).path == "cpu":
            return op
    raise AssertionError("every candidate op has an npu kernel now: add one that still falls back")


class WithFallback(nn.Module):
    def __init__(self, op: str):
        super().__init__()
        self.op = op
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        extra = {"histc": lambda: torch.histc(y.detach(), bins=4).sum(),
                 "bucketize.Tensor": lambda: torch.bucketize(y.detach(), torch.zeros(2, device=y.device)).sum(),
                 "kthvalue.values": lambda: torch.kthvalue(y.detach(), 2).values.sum(),
                 "logcumsumexp": lambda: torch.logcumsumexp(y.detach(), 0).sum()}[self.op]()
        return y.sum() + 0 * extra


def test_check_model_counts_one_steps_cpu_fallbacks_and_names_a_cpu_parameter():
    torch_fl.init()
    op = _cpu_only_op()
    model = WithFallback(op).to("npu")
    x = torch.randn(3, 4, device="npu")
    before = torch_fl.fallback_stats()
    model(x).backward()  # the same step, counted independently
    after = torch_fl.fallback_stats()
    expected = {o: p["cpu"] - before.get(o, {}).get("cpu", 0) for o, p in after.items()
                if p.get("cpu", 0) > before.get(o, {}).get("cpu", 0)}
    assert op in expected
    report = doctor.check_model(model, x).as_dict()["sections"]["Model"]
    (fallbacks,) = [f for f in report if f["check"] == "fallbacks"]
    assert fallbacks["status"] == "warn" and fallbacks["details"]["ops"] == expected
    assert [f["status"] for f in report if f["check"] == "placement"] == ["ok"]

    model.fc.bias = nn.Parameter(torch.zeros(4))  # replaced on the CPU
    report = doctor.check_model(model, x)
    assert not report.ok
    static, runtime = [f for f in report.findings if f.check == "placement"]
    assert static.subject == "fc.bias" and static.message.startswith("on cpu, while 1 other tensor(s) are on npu:0")
    assert runtime.subject == "parameter 'bias' of module 'fc' (Linear)"


def test_a_deliberate_split_is_not_a_placement_error():
    torch_fl.init()
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    DevicePlacementPolicy({"2": "npu"}).apply(model)
    report = doctor.check_model(model, torch.randn(3, 4))
    assert [f.status for f in report.findings if f.check == "placement"] == ["ok"]
    assert report.ok, report.text()


def test_text_output_reads_like_a_checklist():
    proc = run_python("""
        import sys
        from torch_fl.__main__ import main
        sys.exit(main(["doctor", "--backend", "npu"]))
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("torch_fl doctor: torch ")
    assert "  ok     version    npu: driver 2.1, backend built for 2.1" in lines
    assert lines[-1] == "0 error(s), 0 warning(s)"
