"""One rank of a libsimnpu_ccl test (tests/sdk/test_simccl.py), run as its own process:

    python3 simccl_worker.py SCENARIO RANK NRANKS ID_HEX

It prints one JSON line: {"errors": [...], ...}; the test asserts on it. Inputs are a function of
(rank, case), so every rank computes the reference of every collective itself.
"""
import ctypes
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
LIBDIR = ROOT / "simnpu" / "build" / "lib"

vp = ctypes.c_void_p
HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def load():
    rt = ctypes.CDLL(str(LIBDIR / "libsimnpu_runtime.so"))
    ccl = ctypes.CDLL(str(LIBDIR / "libsimnpu_ccl.so"))
    for name, args in {
        "simnpuMalloc": [ctypes.POINTER(vp), ctypes.c_size_t],
        "simnpuFree": [vp],
        "simnpuMemcpy": [vp, vp, ctypes.c_size_t, ctypes.c_int],
        "simnpuStreamCreate": [ctypes.POINTER(vp)],
        "simnpuStreamSynchronize": [vp],
        "simnpuStreamQuery": [vp],
        "simnpuLaunchHostFunc": [vp, HOSTFN, vp],
        "simnpuSetDevice": [ctypes.c_int],
    }.items():
        getattr(rt, name).argtypes = args
        getattr(rt, name).restype = ctypes.c_int
    rt.simnpuGetLastErrorMessage.restype = ctypes.c_char_p
    rt.simnpuGetLastErrorMessage.argtypes = []
    i, sz = ctypes.c_int, ctypes.c_size_t
    for name, args in {
        "simcclGetVersion": [ctypes.POINTER(i)],
        "simcclGetUniqueId": [ctypes.POINTER(UniqueId)],
        "simcclCommInitRank": [ctypes.POINTER(vp), i, UniqueId, i],
        "simcclCommDestroy": [vp],
        "simcclCommAbort": [vp],
        "simcclCommGetAsyncError": [vp, ctypes.POINTER(i)],
        "simcclCommCount": [vp, ctypes.POINTER(i)],
        "simcclCommUserRank": [vp, ctypes.POINTER(i)],
        "simcclAllReduce": [vp, vp, sz, i, i, vp, vp],
        "simcclBroadcast": [vp, vp, sz, i, i, vp, vp],
        "simcclReduce": [vp, vp, sz, i, i, i, vp, vp],
        "simcclAllGather": [vp, vp, sz, i, vp, vp],
        "simcclReduceScatter": [vp, vp, sz, i, i, vp, vp],
        "simcclAllToAll": [vp, vp, sz, i, vp, vp],
        "simcclSend": [vp, sz, i, i, vp, vp],
        "simcclRecv": [vp, sz, i, i, vp, vp],
        "simcclGroupStart": [],
        "simcclGroupEnd": [],
    }.items():
        getattr(ccl, name).argtypes = args
        getattr(ccl, name).restype = ctypes.c_int
    for name in ("simcclGetErrorString", "simcclGetLastError"):
        getattr(ccl, name).restype = ctypes.c_char_p
    ccl.simcclGetErrorString.argtypes = [i]
    ccl.simcclGetLastError.argtypes = [vp]
    return rt, ccl


SUCCESS, UNHANDLED, SYSTEM, INTERNAL, INVALID_ARGUMENT, INVALID_USAGE, REMOTE, IN_PROGRESS, TIMEOUT = range(9)
SUM, PROD, MAX, MIN, AVG = range(5)
H2D, D2H = 1, 2
LAUNCH_FAILURE = 7

# simccl dtype code -> (numpy dtype of the storage, kind)
DTYPES = {
    0: (np.int8, "int"), 1: (np.uint8, "int"), 2: (np.int32, "int"), 3: (np.uint32, "int"),
    4: (np.int64, "int"), 5: (np.uint64, "int"), 6: (np.float16, "float"), 7: (np.float32, "float"),
    8: (np.float64, "float"), 9: (np.uint16, "bf16"), 10: (np.uint8, "bool"), 11: (np.int16, "int"),
    12: (np.complex64, "complex"), 13: (np.complex128, "complex"),
}


def ops_for(dt):
    kind = DTYPES[dt][1]
    if kind == "complex":
        return [SUM, PROD, AVG]
    if kind == "bool":
        return [SUM, PROD, MAX, MIN]
    return [SUM, PROD, MAX, MIN, AVG]


def to_bf16(a):  # exact for the small integers used here
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16(a):
    return (a.astype(np.uint32) << 16).view(np.float32)


def make_input(dt, rank, case, n):
    """Small integers (exact in every dtype, products of 4 ranks fit int8)."""
    rng = np.random.default_rng(1000 * case + rank)
    st, kind = DTYPES[dt]
    if kind == "bool":
        return rng.integers(0, 2, n).astype(np.uint8)
    if kind == "complex":
        return (rng.integers(-3, 4, n) + 1j * rng.integers(-3, 4, n)).astype(st)
    lo = 0 if (kind == "int" and np.dtype(st).kind == "u") else -3
    vals = rng.integers(lo, 4, n)
    if kind == "bf16":
        return to_bf16(vals)
    return vals.astype(st)


def reference(dt, op, arrays):
    """The reduction of arrays (one per rank, in rank order) as the library defines it."""
    st, kind = DTYPES[dt]
    n = len(arrays)
    if kind == "bool":
        b = np.array([a != 0 for a in arrays])
        return (b.any(0) if op in (SUM, MAX) else b.all(0)).astype(np.uint8)
    if kind == "bf16":
        x = np.array([from_bf16(a) for a in arrays], np.float32)
    else:
        x = np.array(arrays)
    if kind == "int":
        w = x.astype(np.int64) if np.dtype(st).kind == "i" else x.astype(np.uint64)
        if op == SUM:
            r = w.sum(0)
        elif op == PROD:
            r = w.prod(0)
        elif op == MAX:
            r = w.max(0)
        elif op == MIN:
            r = w.min(0)
        else:
            s = w.sum(0).astype(st).astype(np.int64)
            r = np.trunc(s / n).astype(np.int64)
        return r.astype(st)
    acc = x.astype(np.float32) if kind in ("bf16",) or st == np.float16 else x
    if op == SUM:
        r = acc.sum(0)
    elif op == PROD:
        r = acc.prod(0)
    elif op == MAX:
        r = acc.max(0)
    elif op == MIN:
        r = acc.min(0)
    else:
        r = acc.sum(0) / n
    if kind == "bf16":
        return to_bf16(r)
    return r.astype(st)


class Rank:
    def __init__(self, rank, nranks, id_hex, init=True):
        self.rt, self.ccl = load()
        self.rank, self.n = rank, nranks
        self.uid = UniqueId()
        ctypes.memmove(ctypes.addressof(self.uid), bytes.fromhex(id_hex), 128)
        self.stream = vp()
        assert self.rt.simnpuStreamCreate(ctypes.byref(self.stream)) == 0
        self.comm = vp()
        self.bufs = []
        self.init_rc = None
        # Start line: the test releases every rank at once, after all of them have started up
        # (python, numpy, the libraries), so a short SIMCCL_TIMEOUT_MS only times the library.
        emit(ready=True, pid=os.getpid())
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("no go from the test")
        if init:
            self.init_rc = self.ccl.simcclCommInitRank(ctypes.byref(self.comm), nranks, self.uid, rank)

    def last_error(self, comm=True):
        return (self.ccl.simcclGetLastError(self.comm if comm else None) or b"").decode()

    def dev(self, nbytes):
        p = vp()
        assert self.rt.simnpuMalloc(ctypes.byref(p), max(nbytes, 1)) == 0
        self.bufs.append(p)
        return p

    def put(self, arr):
        arr = np.ascontiguousarray(arr)
        p = self.dev(arr.nbytes)
        if arr.nbytes:
            assert self.rt.simnpuMemcpy(p, arr.ctypes.data, arr.nbytes, H2D) == 0
        return p

    def get(self, p, n, st, offset_elems=0):
        out = np.empty(n, st)
        if out.nbytes:
            src = p.value + offset_elems * np.dtype(st).itemsize
            assert self.rt.simnpuMemcpy(out.ctypes.data, src, out.nbytes, D2H) == 0
        return out

    def sync(self):
        return self.rt.simnpuStreamSynchronize(self.stream)

    def free_all(self):
        for p in self.bufs:
            self.rt.simnpuFree(p)
        self.bufs = []

    def async_error(self):
        e = ctypes.c_int(-1)
        self.ccl.simcclCommGetAsyncError(self.comm, ctypes.byref(e))
        return e.value


def emit(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------ scenarios


def scenario_collectives(r: Rank):
    """Every collective, dtype and op against the numpy reference, out of place and in place."""
    errors = []
    n, me = r.n, r.rank
    ccl = r.ccl
    count = 1003
    case = 0

    def check(what, got, want):
        if got.shape != want.shape or not np.array_equal(got, want):
            bad = np.nonzero(got != want)[0][:5] if got.shape == want.shape else "shape"
            errors.append(f"{what}: mismatch at {bad}: got {got[:8]} want {want[:8]}")

    def run(what, rc):
        if rc != SUCCESS:
            errors.append(f"{what}: call returned {rc}: {r.last_error()}")
            return False
        s = r.sync()
        if s != 0:
            errors.append(f"{what}: synchronize returned {s}: {r.last_error()}")
            return False
        return True

    for dt, (st, kind) in DTYPES.items():
        for op in ops_for(dt):
            case += 1
            ins = [make_input(dt, k, case, count) for k in range(n)]
            want = reference(dt, op, ins)
            for inplace in (False, True):
                tag = f"dtype={dt} op={op} inplace={inplace}"
                # all_reduce
                s = r.put(ins[me])
                d = s if inplace else r.put(np.zeros(count, st))
                if run("all_reduce " + tag, ccl.simcclAllReduce(s, d, count, dt, op, r.comm, r.stream)):
                    check("all_reduce " + tag, r.get(d, count, st), want)
                # reduce to root 1 % n
                root = 1 % n
                s = r.put(ins[me])
                d = s if inplace else r.put(np.zeros(count, st))
                if run("reduce " + tag, ccl.simcclReduce(s, d, count, dt, op, root, r.comm, r.stream)) and me == root:
                    check("reduce " + tag, r.get(d, count, st), want)
                # reduce_scatter: rank k's send is the concatenation of n blocks
                rc_count = count
                blocks = [np.concatenate([make_input(dt, k, case * 100 + b, rc_count) for b in range(n)])
                          for k in range(n)]
                want_rs = reference(dt, op, [blk[me * rc_count:(me + 1) * rc_count] for blk in blocks])
                s = r.put(blocks[me])
                d = (ctypes.c_void_p(s.value + me * rc_count * np.dtype(st).itemsize) if inplace
                     else r.put(np.zeros(rc_count, st)))
                if run("reduce_scatter " + tag, ccl.simcclReduceScatter(s, d, rc_count, dt, op, r.comm, r.stream)):
                    check("reduce_scatter " + tag, r.get(d, rc_count, st), want_rs)
                r.free_all()
        # data movement, once per dtype
        case += 1
        ins = [make_input(dt, k, case, count) for k in range(n)]
        for inplace in (False, True):
            tag = f"dtype={dt} inplace={inplace}"
            root = n - 1
            s = r.put(ins[me])
            d = s if inplace else r.put(np.zeros(count, st))
            if run("broadcast " + tag, ccl.simcclBroadcast(s, d, count, dt, root, r.comm, r.stream)):
                check("broadcast " + tag, r.get(d, count, st), ins[root])
            full = np.concatenate(ins)
            if inplace:
                buf = np.zeros(n * count, st)
                buf[me * count:(me + 1) * count] = ins[me]
                d = r.put(buf)
                s = ctypes.c_void_p(d.value + me * count * np.dtype(st).itemsize)
            else:
                s, d = r.put(ins[me]), r.put(np.zeros(n * count, st))
            if run("all_gather " + tag, ccl.simcclAllGather(s, d, count, dt, r.comm, r.stream)):
                check("all_gather " + tag, r.get(d, n * count, st), full)
            a2a = [np.concatenate([make_input(dt, k, case * 100 + b, count) for b in range(n)]) for k in range(n)]
            want_a2a = np.concatenate([a2a[k][me * count:(me + 1) * count] for k in range(n)])
            s = r.put(a2a[me])
            d = s if inplace else r.put(np.zeros(n * count, st))
            if run("all_to_all " + tag, ccl.simcclAllToAll(s, d, count, dt, r.comm, r.stream)):
                check("all_to_all " + tag, r.get(d, n * count, st), want_a2a)
            r.free_all()
    # zero-count collectives still match up across ranks
    z = r.dev(16)
    if run("all_reduce count=0", ccl.simcclAllReduce(z, z, 0, 7, SUM, r.comm, r.stream)):
        pass
    r.free_all()
    return {"errors": errors, "cases": case}


def scenario_p2p(r: Rank):
    """send/recv in groups: a ring exchange bigger than a channel, a pairwise swap, send to self."""
    errors = []
    n, me, ccl = r.n, r.rank, r.ccl
    count = 3 * 1024 * 1024 // 4 + 17  # float32, several channel chunks
    nxt, prv = (me + 1) % n, (me - 1) % n
    data = np.arange(count, dtype=np.float32) + 1000 * me
    s, d = r.put(data), r.put(np.zeros(count, np.float32))
    ccl.simcclGroupStart()
    rc1 = ccl.simcclSend(s, count, 7, nxt, r.comm, r.stream)
    rc2 = ccl.simcclRecv(d, count, 7, prv, r.comm, r.stream)
    rc3 = ccl.simcclGroupEnd()
    if (rc1, rc2, rc3) != (0, 0, 0) or r.sync() != 0:
        errors.append(f"ring: {rc1} {rc2} {rc3}: {r.last_error()}")
    elif not np.array_equal(r.get(d, count, np.float32), np.arange(count, dtype=np.float32) + 1000 * prv):
        errors.append("ring: wrong data")
    # pairwise swap between ranks 0 and 1 (others idle), both directions in one group, in place
    if me < 2:
        peer = 1 - me
        a = np.full(5000, me + 1, np.int64)
        sa, da = r.put(a), r.put(np.zeros(5000, np.int64))
        ccl.simcclGroupStart()
        ccl.simcclRecv(da, 5000, 4, peer, r.comm, r.stream)
        ccl.simcclSend(sa, 5000, 4, peer, r.comm, r.stream)
        ccl.simcclGroupEnd()
        if r.sync() != 0 or not np.all(r.get(da, 5000, np.int64) == peer + 1):
            errors.append(f"swap: {r.last_error()}")
    # unfused, ordered send then recv (rank 0) / recv then send (rank 1); small messages fit the channel
    if me < 2:
        b = np.array([7 + me] * 10, np.int32)
        sb, db = r.put(b), r.put(np.zeros(10, np.int32))
        if me == 0:
            ccl.simcclSend(sb, 10, 2, 1, r.comm, r.stream)
            ccl.simcclRecv(db, 10, 2, 1, r.comm, r.stream)
        else:
            ccl.simcclRecv(db, 10, 2, 0, r.comm, r.stream)
            ccl.simcclSend(sb, 10, 2, 0, r.comm, r.stream)
        if r.sync() != 0 or not np.all(r.get(db, 10, np.int32) == 8 - me):
            errors.append(f"ordered: {r.last_error()}")
    # send to self inside a group
    c = np.arange(100, dtype=np.float64)
    sc, dc = r.put(c), r.put(np.zeros(100))
    ccl.simcclGroupStart()
    ccl.simcclSend(sc, 100, 8, me, r.comm, r.stream)
    ccl.simcclRecv(dc, 100, 8, me, r.comm, r.stream)
    ccl.simcclGroupEnd()
    if r.sync() != 0 or not np.array_equal(r.get(dc, 100, np.float64), c):
        errors.append(f"self: {r.last_error()}")
    # a collective after the p2p traffic still lines up
    e = r.put(np.ones(10, np.float32))
    ccl.simcclAllReduce(e, e, 10, 7, SUM, r.comm, r.stream)
    if r.sync() != 0 or not np.all(r.get(e, 10, np.float32) == n):
        errors.append(f"after p2p: {r.last_error()}")
    # a size mismatch is an invalid usage for the receiver (the sender's data is already out)
    if me < 2:
        f = r.dev(4096)
        if me == 0:
            ccl.simcclSend(f, 100, 7, 1, r.comm, r.stream)
        else:
            ccl.simcclRecv(f, 200, 7, 0, r.comm, r.stream)
        rc = r.sync()
        if me == 1 and (rc != LAUNCH_FAILURE or r.async_error() != INVALID_USAGE or
                        "expected 800 bytes, rank 0 sent 400 bytes" not in r.last_error()):
            errors.append(f"p2p size mismatch: sync {rc} async {r.async_error()}: {r.last_error()}")
    r.free_all()
    return {"errors": errors}


def scenario_big(r: Rank):
    """64 MiB all_reduce (float32) through the default slots, then a timed loop for the record."""
    n, me, ccl = r.n, r.rank, r.ccl
    count = 64 * 1024 * 1024 // 4
    x = (np.arange(count, dtype=np.int64) % 1009).astype(np.float32) + me
    s, d = r.put(x), r.dev(x.nbytes)
    t0 = time.perf_counter()
    rc = ccl.simcclAllReduce(s, d, count, 7, SUM, r.comm, r.stream)
    sync = r.sync()
    dt = time.perf_counter() - t0
    errors = []
    if rc or sync:
        errors.append(f"{rc} {sync}: {r.last_error()}")
    else:
        want = (np.arange(count, dtype=np.int64) % 1009).astype(np.float32) * n + sum(range(n))
        got = r.get(d, count, np.float32)
        if not np.array_equal(got, want):
            errors.append("64 MiB all_reduce: wrong result")
    r.free_all()
    return {"errors": errors, "seconds": dt}


def scenario_async(r: Rank):
    """The call returns before the work runs: the stream is held by a host function."""
    ccl, errors = r.ccl, []
    gate = threading.Event()
    cb = HOSTFN(lambda _: gate.wait(20))
    x = r.put(np.full(1000, r.rank + 1, np.float32))
    assert r.rt.simnpuLaunchHostFunc(r.stream, cb, None) == 0
    t0 = time.perf_counter()
    rc = ccl.simcclAllReduce(x, x, 1000, 7, SUM, r.comm, r.stream)
    call_s = time.perf_counter() - t0
    query = r.rt.simnpuStreamQuery(r.stream)
    before = r.get(x, 1000, np.float32)  # the host copy does not wait for our stream
    time.sleep(0.2)
    still = r.rt.simnpuStreamQuery(r.stream)
    gate.set()
    sync = r.sync()
    after = r.get(x, 1000, np.float32)
    if rc != 0 or call_s > 0.5:
        errors.append(f"call rc {rc} took {call_s:.3f}s")
    if query != 6 or still != 6:
        errors.append(f"stream query {query}, {still} (want NotReady)")
    if not np.all(before == r.rank + 1):
        errors.append("the all_reduce ran before the stream reached it")
    if sync != 0 or not np.all(after == sum(range(1, r.n + 1))):
        errors.append(f"after: sync {sync}: {after[:4]}: {r.last_error()}")
    r.free_all()
    return {"errors": errors, "call_s": call_s}


def scenario_mismatch(r: Rank):
    """Rank 0 calls all_reduce while the others call broadcast; then a count mismatch on a fresh comm."""
    ccl = r.ccl
    x = r.put(np.ones(64, np.float32))
    t0 = time.perf_counter()
    if r.rank == 0:
        rc = ccl.simcclAllReduce(x, x, 64, 7, SUM, r.comm, r.stream)
    else:
        rc = ccl.simcclBroadcast(x, x, 64, 7, 0, r.comm, r.stream)
    sync = r.sync()
    res = {"rc": rc, "sync": sync, "async": r.async_error(), "msg": r.last_error(),
           "seconds": time.perf_counter() - t0, "errors": []}
    # the comm is broken from now on: later work fails fast with the same error
    rc2 = ccl.simcclAllReduce(x, x, 64, 7, SUM, r.comm, r.stream)
    res["later_sync"] = r.sync()
    res["later_rc"] = rc2
    r.free_all()
    return res


def scenario_count_mismatch(r: Rank):
    ccl = r.ccl
    x = r.put(np.ones(64, np.float32))
    rc = ccl.simcclAllReduce(x, x, 64 if r.rank == 0 else 32, 7, SUM, r.comm, r.stream)
    sync = r.sync()
    r.free_all()
    return {"rc": rc, "sync": sync, "async": r.async_error(), "msg": r.last_error(), "errors": []}


def scenario_loop(r: Rank):
    """Several all_reduces (SIMCCL_FAULTS may kill or stall a rank on the way); reports the first failure."""
    ccl = r.ccl
    x = r.put(np.ones(4096, np.float32))
    done, t0, sync = 0, time.perf_counter(), 0
    for _ in range(int(os.environ.get("LOOP_N", "5"))):
        ccl.simcclAllReduce(x, x, 4096, 7, SUM, r.comm, r.stream)
        sync = r.sync()
        if sync:
            break
        done += 1
        emit(progress=done)
    return {"done": done, "sync": sync, "async": r.async_error(), "msg": r.last_error(),
            "seconds": time.perf_counter() - t0, "errors": []}


def scenario_abort(r: Rank):
    """Rank 1 queues work behind a held stream, then aborts; rank 0 waits in an all_reduce."""
    ccl = r.ccl
    x = r.put(np.ones(16, np.float32))
    if r.rank == 1:
        gate = threading.Event()
        cb = HOSTFN(lambda _: gate.wait(20))
        r.rt.simnpuLaunchHostFunc(r.stream, cb, None)
        ccl.simcclAllReduce(x, x, 16, 7, SUM, r.comm, r.stream)
        time.sleep(0.5)  # rank 0 is waiting by now
        t0 = time.perf_counter()
        rc = ccl.simcclCommAbort(r.comm)
        abort_s = time.perf_counter() - t0
        gate.set()
        sync = r.sync()
        msg = (r.rt.simnpuGetLastErrorMessage() or b"").decode()
        return {"abort_rc": rc, "abort_s": abort_s, "sync": sync, "msg": msg, "errors": [],
                "after_abort": ccl.simcclAllReduce(x, x, 16, 7, SUM, r.comm, r.stream)}
    t0 = time.perf_counter()
    ccl.simcclAllReduce(x, x, 16, 7, SUM, r.comm, r.stream)
    sync = r.sync()
    return {"sync": sync, "async": r.async_error(), "msg": r.last_error(), "seconds": time.perf_counter() - t0,
            "errors": []}


# ------------------------------------------------------------------ single-process scenarios


def new_id(ccl):
    uid = UniqueId()
    assert ccl.simcclGetUniqueId(ctypes.byref(uid)) == SUCCESS
    return uid


def shm_exists(uid):
    name = ctypes.string_at(ctypes.addressof(uid), 128)[8:].split(b"\0")[0].decode()
    return os.path.exists("/dev/shm/" + name[1:])


def local_threads(rt, ccl):
    errors = []
    uid = new_id(ccl)
    results = {}

    def rank_main(rank):
        comm = vp()
        rc = ccl.simcclCommInitRank(ctypes.byref(comm), 2, uid, rank)
        s = vp()
        rt.simnpuStreamCreate(ctypes.byref(s))
        x = np.full(100000, rank + 1.0, np.float64)
        p = vp()
        rt.simnpuMalloc(ctypes.byref(p), x.nbytes)
        rt.simnpuMemcpy(p, x.ctypes.data, x.nbytes, H2D)
        rcs = {ccl.simcclAllReduce(p, p, x.size, 8, SUM, comm, s) for _ in range(20)}
        sync = rt.simnpuStreamSynchronize(s)
        rt.simnpuMemcpy(x.ctypes.data, p, x.nbytes, D2H)
        results[rank] = [rc, sorted(rcs), sync, float(x[0]), float(x[-1]), ccl.simcclCommDestroy(comm)]
        rt.simnpuFree(p)

    threads = [threading.Thread(target=rank_main, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    want = 3.0 * 2 ** 19
    if results != {0: [0, [0], 0, want, want, 0], 1: [0, [0], 0, want, want, 0]}:
        errors.append(f"threads: {results}")
    if shm_exists(uid):
        errors.append("threads: shared memory left")

    # two communicators at once in one process, each thread a rank of both
    ids = [new_id(ccl), new_id(ccl)]
    got = {}

    def two_comms(rank):
        comms = [vp(), vp()]
        rcs = [ccl.simcclCommInitRank(ctypes.byref(comms[k]), 2, ids[k], rank) for k in range(2)]
        streams = [vp(), vp()]
        for s in streams:
            rt.simnpuStreamCreate(ctypes.byref(s))
        xs = [np.full(50000, (rank + 1) * (k + 1), np.int64) for k in range(2)]
        ps = [vp(), vp()]
        for k in range(2):
            rt.simnpuMalloc(ctypes.byref(ps[k]), xs[k].nbytes)
            rt.simnpuMemcpy(ps[k], xs[k].ctypes.data, xs[k].nbytes, H2D)
        for _ in range(10):
            for k in range(2):
                rcs.append(ccl.simcclAllReduce(ps[k], ps[k], 50000, 4, SUM, comms[k], streams[k]))
        rcs += [rt.simnpuStreamSynchronize(s) for s in streams]
        for k in range(2):
            rt.simnpuMemcpy(xs[k].ctypes.data, ps[k], xs[k].nbytes, D2H)
            rcs.append(ccl.simcclCommDestroy(comms[k]))
            rt.simnpuFree(ps[k])
        got[rank] = (sorted(set(rcs)), int(xs[0][7]), int(xs[1][-1]))

    threads = [threading.Thread(target=two_comms, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    want = ([0], 3 * 2 ** 9, 6 * 2 ** 9)
    if got != {0: want, 1: want}:
        errors.append(f"two communicators: {got}")

    uid = new_id(ccl)
    comm = vp()
    if ccl.simcclCommInitRank(ctypes.byref(comm), 1, uid, 0) != SUCCESS:
        return {"errors": errors + ["1 rank: init " + ccl.simcclGetLastError(None).decode()]}
    n, rank, ver = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if ccl.simcclCommCount(comm, ctypes.byref(n)) or n.value != 1:
        errors.append("count")
    if ccl.simcclCommUserRank(comm, ctypes.byref(rank)) or rank.value != 0:
        errors.append("rank")
    if ccl.simcclGetVersion(ctypes.byref(ver)) or ver.value != 10000:
        errors.append(f"version {ver.value}")
    x = np.arange(10, dtype=np.float32)
    p = vp()
    rt.simnpuMalloc(ctypes.byref(p), x.nbytes)
    rt.simnpuMemcpy(p, x.ctypes.data, x.nbytes, H2D)
    if ccl.simcclAllReduce(p, p, 10, 7, AVG, comm, None) != SUCCESS or rt.simnpuStreamSynchronize(None) != 0:
        errors.append("1 rank: all_reduce on the default stream failed")
    y = np.empty_like(x)
    rt.simnpuMemcpy(y.ctypes.data, p, x.nbytes, D2H)
    if not np.array_equal(x, y):
        errors.append(f"1 rank: {y}")
    if ccl.simcclCommDestroy(comm) != SUCCESS or shm_exists(uid):
        errors.append("1 rank: destroy")
    rt.simnpuFree(p)
    return {"errors": errors}


def local_args(rt, ccl):
    errors = []
    uid = new_id(ccl)
    comm = vp()
    assert ccl.simcclCommInitRank(ctypes.byref(comm), 1, uid, 0) == SUCCESS
    p = vp()
    rt.simnpuMalloc(ctypes.byref(p), 1024)
    host = (ctypes.c_char * 1024)()
    other = vp()
    cases = [
        (lambda: ccl.simcclAllReduce(p, p, 16, 12, MAX, comm, None), "max is not defined for complex64"),
        (lambda: ccl.simcclReduceScatter(p, p, 16, 13, MIN, comm, None), "min is not defined for complex128"),
        (lambda: ccl.simcclAllReduce(p, p, 16, 10, AVG, comm, None), "avg is not defined for bool"),
        (lambda: ccl.simcclAllReduce(p, p, 16, 14, SUM, comm, None), "unknown datatype 14"),
        (lambda: ccl.simcclAllReduce(p, p, 16, 7, 5, comm, None), "unknown reduce op 5"),
        (lambda: ccl.simcclAllReduce(ctypes.addressof(host), p, 16, 7, SUM, comm, None), "sendbuff is not simnpu device memory"),
        (lambda: ccl.simcclAllReduce(p, p, 1000, 7, SUM, comm, None), "not simnpu device memory of 4000 bytes"),
        (lambda: ccl.simcclBroadcast(p, p, 16, 7, 1, comm, None), "root 1 is not a rank of 1"),
        (lambda: ccl.simcclSend(p, 16, 7, -1, comm, None), "peer -1 is not a rank of 1"),
        (lambda: ccl.simcclAllReduce(p, p, 16, 7, SUM, None, None), "invalid communicator"),
        (lambda: ccl.simcclAllReduce(p, p, 16, 7, SUM, comm, ctypes.c_void_p(0x1234)), "invalid simnpu stream"),
    ]
    if rt.simnpuSetDevice(1) == 0:  # a stream and memory of another device
        s1 = vp()
        rt.simnpuStreamCreate(ctypes.byref(s1))
        rt.simnpuMalloc(ctypes.byref(other), 1024)
        rt.simnpuSetDevice(0)
        cases.append((lambda: ccl.simcclAllReduce(p, p, 16, 7, SUM, comm, s1), "stream is on device 1"))
        cases.append((lambda: ccl.simcclAllReduce(other, p, 16, 7, SUM, comm, None), "sendbuff is on device 1"))
    for call, text in cases:
        rc = call()
        msg = ccl.simcclGetLastError(None).decode()
        if rc != INVALID_ARGUMENT or text not in msg:
            errors.append(f"{text}: rc {rc}: {msg}")
    if ccl.simcclGroupEnd() != INVALID_USAGE:
        errors.append("GroupEnd without GroupStart")
    if ccl.simcclCommGetAsyncError(comm, ctypes.byref(ctypes.c_int())) != SUCCESS:
        errors.append("async error query")
    if ccl.simcclCommDestroy(comm) != SUCCESS or ccl.simcclCommDestroy(comm) != INVALID_ARGUMENT:
        errors.append("destroy twice")
    bad = UniqueId()
    if ccl.simcclCommInitRank(ctypes.byref(comm), 1, bad, 0) != INVALID_ARGUMENT:
        errors.append("bad unique id accepted")
    if ccl.simcclCommInitRank(ctypes.byref(comm), 2, uid, 2) != INVALID_ARGUMENT:
        errors.append("rank out of range accepted")
    if ccl.simcclGetErrorString(REMOTE) != b"remote process exited or there was a network error":
        errors.append("error string")
    return {"errors": errors}


def local_init(rt, ccl):
    uid = new_id(ccl)
    comm = vp()
    rc = ccl.simcclCommInitRank(ctypes.byref(comm), 1, uid, 0)
    return {"init_rc": rc, "msg": ccl.simcclGetLastError(None).decode(), "shm_left": shm_exists(uid), "errors": []}


LOCAL = {"local_threads": local_threads, "local_args": local_args, "local_init": local_init}


SCENARIOS = {
    "collectives": scenario_collectives, "p2p": scenario_p2p, "big": scenario_big, "async": scenario_async,
    "mismatch": scenario_mismatch, "count_mismatch": scenario_count_mismatch, "loop": scenario_loop,
    "abort": scenario_abort, "init_only": lambda r: {"errors": []},
}


def main():
    scenario, rank, nranks, id_hex = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if scenario in LOCAL:
        emit(**LOCAL[scenario](*load()))
        return
    r = Rank(rank, nranks, id_hex)
    if r.init_rc != 0:
        emit(init_rc=r.init_rc, msg=r.last_error(comm=False), errors=[])
        return
    emit(started=True, pid=os.getpid())
    res = SCENARIOS[scenario](r)
    if r.comm and not res.get("abort_rc") == 0:
        res["destroy_rc"] = r.ccl.simcclCommDestroy(r.comm)
    emit(**res)


if __name__ == "__main__":
    main()
