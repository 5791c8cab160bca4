"""The npu chip's torch.distributed backend on its collective library (libsimnpu_ccl, the spec's
distributed.library) with torchrun: every collective and dtype, FSDP2 with a distributed
checkpoint, a rank that dies mid-collective. DDP is tests/runtime/test_distributed.py's."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from e2e_helpers import ROOT, free_port

WORKER = ROOT / "tests" / "runtime" / "collectives_worker.py"

pytestmark = pytest.mark.usefixtures("npu_backend")


def torchrun(mode: str, ranks: int, out, timeout: int = 300, **env) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **env)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
                           "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(WORKER), mode, str(out)],
                          cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)


def ranks_without_agent(mode: str, ranks: int, out, timeout: int = 120, **env) -> list[int]:
    """The ranks as plain processes (torchrun's environment, no torchrun): a rank's death then
    leaves the others to find out for themselves, where torchrun's agent would stop them the
    moment it saw it, racing the error they report. Returns each rank's exit code."""
    out.mkdir(parents=True, exist_ok=True)
    base = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(free_port()), WORLD_SIZE=str(ranks), LOCAL_WORLD_SIZE=str(ranks), **env)
    procs = [subprocess.Popen([sys.executable, str(WORKER), mode, str(out)], cwd=ROOT,
                              env=dict(base, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for r in range(ranks)]
    try:
        for p in procs:
            p.wait(timeout=timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [p.returncode for p in procs]


def results(out, ranks: int) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(ranks)]


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_collective_and_dtype_on_the_library(tmp_path, ranks):
    proc = torchrun("collectives", ranks, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in results(tmp_path, ranks):
        assert r["backend"] == "npuccl"                # the script asked for nccl
        assert r["failures"] == [], r["failures"][:10]
        assert r["checked"] >= 150                      # 12 dtypes x every collective


def test_dtypes_the_library_lacks_still_move(driverless_chip, tmp_path):
    """A chip whose library has NCCL's dtype table (no int16, no complex, bool as uint8): complex
    tensors move and reduce (sum, avg) as pairs of reals, int16 ones move as bytes, and an int16
    reduction is refused naming the dtype; every result against the exact reference."""
    lib = tmp_path / "lib"   # the driver and the collective library on the loader path
    lib.mkdir()
    for name in ("libsimnpu_runtime.so", "libsimnpu_ccl.so"):
        (lib / name).symlink_to(ROOT / "simnpu" / "build" / "lib" / name)
    proc = torchrun("collectives", 2, tmp_path / "out", TEST_CHIP="npuvariant", TORCH_DEVICE_BACKEND_AUTOLOAD="0",
                    PYTHONPATH=str(driverless_chip / "site"), LD_LIBRARY_PATH=str(lib))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in results(tmp_path / "out", 2):
        assert r["failures"] == [], r["failures"][:10]
        assert r["checked"] >= 150


def test_fsdp2_trains_and_a_distributed_checkpoint_round_trips(tmp_path, world=2):
    # DeviceMesh puts each rank on device LOCAL_RANK, as on a real host: one simulated device a rank
    proc = torchrun("fsdp", world, tmp_path, SIMNPU_DEVICE_COUNT=str(max(world, 2)))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = results(tmp_path, world)
    for r in ranks:
        assert r["losses"][-1] < 0.5 * r["losses"][0], r["losses"]   # it trained
        assert r["restored"]                                           # load brought back what was saved
        assert r["shard_devices"] == ["npu:0"] or r["shard_devices"] == [f"npu:{r['rank']}"]
    assert all(r["params"] == ranks[0]["params"] for r in ranks[1:])   # one model, sharded


def test_a_rank_dying_mid_collective_gives_the_others_a_clear_error(tmp_path):
    """rank 1's process exits inside its third collective: the others get an error naming the
    rank, well within the group's timeout, never a hang."""
    codes = ranks_without_agent("fault", 2, tmp_path, SIMCCL_FAULTS="rank=1,die_after=2", TEST_TIMEOUT_S="60")
    assert codes[1] != 0                                                # rank 1 died
    survivor = json.loads((tmp_path / "rank0.json").read_text())
    assert survivor["error"] is not None, "rank 0 finished its collectives although rank 1 died"
    assert survivor["error"]["type"] == "DistBackendError", survivor["error"]
    message = survivor["error"]["message"]
    assert "npuccl rank 0: all_reduce" in message and "rank 1" in message and "exited" in message, message
    assert survivor["seconds"] < 30
    assert not (tmp_path / "rank1.json").exists()


def test_a_stalled_peer_fails_the_collective_at_the_groups_timeout(tmp_path):
    """rank 1 stalls 30 s inside its third collective; the library itself would wait 2 minutes.
    The process group's own timeout (5 s) fails the waiting ranks' work with an error naming the
    op and the timeout, and aborts the communicator: no rank hangs."""
    codes = ranks_without_agent("fault", 2, tmp_path, SIMCCL_FAULTS="rank=1,stall_after=2,stall_ms=30000",
                                SIMCCL_TIMEOUT_MS="120000", TEST_TIMEOUT_S="5")
    assert codes == [0, 0]
    ranks = results(tmp_path, 2)
    for r in ranks:
        assert r["error"] is not None, f"rank {r['rank']} finished its collectives although rank 1 stalled"
        assert r["error"]["type"] == "DistBackendError", r["error"]
    messages = [r["error"]["message"] for r in ranks]
    assert all(f"npuccl rank {r['rank']}: all_reduce #" in r["error"]["message"] for r in ranks), messages
    # Each rank's timeout runs from its own start of the collective: the first to expire reports
    # it and aborts the communicator, and the other rank may fail on that abort before its own
    # expires (which rank comes first depends on the host's load).
    assert any("did not complete within 5000 ms" in m for m in messages), messages
    assert all("did not complete within 5000 ms" in m or "aborted the communicator" in m for m in messages), messages
    assert ranks[0]["seconds"] < 25, ranks[0]
