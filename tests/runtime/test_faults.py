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


# The fault on npu:0, the device most code uses implicitly: the healthy npu:1 must stay
# usable through the calls that touch every device (torch.manual_seed, empty_cache).

DEVICE_ONE_WORKS = """
    def device_one_works():
        x = torch.arange(64.0, device="npu:1")
        return bool(torch.equal((x * 2 + 1).cpu(), torch.arange(64.0) * 2 + 1))

    def seeded_draw():
        torch.manual_seed(0)
        return torch.randn(8, device="npu:1").cpu().tolist()
"""


def test_a_vendor_kernel_on_a_lost_device_raises_device_lost_and_seeding_spares_the_other():
    """The vendor library reports the refused launch as its own error: the wrapper names the
    fault. torch.manual_seed seeds every device, and must not fail on the lost one."""
    r = scenario(textwrap.dedent(DEVICE_ONE_WORKS) + textwrap.dedent("""
        reference = seeded_draw()
        x = torch.ones(1024, device="npu:0")
        error = None
        for step in range(200):
            error = raised(lambda: x.add(1.0))  # add.Tensor: a vendor kernel
            if error:
                break
        seed = raised(lambda: torch.manual_seed(0))
        again = seeded_draw()
        del x                               # npu:0's segment goes back: its free fails
        cached = torch.ones(1 << 20, device="npu:1"); del cached
        cleanup = raised(torch.npu.empty_cache)
        reserved1 = torch.npu.memory_reserved(1)
        print(json.dumps({"error": error, "seed": seed, "same_draw": again == reference,
                          "other": device_one_works(), "cleanup": cleanup, "reserved1": reserved1}))
    """), "device=0,lost_after=30")
    assert r["error"]["type"] == "DeviceLostError", r["error"]
    assert "the vendor kernel of add.Tensor" in r["error"]["message"]
    assert "the device is lost" in r["error"]["message"]
    assert r["seed"] is None and r["same_draw"] and r["other"]
    # empty_cache reports the lost device, after emptying the healthy one's cache
    assert r["cleanup"]["type"] == "DeviceLostError" and r["reserved1"] == 0


def test_a_stalled_device_does_not_stall_seeding_or_empty_cache():
    r = scenario(textwrap.dedent(DEVICE_ONE_WORKS) + textwrap.dedent("""
        import warnings
        x = torch.ones(256, 256, device="npu:0")
        y = torch.mm(x, x)                  # the stalled work item (4 s) is among these
        error = raised(lambda: y.cpu())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seed = raised(lambda: torch.manual_seed(0))
        start = time.monotonic()
        cleanup = raised(torch.npu.empty_cache)
        cleanup_s = time.monotonic() - start
        other = device_one_works()
        time.sleep(4)                       # the stall passes
        late = float(y.cpu()[0, 0])
        del x, y
        print(json.dumps({"error": error, "seed": seed, "warned": [str(w.message) for w in caught],
                          "cleanup": cleanup, "cleanup_s": cleanup_s, "other": other, "late": late}))
    """), "device=0,stall_after=1,stall_ms=4000", TORCH_FL_SYNC_TIMEOUT="0.5")
    assert r["error"]["type"] == "StreamTimeoutError"
    assert r["seed"] is None
    assert any("npu:0 is stalled" in w and "not reproducible" in w for w in r["warned"]), r["warned"]
    # bounded by the sync timeout, not the 4 s stall; the stalled device's cache is kept
    assert r["cleanup"]["type"] == "StreamTimeoutError" and r["cleanup_s"] < 2.0
    assert r["other"] and r["late"] == 256.0


def test_memory_stats_do_not_count_blocks_whose_streams_are_done():
    """A block freed while another stream still used it is active until that stream is done:
    once it is, the statistics say so without waiting for the next allocation."""
    r = scenario("""
        side = torch.npu.Stream(device="npu:0")
        x = torch.randn(512, 512, device="npu:0")
        with torch.npu.stream(side):
            y = x @ x
        torch.npu.current_stream(0).wait_stream(side)
        y.record_stream(torch.npu.current_stream(0))
        z = float((y + 1).sum().cpu())
        del x, y
        torch.npu.synchronize(0)
        stats = torch.npu.memory_stats(0)
        print(json.dumps({"allocated": stats["allocated_bytes.all.current"],
                          "active": stats["active_bytes.all.current"]}))
    """, "")
    assert r["allocated"] == 0 and r["active"] == 0, r


@pytest.mark.parametrize("faults, named", [
    ("kernel_fail_after=abc,bogus=1", "kernel_fail_after='abc' is not a whole number"),
    ("bogus=1", "unknown key 'bogus'"),
    ("device=1,lost_after", "'lost_after' is not key=value"),
    ("slow_ms=-5", "slow_ms='-5' is not a whole number"),
])
def test_a_malformed_fault_setting_is_refused_not_read_as_zero(faults, named):
    proc = run_python("""
        import json, torch
        try:
            torch.ones(2, device="npu")
            error = None
        except Exception as e:
            error = str(e)
        print(json.dumps({"available": torch.npu.is_available(), "error": error}))
    """, env={"SIMNPU_FAULTS": faults}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = last_json_line(proc.stdout)
    assert r["available"] is False
    assert "driver not initialized: SIMNPU_FAULTS" in r["error"] and named in r["error"], r["error"]
