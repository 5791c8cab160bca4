"""The caching allocator and Triton launches under concurrent use, and a long training run whose memory stays flat.

Eight threads allocate and free at random across streams, each block carrying a canary (a
value its owner wrote); a block handed to two owners, or reused before another stream's
pending write to it finished, breaks a canary. Afterwards the books balance. Then 1,000
training steps of the example model (examples/train_resnet_stem.py) with memory measured
along the way. Each runs in a process of its own, so the statistics start from zero.
"""
from __future__ import annotations

import os

import pytest

from e2e_helpers import ROOT, last_json_line, record_figures, run_python
from torch_fl import env

pytestmark = pytest.mark.usefixtures("npu_backend")

SOAK_STEPS = int(env.get("SOAK_STEPS", "1000"))


def test_allocator_under_eight_threads_keeps_canaries_and_books():
    proc = run_python("""
        import json, random, threading, torch
        torch.npu.init()
        base = torch.npu.memory_allocated(0)
        failures, checked = [], [0]
        lock = threading.Lock()

        def worker(k):
            rng = random.Random(k)
            streams = [torch.npu.Stream(), torch.npu.Stream(), torch.npu.default_stream()]
            live = []
            try:
                for i in range(250):
                    if live and rng.random() < 0.45:
                        t, value, stream = live.pop(rng.randrange(len(live)))
                        with torch.npu.stream(stream):  # read on the stream that wrote it
                            ok = bool((t.cpu() == value).all())
                        with lock:
                            checked[0] += 1
                            if not ok:
                                failures.append((k, i, value))
                        del t  # freed: maybe while its writer stream is still busy
                        continue
                    size = rng.choice([1, 33, 4096, 70000, 300000, 1500000])
                    alloc_on, write_on = rng.choice(streams), rng.choice(streams)
                    with torch.npu.stream(alloc_on):
                        t = torch.empty(size, dtype=torch.int32, device="npu:0")
                    value = k * 100000 + i
                    write_on.wait_stream(alloc_on)
                    with torch.npu.stream(write_on):
                        t.fill_(value)
                    if write_on != alloc_on:
                        t.record_stream(write_on)  # its reuse must wait for this stream
                    live.append((t, value, write_on))
                for t, value, stream in live:
                    with torch.npu.stream(stream):
                        if not bool((t.cpu() == value).all()):
                            failures.append((k, "end", value))
                live.clear()
            except Exception as error:
                failures.append((k, repr(error)))

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        torch.npu.synchronize(0)
        torch.npu.empty_cache()  # also returns blocks whose other-stream uses were still being awaited
        stats = torch.npu.memory_stats(0)
        print(json.dumps({"failures": failures[:5], "checked": checked[0], "leaked": torch.npu.memory_allocated(0) - base,
                          "allocations": stats["allocation.all.allocated"], "current": stats["allocation.all.current"],
                          "balance": stats["allocation.all.allocated"] - stats["allocation.all.freed"],
                          "active": stats["active_bytes.all.current"],
                          "reserved": stats["reserved_bytes.all.current"]}))
    """, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = last_json_line(proc.stdout)
    assert r["failures"] == [], r["failures"]
    assert r["checked"] > 500 and r["allocations"] > 1000
    assert r["leaked"] == 0 and r["current"] == 0 and r["balance"] == 0 and r["active"] == 0
    assert r["reserved"] == 0  # every segment went back to the driver
    record_figures("allocator under 8 threads", threads=8, allocations=r["allocations"], canaries_checked=r["checked"],
                   corrupted=len(r["failures"]), leaked_bytes=r["leaked"])


def test_training_soak_keeps_memory_flat():
    """SOAK_STEPS steps of the example model: after warm-up, allocated memory returns to the same
    value after every step, and the reserved pool stops growing."""
    proc = run_python(f"""
        import json, sys, torch, torch_fl
        sys.path.insert(0, {str(ROOT / "examples")!r})
        from train_resnet_stem import resnet_stem
        torch_fl.init()
        torch.manual_seed(0)
        model = resnet_stem().to("npu")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        criterion = torch.nn.CrossEntropyLoss()
        images, labels = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
        allocated, reserved, losses = [], [], []
        for step in range({SOAK_STEPS}):
            x, y = images.to("npu"), labels.to("npu")
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            if step % 25 == 0 or step == {SOAK_STEPS} - 1:
                losses.append(loss.item())
                torch.npu.synchronize()
                allocated.append(torch.npu.memory_allocated())
                reserved.append(torch.npu.memory_reserved())
        print(json.dumps({{"allocated": allocated, "reserved": reserved, "losses": losses}}))
    """, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = last_json_line(proc.stdout)
    warm = 4  # samples before the pools and the optimizer state settle (100 steps)
    assert len(set(r["allocated"][warm:])) == 1, r["allocated"]
    assert max(r["reserved"][warm:]) == r["reserved"][warm], r["reserved"]
    assert r["losses"][-1] < r["losses"][0]  # it trained
    record_figures("training soak", steps=SOAK_STEPS, allocated_bytes=sorted(set(r["allocated"][warm:])),
                   reserved_bytes_after_warmup=[min(r["reserved"][warm:]), max(r["reserved"][warm:])],
                   loss=[r["losses"][0], r["losses"][-1]])


def test_threads_on_both_devices_copy_and_compute_exactly():
    # One thread per device and side stream, two per device in all: each fills a fresh tensor,
    # copies it to the other device and checks it there with Triton-routed ops. Triton's
    # interpreter kept the running launch's grid in process-wide state, so concurrent launches
    # skipped blocks or failed with "x >= grid_dim[0]" until launches were serialized.
    proc = run_python("""
        import json, threading, torch
        failures, checked = [], [0]

        def worker(k):
            src, dst = f"npu:{k % 2}", f"npu:{(k + 1) % 2}"
            torch.npu.set_device(k % 2)
            stream = torch.npu.Stream()
            generator = torch.Generator().manual_seed(k)
            try:
                for i in range(3):
                    n = int(torch.randint(20_000, 60_000, (1,), generator=generator))
                    value = (k * 37 + i) % 251
                    with torch.npu.stream(stream):
                        t = torch.full((n,), value, dtype=torch.uint8, device=src)
                    stream.synchronize()
                    moved = t.to(dst)
                    same = moved.eq(value)
                    negated = moved.to(torch.float32).neg()
                    ok = bool(same.all().item()) and int(same.sum().item()) == n
                    ok = ok and bool(negated.eq(-float(value)).all().item()) and bool((moved.cpu() == value).all())
                    checked[0] += 1
                    if not ok:
                        failures.append((k, i, n))
            except Exception as error:
                failures.append((k, repr(error)[:200]))

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps({"failures": failures[:5], "checked": checked[0]}))
    """, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = last_json_line(proc.stdout)
    assert r["failures"] == [] and r["checked"] == 12, r
