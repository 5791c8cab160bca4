"""all_reduce bus bandwidth: libsimnpu_ccl vs torch.distributed gloo, 2 processes on this host.

    python3 simnpu/bench_ccl.py [--nranks 2] [--max-mib 64] [--no-gloo]

Bus bandwidth = bytes * 2 * (n - 1) / n / time (as nccl-tests). Columns:
  simccl        all_reduce float32 on simnpu device buffers, queued back to back on a stream
  gloo          torch.distributed gloo all_reduce of CPU tensors (TCP on localhost)
  gloo staging  what a chip without a library does: device->host copy, gloo, host->device copy
The simccl ranks never import torch (its backend autoload could bind another checkout's
libsimnpu_runtime.so); the gloo ranks are separate processes.
"""
import argparse
import ctypes
import multiprocessing as mp
import os
import socket
import sys
import time
from pathlib import Path

LIBDIR = Path(__file__).resolve().parent / "build" / "lib"


def sizes(max_mib):
    s, out = 1024, []
    while s <= max_mib * 1024 * 1024:
        out.append(s)
        s *= 4
    return out


def iters_for(nbytes):
    return max(4, min(200, (256 << 20) // nbytes))


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def simccl_rank(rank, nranks, uid_bytes, max_mib, q):
    vp = ctypes.c_void_p
    rt = ctypes.CDLL(str(LIBDIR / "libsimnpu_runtime.so"))
    ccl = ctypes.CDLL(str(LIBDIR / "libsimnpu_ccl.so"))
    uid = UniqueId()
    ctypes.memmove(ctypes.addressof(uid), uid_bytes, 128)
    ccl.simcclCommInitRank.argtypes = [ctypes.POINTER(vp), ctypes.c_int, UniqueId, ctypes.c_int]
    ccl.simcclAllReduce.argtypes = [vp, vp, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, vp, vp]
    rt.simnpuMalloc.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t]
    rt.simnpuMemset.argtypes = [vp, ctypes.c_int, ctypes.c_size_t]
    rt.simnpuStreamCreate.argtypes = [ctypes.POINTER(vp)]
    rt.simnpuStreamSynchronize.argtypes = [vp]
    comm, stream = vp(), vp()
    assert ccl.simcclCommInitRank(ctypes.byref(comm), nranks, uid, rank) == 0
    assert rt.simnpuStreamCreate(ctypes.byref(stream)) == 0
    top = max(sizes(max_mib))
    send, recv = vp(), vp()
    assert rt.simnpuMalloc(ctypes.byref(send), top) == 0 and rt.simnpuMalloc(ctypes.byref(recv), top) == 0
    rt.simnpuMemset(send, 0, top)
    rt.simnpuMemset(recv, 0, top)
    out = {}
    for nbytes in sizes(max_mib):
        count, n = nbytes // 4, iters_for(nbytes)
        for _ in range(2):
            ccl.simcclAllReduce(send, recv, count, 7, 0, comm, stream)
        assert rt.simnpuStreamSynchronize(stream) == 0
        t0 = time.perf_counter()
        for _ in range(n):
            ccl.simcclAllReduce(send, recv, count, 7, 0, comm, stream)
        assert rt.simnpuStreamSynchronize(stream) == 0
        out[nbytes] = (time.perf_counter() - t0) / n
    ccl.simcclCommDestroy(comm)
    q.put((rank, out))


def gloo_rank(rank, nranks, port, max_mib, staging, q):
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nranks)
    out = {}
    top = max(sizes(max_mib))
    dev = torch.zeros(top // 4)  # stands for device memory when staging
    for nbytes in sizes(max_mib):
        count, n = nbytes // 4, iters_for(nbytes)
        n = max(3, n // 4)  # gloo is slower: fewer rounds keep the run short
        t = torch.zeros(count)
        src = dev[:count]

        def once():
            if staging:
                t.copy_(src)          # device -> host
                dist.all_reduce(t)
                src.copy_(t)          # host -> device
            else:
                dist.all_reduce(t)

        once()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            once()
        out[nbytes] = (time.perf_counter() - t0) / n
    dist.destroy_process_group()
    q.put((rank, out))


def run(target, nranks, args):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=target, args=(r, nranks, *args, q)) for r in range(nranks)]
    for p in procs:
        p.start()
    res = dict(q.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
    # a collective is as slow as its slowest rank
    return {s: max(res[r][s] for r in res) for s in res[0]}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def human(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--no-gloo", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, str(LIBDIR))
    ccl = ctypes.CDLL(str(LIBDIR / "libsimnpu_ccl.so"))
    uid = UniqueId()
    assert ccl.simcclGetUniqueId(ctypes.byref(uid)) == 0
    uid_bytes = ctypes.string_at(ctypes.addressof(uid), 128)
    n = a.nranks
    bus = lambda nbytes, t: nbytes * 2 * (n - 1) / n / t / 1e9  # noqa: E731
    sim = run(simccl_rank, n, (uid_bytes, a.max_mib))
    gloo = stage = None
    if not a.no_gloo:
        gloo = run(gloo_rank, n, (free_port(), a.max_mib, False))
        stage = run(gloo_rank, n, (free_port(), a.max_mib, True))
    print(f"all_reduce float32, {n} processes, bus bandwidth GB/s (time per op)")
    print(f"{'size':>8} | {'simccl':>20} | {'gloo':>20} | {'gloo staging':>20} | simccl/staging")
    for s in sizes(a.max_mib):
        row = f"{human(s):>8} | {bus(s, sim[s]):8.2f} ({sim[s] * 1e6:8.1f} us)"
        if gloo:
            row += f" | {bus(s, gloo[s]):8.2f} ({gloo[s] * 1e6:8.1f} us)"
            row += f" | {bus(s, stage[s]):8.2f} ({stage[s] * 1e6:8.1f} us) | {stage[s] / sim[s]:6.1f}x"
        print(row)


if __name__ == "__main__":
    main()
