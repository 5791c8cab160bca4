"""Driver faults, injected into the simulated SDK (SIMNPU_FAULTS, simnpu/README.md), reach Python
as exceptions named for them, leak nothing, and leave the other device usable.

Each scenario runs in its own process (the SDK reads SIMNPU_FAULTS once), with the faults on
device 1 of the two simulated devices; the process then checks device 0 and device 1's books.
"""
from __future__ import annotations

import textwrap

import pytest

from e2e_helpers import last_json_line, record_figures, run_python

pytestmark = pytest.mark.usefixtures("npu_backend")

PRELUDE = """
    import json, time, torch, torch_fl
    from torch_fl import DeviceLostError, KernelError, StreamTimeoutError

    def books(device):
        torch.npu.synchronize(0)
        return torch.npu.memory_allocated(device)

    def other_device_works():
        x = torch.arange(64.0, device="npu:0")
        return bool(torch.equal((x * 2 + 1).cpu(), torch.arange(64.0) * 2 + 1))

    def raised(fn):
        try:
            fn()
        except Exception as error:  # the class and text are what the test checks
            return {"type": type(error).__name__, "mro": [c.__name__ for c in type(error).__mro__],
                    "message": str(error)}
        return None
"""


def scenario(code: str, faults: str, **env) -> dict:
    proc = run_python(textwrap.dedent(PRELUDE) + textwrap.dedent(code), env={"SIMNPU_FAULTS": faults, "SIMNPU_DEVICE_COUNT": "2", **env},
                      timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = last_json_line(proc.stdout)
    record_figures("driver fault", faults=faults, raised=(result.get("error") or {}).get("type"),
                   leaked_bytes=result.get("leaked"), other_device_usable=result.get("other"))
    return result


def test_allocation_failure_is_out_of_memory_and_frees_everything():
    r = scenario("""
        base = books(1)
        kept = [torch.empty(16 << 20, dtype=torch.uint8, device="npu:1") for _ in range(2)]  # a segment each
        error = raised(lambda: torch.empty(16 << 20, dtype=torch.uint8, device="npu:1"))
        kept[0].fill_(3)
        readable = int(kept[0].cpu().sum()) == 3 * (16 << 20)
        del kept
        print(json.dumps({"error": error, "leaked": books(1) - base, "readable": readable,
                          "other": other_device_works()}))
    """, "device=1,alloc_fail_after=2")
    assert r["error"]["type"] == "OutOfMemoryError" and "RuntimeError" in r["error"]["mro"]
    assert "NPU out of memory. Tried to allocate 16.00 MiB" in r["error"]["message"]
    assert r["readable"] and r["other"] and r["leaked"] == 0


def test_kernel_failure_is_a_kernel_error_and_the_device_goes_on():
    r = scenario("""
        base = books(1)
        a = torch.ones(32, 32, device="npu:1")
        b = a + a                  # vendor kernels: the failing one is among these
        c = b * b
        error = raised(lambda: torch.npu.synchronize(1))
        again = torch.ones(4, device="npu:1") * 3
        after = again.cpu().tolist()
        del a, b, c, again
        print(json.dumps({"error": error, "after": after, "leaked": books(1) - base,
                          "other": other_device_works()}))
    """, "device=1,kernel_fail_after=1")
    assert r["error"]["type"] == "KernelError"
    assert r["error"]["mro"][:3] == ["KernelError", "ChipError", "RuntimeError"]
    assert "npu driver error 7" in r["error"]["message"] and "a kernel failed on the device" in r["error"]["message"]
    assert r["after"] == [3.0] * 4 and r["leaked"] == 0 and r["other"]


def test_kernel_failure_in_backward_reaches_the_caller_as_a_kernel_error():
    """Raised on the autograd engine's device thread, re-raised in the caller's: same class."""
    r = scenario("""
        base = books(1)
        w = torch.randn(16, 16, device="npu:1", requires_grad=True)
        x = torch.randn(8, 16, device="npu:1")
        loss = (x @ w).relu().sum()
        torch.npu.synchronize(1)
        error = raised(lambda: (loss.backward(), torch.npu.synchronize(1)))
        del w, x, loss
        print(json.dumps({"error": error, "leaked": books(1) - base, "other": other_device_works()}))
    """, "device=1,kernel_fail_after=6")
    assert r["error"]["type"] == "KernelError", r["error"]
    assert r["other"] and r["leaked"] == 0


def test_a_stalled_stream_times_out_with_a_named_error():
    r = scenario("""
        base = books(1)
        x = torch.ones(256, 256, device="npu:1")
        y = torch.mm(x, x)         # the stalled work item (3 s) is among these
        start = time.monotonic()
        error = raised(lambda: y.cpu())
        waited = time.monotonic() - start
        other = other_device_works()
        time.sleep(3)              # the stall passes: the device completes its queue
        late = float(y.cpu()[0, 0])
        del x, y
        print(json.dumps({"error": error, "waited": waited, "other": other, "late": late,
                          "leaked": books(1) - base}))
    """, "device=1,stall_after=1,stall_ms=3000", TORCH_FL_SYNC_TIMEOUT="0.5")
    assert r["error"]["type"] == "StreamTimeoutError"
    assert "did not finish within 0.5 s (TORCH_FL_SYNC_TIMEOUT)" in r["error"]["message"]
    assert 0.4 < r["waited"] < 2.5
    assert r["other"] and r["late"] == 256.0 and r["leaked"] == 0


def test_a_lost_device_raises_device_lost_and_its_memory_leaves_the_books():
    r = scenario("""
        base = books(1)
        kept, error = [], None
        for step in range(200):
            error = raised(lambda: kept.append((torch.ones(1024, device="npu:1") * step).sum().item()))
            if error:
                break
        del kept
        leaked = books(1) - base
        cleanup = raised(torch.npu.empty_cache)
        print(json.dumps({"error": error, "steps": step, "leaked": leaked, "cleanup": cleanup,
                          "other": other_device_works()}))
    """, "device=1,lost_after=30")
    assert r["error"]["type"] == "DeviceLostError", r["error"]
    assert "the device is lost" in r["error"]["message"] and r["steps"] > 0
    assert r["leaked"] == 0
    assert r["cleanup"] is None or r["cleanup"]["type"] == "DeviceLostError"
    assert r["other"]


def test_a_slow_device_computes_correctly_and_a_tight_timeout_names_it():
    slow = scenario("""
        base = books(1)
        start = time.monotonic()
        x = torch.arange(100.0, device="npu:1")
        y = (x * 2).sum().item()
        took = time.monotonic() - start
        del x
        print(json.dumps({"y": y, "took": took, "leaked": books(1) - base, "other": other_device_works()}))
    """, "device=1,slow_ms=300")
    assert slow["y"] == 9900.0 and slow["took"] >= 0.3 and slow["other"] and slow["leaked"] == 0
    timed = scenario("""
        base = torch.npu.memory_allocated(1)
        x = torch.ones(100, device="npu:1")  # vendor kernels: queued, no wait
        error = raised(lambda: (x * 3).cpu())
        time.sleep(1.0)  # the queued work finishes before the process ends
        del x
        print(json.dumps({"error": error, "leaked": torch.npu.memory_allocated(1) - base,
                          "other": other_device_works()}))
    """, "device=1,slow_ms=300", TORCH_FL_SYNC_TIMEOUT="0.1")
    assert timed["error"]["type"] == "StreamTimeoutError" and timed["other"] and timed["leaked"] == 0
