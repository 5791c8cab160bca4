"""Tests of the simulated SDK's collective library (libsimnpu_ccl.so) through ctypes.

Each rank is its own process (tests/sdk/simccl_worker.py) unless a test says otherwise; every
process runs under a timeout, so a hang fails the test instead of stalling the run.
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LIB = ROOT / "simnpu" / "build" / "lib" / "libsimnpu_ccl.so"
WORKER = HERE / "simccl_worker.py"

sys.path.insert(0, str(HERE))
import simccl_worker as W  # noqa: E402

SUCCESS, UNHANDLED, SYSTEM, INTERNAL, INVALID_ARGUMENT, INVALID_USAGE, REMOTE, IN_PROGRESS, TIMEOUT = range(9)
LAUNCH_FAILURE = 7


@pytest.fixture(scope="module")
def libs():
    if not LIB.exists():
        env = dict(os.environ, SIMNPU_BUILD_KERNELS=os.environ.get("SIMNPU_BUILD_KERNELS", "OFF"))
        subprocess.run(["bash", str(ROOT / "simnpu" / "build.sh")], check=True, env=env)
    return W.load()


def new_id(ccl):
    uid = W.UniqueId()
    assert ccl.simcclGetUniqueId(ctypes.byref(uid)) == SUCCESS
    return uid


def shm_path(uid):
    name = ctypes.string_at(ctypes.addressof(uid), 128)[8:].split(b"\0")[0].decode()
    assert name.startswith("/simccl-")
    return Path("/dev/shm") / name[1:]


def launch(scenario, nranks, uid, env=None, ranks=None):
    """Starts the ranks' processes; returns the Popen list (index = rank)."""
    id_hex = ctypes.string_at(ctypes.addressof(uid), 128).hex()
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("SIMCCL_FAULTS", None) if not (env and "SIMCCL_FAULTS" in env) else None
    procs = []
    for rank in (ranks if ranks is not None else range(nranks)):
        procs.append(subprocess.Popen([sys.executable, str(WORKER), scenario, str(rank), str(nranks), id_hex],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=full_env, text=True))
    # release the ranks together once all have started (each prints its ready line first)
    for p in procs:
        line = p.stdout.readline()
        if not line.startswith('{"ready"'):
            for q in procs:
                q.kill()
            pytest.fail(f"rank process did not start: {line!r} {p.stderr.read()[-2000:]}")
        p.pid_reported = json.loads(line)["pid"]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return procs


def collect(procs, timeout=30):
    """Waits for every process (killing all on timeout) and returns each one's last JSON line."""
    deadline = time.monotonic() + timeout
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"rank process did not finish within {timeout} s (hang)")
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        results.append({"rc": p.returncode, "stderr": err, "last": lines[-1] if lines else None, "lines": lines})
    return results


def run_ranks(scenario, nranks, ccl, env=None, timeout=30):
    uid = new_id(ccl)
    res = collect(launch(scenario, nranks, uid, env), timeout)
    for k, r in enumerate(res):
        assert r["rc"] == 0 and r["last"] is not None, f"rank {k}: exit {r['rc']}: {r['stderr'][-2000:]}"
        assert "init_rc" not in r["last"], r["last"]
    assert not shm_path(uid).exists()
    return [r["last"] for r in res]


# ------------------------------------------------------------------ correctness


@pytest.mark.parametrize("nranks,split", [(2, "64K"), (4, "64K"), (2, "0"), (4, "0")])
def test_every_collective_dtype_and_op(libs, nranks, split):
    # small slots: every collective runs in several chunks; split 0: every all_reduce chunk is
    # split among the ranks (by default only chunks of 64 KiB and more)
    out = run_ranks("collectives", nranks, libs[1], env={"SIMCCL_SLOT_BYTES": "8K", "SIMCCL_SPLIT_BYTES": split},
                    timeout=60)
    for k, r in enumerate(out):
        assert r["errors"] == [], f"rank {k}: {r['errors'][:5]}"
        assert r["destroy_rc"] == SUCCESS


@pytest.mark.parametrize("nranks", [2, 4])
def test_send_recv_in_groups(libs, nranks):
    out = run_ranks("p2p", nranks, libs[1])
    for k, r in enumerate(out):
        assert r["errors"] == [], f"rank {k}: {r['errors']}"


def test_all_reduce_64mib(libs):
    out = run_ranks("big", 2, libs[1], timeout=60)
    for r in out:
        assert r["errors"] == []


def test_call_returns_before_the_work_runs(libs):
    out = run_ranks("async", 2, libs[1])
    for r in out:
        assert r["errors"] == [], r["errors"]


def local(scenario, env=None, timeout=30):
    """Runs a single-process scenario of simccl_worker in a fresh process. (Not in pytest's own
    process: conftest imports torch, whose backend autoload may have loaded another checkout's
    libsimnpu_runtime.so, which libsimnpu_ccl.so would then bind to by soname.)"""
    full_env = dict(os.environ, **(env or {}))
    if not (env and "SIMCCL_FAULTS" in env):
        full_env.pop("SIMCCL_FAULTS", None)
    p = subprocess.run([sys.executable, str(WORKER), scenario, "0", "1", "-"], capture_output=True, text=True,
                       env=full_env, timeout=timeout)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert p.returncode == 0 and lines, p.stderr[-2000:]
    return lines[-1]


def test_threads_as_ranks_and_one_rank(libs):
    """Ranks may be threads of one process; a 1-rank communicator works in place."""
    r = local("local_threads")
    assert r["errors"] == [], r["errors"]


def test_argument_checks(libs):
    r = local("local_args")
    assert r["errors"] == [], r["errors"]


@pytest.mark.parametrize("value,key", [("rank=1,die_after=abc", "die_after"), ("rank=1,explode=3", "explode"),
                                       ("stall_after", "stall_after"), ("rank=-1,die_after=2", "rank"),
                                       ("stall_after=2,stall_ms=", "stall_ms")])
def test_malformed_faults_refused(libs, value, key):
    r = local("local_init", {"SIMCCL_FAULTS": value})
    assert r["init_rc"] == INVALID_ARGUMENT
    assert "SIMCCL_FAULTS" in r["msg"] and key in r["msg"], r["msg"]
    assert not r["shm_left"]


@pytest.mark.parametrize("var,value", [("SIMCCL_TIMEOUT_MS", "10s"), ("SIMCCL_SLOT_BYTES", "lots"),
                                       ("SIMCCL_SLOT_BYTES", "100"), ("SIMCCL_SPLIT_BYTES", "-1")])
def test_malformed_settings_refused(libs, var, value):
    r = local("local_init", {var: value})
    assert r["init_rc"] == INVALID_ARGUMENT and var in r["msg"], r


# ------------------------------------------------------------------ misuse and faults


def test_order_mismatch_is_invalid_usage_on_all_ranks(libs):
    out = run_ranks("mismatch", 2, libs[1], env={"SIMCCL_TIMEOUT_MS": "20000"})
    for r in out:
        assert r["rc"] == SUCCESS and r["sync"] == LAUNCH_FAILURE and r["async"] == INVALID_USAGE, r
        assert "ranks disagree" in r["msg"] and "all_reduce" in r["msg"] and "broadcast" in r["msg"], r["msg"]
        assert r["seconds"] < 5
        assert r["later_sync"] == LAUNCH_FAILURE
    out = run_ranks("count_mismatch", 2, libs[1], env={"SIMCCL_TIMEOUT_MS": "20000"})
    for r in out:
        assert r["sync"] == LAUNCH_FAILURE and r["async"] == INVALID_USAGE and "count=32" in r["msg"], r


@pytest.mark.parametrize("nranks", [2, 4])
def test_rank_that_dies_is_a_remote_error(libs, nranks):
    uid = new_id(libs[1])
    env = {"SIMCCL_FAULTS": "rank=1,die_after=2", "SIMCCL_TIMEOUT_MS": "20000"}
    t0 = time.monotonic()
    procs = launch("loop", nranks, uid, env)
    res = collect(procs, timeout=30)
    assert res[1]["rc"] == 1 and "die_after=2" in res[1]["stderr"]
    pid1 = procs[1].pid_reported
    for k, r in enumerate(res):
        if k == 1:
            continue
        last = r["last"]
        assert r["rc"] == 0 and last["done"] == 2 and last["async"] == REMOTE, (k, last, r["stderr"])
        assert f"rank 1 (pid {pid1}) exited during all_reduce #3" in last["msg"], last["msg"]
        assert last["destroy_rc"] == SUCCESS
    assert time.monotonic() - t0 < 15  # well inside the 20 s timeout
    assert not shm_path(uid).exists()


def test_rank_killed_mid_collective(libs):
    """SIGKILL while the peer waits in an all_reduce: the survivor fails, the segment is gone."""
    uid = new_id(libs[1])
    env = {"SIMCCL_FAULTS": "rank=1,stall_after=1,stall_ms=20000", "SIMCCL_TIMEOUT_MS": "20000"}
    procs = launch("loop", 2, uid, env)
    # rank 1 stalls in its 2nd all_reduce; kill it once rank 0 is done with the 1st (and so waits in the 2nd)
    while True:
        line = procs[0].stdout.readline()
        assert line, procs[0].stderr.read()[-2000:]
        if json.loads(line).get("progress") == 1:
            break
    time.sleep(0.2)
    procs[1].send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    res = collect(procs, timeout=20)
    last = res[0]["last"]
    assert last["async"] == REMOTE and last["done"] == 1, last
    assert "rank 1 (pid" in last["msg"] and "exited during all_reduce #2" in last["msg"], last["msg"]
    assert time.monotonic() - t0 < 5
    assert not shm_path(uid).exists()


def test_stalled_rank_is_a_timeout(libs):
    env = {"SIMCCL_FAULTS": "rank=1,stall_after=1,stall_ms=3000", "SIMCCL_TIMEOUT_MS": "1000", "LOOP_N": "3"}
    uid = new_id(libs[1])
    t0 = time.monotonic()
    res = collect(launch("loop", 2, uid, env), timeout=20)
    r0, r1 = res[0]["last"], res[1]["last"]
    assert r0["async"] == TIMEOUT and r0["done"] == 1, r0
    assert "rank 1 (pid" in r0["msg"] and "did not arrive within 1000 ms" in r0["msg"], r0["msg"]
    # the stalled rank, once awake, learns that its peer gave up
    assert r1["async"] == REMOTE and "rank 0" in r1["msg"], r1
    assert time.monotonic() - t0 < 10
    assert not shm_path(uid).exists()


def test_missing_rank_at_init_is_a_timeout(libs):
    uid = new_id(libs[1])
    res = collect(launch("init_only", 3, uid, {"SIMCCL_TIMEOUT_MS": "500"}, ranks=[0, 2]), timeout=20)
    for r in res:
        assert r["last"]["init_rc"] == TIMEOUT, r
        assert "rank(s) 1 did not join" in r["last"]["msg"]
    assert not shm_path(uid).exists()


def test_abort_fails_peers_promptly(libs):
    uid = new_id(libs[1])
    res = collect(launch("abort", 2, uid, {"SIMCCL_TIMEOUT_MS": "20000"}), timeout=20)
    r0, r1 = res[0]["last"], res[1]["last"]
    assert r1["abort_rc"] == SUCCESS and r1["abort_s"] < 1.0  # never blocks (loose bound: busy machine)
    assert r1["sync"] == LAUNCH_FAILURE and "aborted" in r1["msg"], r1  # its queued work failed
    assert r1["after_abort"] == INVALID_ARGUMENT
    assert r0["async"] == REMOTE and "rank 1" in r0["msg"] and "aborted" in r0["msg"], r0
    assert r0["seconds"] < 5
    assert not shm_path(uid).exists()
