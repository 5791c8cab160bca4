"""A script that ends right after a backward on the chip exits cleanly (torch_fl._exit_drain).

Without the drain about one such script in fifteen aborted at exit on this 2-core host
("terminate called without an active exception", rc -6): an autograd device thread freed the
last GraphTask after the interpreter had begun to finalize (pytorch/pytorch PR 180701).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from e2e_helpers import ROOT, last_json_line, run_python

# A conv backward queues real CPU work on the stream, so its worker competes with the exiting
# main thread: the condition under which the race showed most.
ENDS_AFTER_BACKWARD = """
import torch
model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(8, 3)).to("npu")
x = torch.randn(2, 1, 4, 4, device="npu")
model(x).sum().backward()
torch.autograd.grad(model(x).sum(), model[0].weight)   # a captured gradient, too
"""

RUNS = 24
# A run takes about 8 s on a loaded 2-core host; one still running at this limit hangs at exit.
RUN_LIMIT_S = 120


def _run_once(_):
    proc = subprocess.Popen([sys.executable, "-c", ENDS_AFTER_BACKWARD], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    try:
        out, err = proc.communicate(timeout=RUN_LIMIT_S)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints where each thread of the hung run is
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return subprocess.CompletedProcess(proc.args, f"hung: stopped after {RUN_LIMIT_S} s", out, err)


def test_scripts_ending_right_after_backward_exit_cleanly():
    # The first failure ends the test: the runs not yet started are cancelled (a hang at exit
    # costs one limit, not one per remaining run).
    failed, ran = None, 0
    with ThreadPoolExecutor(2) as pool:
        for result in pool.map(_run_once, range(RUNS)):
            ran += 1
            if result.returncode != 0:
                failed = result
                pool.shutdown(wait=False, cancel_futures=True)
                break
    assert failed is None, f"run {ran} of {RUNS} failed (rc {failed.returncode}):\n{failed.stderr[-3000:]}"


def test_drain_runs_one_backward_per_device_without_capturing():
    proc = run_python("""
        import atexit, json, torch
        from torch_fl import _exit_drain
        before = _exit_drain.drain("npu")           # nothing on the chip yet: nothing to drain
        torch.ones(1, device="npu")
        drained = _exit_drain.drain("npu")
        leaves = [kept[0] for kept in _exit_drain._kept]
        print(json.dumps({"before": before, "drained": drained, "count": torch.npu.device_count(),
                          "installed": sorted(_exit_drain._installed),
                          "grads": [[str(l.grad.device), l.grad.item()] for l in leaves]}))
    """, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = last_json_line(proc.stdout)
    assert data["before"] == 0 and data["installed"] == ["npu"]   # the backend installed it at import
    assert data["drained"] == data["count"] >= 2
    assert data["grads"] == [[f"npu:{i}", 1.0] for i in range(data["count"])]
