"""Tests of the simulated NPU driver runtime (libsimnpu_runtime.so) through ctypes."""
import ctypes
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "simnpu" / "build" / "lib" / "libsimnpu_runtime.so"

SUCCESS, INVALID_VALUE, OOM, INVALID_DEVICE, INVALID_DEVPTR, INVALID_HANDLE, NOT_READY, LAUNCH_FAILURE = range(8)
H2H, H2D, D2H, D2D = range(4)

HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _ensure_built():
    if not LIB.exists():
        env = dict(os.environ, SIMNPU_BUILD_KERNELS=os.environ.get("SIMNPU_BUILD_KERNELS", "OFF"))
        subprocess.run(["bash", str(ROOT / "simnpu" / "build.sh")], check=True, env=env)
    assert LIB.exists()


def _load(path=LIB):
    lib = ctypes.CDLL(str(path))
    vp = ctypes.c_void_p
    sigs = {
        "simnpuDriverGetVersion": [ctypes.POINTER(ctypes.c_int)],
        "simnpuGetErrorString": [ctypes.c_int],
        "simnpuGetErrorName": [ctypes.c_int],
        "simnpuGetLastErrorMessage": [],
        "simnpuGetDeviceCount": [ctypes.POINTER(ctypes.c_int)],
        "simnpuSetDevice": [ctypes.c_int],
        "simnpuGetDevice": [ctypes.POINTER(ctypes.c_int)],
        "simnpuDeviceSynchronize": [],
        "simnpuMalloc": [ctypes.POINTER(vp), ctypes.c_size_t],
        "simnpuFree": [vp],
        "simnpuMemGetInfo": [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)],
        "simnpuPointerGetDevice": [vp, ctypes.POINTER(ctypes.c_int)],
        "simnpuMallocHost": [ctypes.POINTER(vp), ctypes.c_size_t],
        "simnpuFreeHost": [vp],
        "simnpuHostPointerIsPinned": [vp, ctypes.POINTER(ctypes.c_int)],
        "simnpuMemcpy": [vp, vp, ctypes.c_size_t, ctypes.c_int],
        "simnpuMemcpyAsync": [vp, vp, ctypes.c_size_t, ctypes.c_int, vp],
        "simnpuMemset": [vp, ctypes.c_int, ctypes.c_size_t],
        "simnpuMemsetAsync": [vp, ctypes.c_int, ctypes.c_size_t, vp],
        "simnpuStreamCreate": [ctypes.POINTER(vp)],
        "simnpuStreamDestroy": [vp],
        "simnpuStreamSynchronize": [vp],
        "simnpuStreamQuery": [vp],
        "simnpuStreamWaitEvent": [vp, vp, ctypes.c_uint],
        "simnpuStreamGetDevice": [vp, ctypes.POINTER(ctypes.c_int)],
        "simnpuStreamSetError": [vp, ctypes.c_int, ctypes.c_char_p],
        "simnpuLaunchHostFunc": [vp, HOSTFN, vp],
        "simnpuEventCreate": [ctypes.POINTER(vp)],
        "simnpuEventCreateWithFlags": [ctypes.POINTER(vp), ctypes.c_uint],
        "simnpuEventDestroy": [vp],
        "simnpuEventRecord": [vp, vp],
        "simnpuEventQuery": [vp],
        "simnpuEventSynchronize": [vp],
        "simnpuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), vp, vp],
        "simnpuDeviceGetUtilization": [ctypes.c_int, ctypes.POINTER(ctypes.c_int)],
    }
    for name, args in sigs.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = ctypes.c_char_p if name in (
            "simnpuGetErrorString", "simnpuGetErrorName", "simnpuGetLastErrorMessage") else ctypes.c_int
    return lib


@pytest.fixture(scope="session")
def rt():
    _ensure_built()
    return _load()


def _run_py(code, **env):
    """Run code in a fresh interpreter (env vars are read once per process)."""
    e = dict(os.environ)
    e.update({k: str(v) for k, v in env.items()})
    pre = f"import ctypes, sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n" \
          f"from test_simnpu_runtime import _load\nrt = _load()\n"
    r = subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)], env=e,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def malloc(rt, n):
    p = ctypes.c_void_p()
    assert rt.simnpuMalloc(ctypes.byref(p), n) == SUCCESS
    return p.value


def stream(rt):
    s = ctypes.c_void_p()
    assert rt.simnpuStreamCreate(ctypes.byref(s)) == SUCCESS
    return s.value


def event(rt, flags=0):
    e = ctypes.c_void_p()
    assert rt.simnpuEventCreateWithFlags(ctypes.byref(e), flags) == SUCCESS
    return e.value


class Gate:
    """A host function that blocks its stream until released."""

    def __init__(self):
        self.ev = threading.Event()
        self.started = threading.Event()
        self.fn = HOSTFN(self._run)

    def _run(self, _):
        self.started.set()
        self.ev.wait(10)

    def release(self):
        self.ev.set()


# --------------------------------------------------------------------------- version / errors

def test_version_default(rt):
    v = ctypes.c_int()
    assert rt.simnpuDriverGetVersion(ctypes.byref(v)) == SUCCESS
    assert v.value == 2010


def test_version_override_env():
    out = _run_py("""
        v = ctypes.c_int(); rt.simnpuDriverGetVersion(ctypes.byref(v)); print(v.value)
    """, SIMNPU_DRIVER_VERSION_OVERRIDE="2.0")
    assert out == "2000"
    out = _run_py("""
        v = ctypes.c_int(); rt.simnpuDriverGetVersion(ctypes.byref(v)); print(v.value)
    """, SIMNPU_DRIVER_VERSION_OVERRIDE="3.12")
    assert out == "3120"


def test_error_strings(rt):
    names = set()
    for code in range(11):
        s = rt.simnpuGetErrorString(code).decode()
        n = rt.simnpuGetErrorName(code).decode()
        assert s and n.startswith("simnpu")
        names.add(n)
    assert len(names) == 11
    assert rt.simnpuGetErrorName(OOM) == b"simnpuErrorMemoryAllocation"
    assert rt.simnpuGetErrorName(0) == b"simnpuSuccess"
    assert b"memory" in rt.simnpuGetErrorString(OOM)
    assert rt.simnpuGetErrorName(12345) == b"simnpuErrorUnknown"


# --------------------------------------------------------------------------- devices

def test_device_count_default_and_set_device(rt):
    n = ctypes.c_int()
    assert rt.simnpuGetDeviceCount(ctypes.byref(n)) == SUCCESS
    expected = int(os.environ.get("SIMNPU_DEVICE_COUNT", "2"))
    assert n.value == expected
    d = ctypes.c_int(-1)
    assert rt.simnpuGetDevice(ctypes.byref(d)) == SUCCESS and d.value == 0
    assert rt.simnpuSetDevice(n.value) == INVALID_DEVICE
    assert rt.simnpuSetDevice(-1) == INVALID_DEVICE


def test_device_count_env_and_per_thread_device():
    out = _run_py("""
        import threading
        n = ctypes.c_int(); rt.simnpuGetDeviceCount(ctypes.byref(n))
        assert rt.simnpuSetDevice(3) == 0
        seen = []
        def other():
            d = ctypes.c_int(); rt.simnpuGetDevice(ctypes.byref(d)); seen.append(d.value)
        t = threading.Thread(target=other); t.start(); t.join()
        d = ctypes.c_int(); rt.simnpuGetDevice(ctypes.byref(d))
        print(n.value, d.value, seen[0], rt.simnpuSetDevice(4))
    """, SIMNPU_DEVICE_COUNT=4)
    assert out == "4 3 0 3"


# --------------------------------------------------------------------------- memory

def test_capacity_oom_and_reuse():
    out = _run_py("""
        vp = ctypes.c_void_p
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        rt.simnpuMemGetInfo(ctypes.byref(f), ctypes.byref(t))
        assert t.value == 1 << 20 and f.value == t.value, (f.value, t.value)
        a = vp(); assert rt.simnpuMalloc(ctypes.byref(a), 700 * 1024) == 0
        assert a.value % 256 == 0
        rt.simnpuMemGetInfo(ctypes.byref(f), ctypes.byref(t))
        assert f.value == (1 << 20) - 700 * 1024
        b = vp(); rc = rt.simnpuMalloc(ctypes.byref(b), 400 * 1024)
        assert rc == 2, rc
        assert b"cannot allocate" in rt.simnpuGetLastErrorMessage()
        # device 1 has its own memory
        rt.simnpuSetDevice(1)
        c = vp(); assert rt.simnpuMalloc(ctypes.byref(c), 700 * 1024) == 0
        rt.simnpuSetDevice(0)
        assert rt.simnpuFree(a) == 0
        assert rt.simnpuMalloc(ctypes.byref(b), 400 * 1024) == 0
        rt.simnpuMemset(b, 7, 400 * 1024)
        h = ctypes.create_string_buffer(400 * 1024)
        assert rt.simnpuMemcpy(h, b, 400 * 1024, 2) == 0
        assert h.raw == bytes([7]) * (400 * 1024)
        assert rt.simnpuMalloc(ctypes.byref(a), 1 << 30) == 2
        print("ok")
    """, SIMNPU_MEMORY_CAPACITY="1M")
    assert out == "ok"


def test_pointer_registry(rt):
    p = malloc(rt, 1000)
    d = ctypes.c_int(-1)
    assert rt.simnpuPointerGetDevice(p, ctypes.byref(d)) == SUCCESS and d.value == 0
    assert rt.simnpuPointerGetDevice(p + 999, ctypes.byref(d)) == SUCCESS  # inside the allocation
    host = ctypes.create_string_buffer(16)
    assert rt.simnpuPointerGetDevice(ctypes.addressof(host), ctypes.byref(d)) == INVALID_DEVPTR
    assert rt.simnpuFree(ctypes.addressof(host)) == INVALID_DEVPTR
    assert rt.simnpuFree(p + 256) == INVALID_DEVPTR  # not the base
    assert rt.simnpuFree(p) == SUCCESS
    assert rt.simnpuFree(p) == INVALID_DEVPTR  # double free
    assert rt.simnpuFree(None) == SUCCESS


def test_pinned_host_memory(rt):
    p = ctypes.c_void_p()
    assert rt.simnpuMallocHost(ctypes.byref(p), 4096) == SUCCESS
    pinned = ctypes.c_int()
    assert rt.simnpuHostPointerIsPinned(p.value + 100, ctypes.byref(pinned)) == SUCCESS and pinned.value == 1
    host = ctypes.create_string_buffer(16)
    rt.simnpuHostPointerIsPinned(ctypes.addressof(host), ctypes.byref(pinned))
    assert pinned.value == 0
    # pinned memory is a valid host side of copies
    d = malloc(rt, 4096)
    ctypes.memset(p.value, 0x5A, 4096)
    assert rt.simnpuMemcpy(d, p.value, 4096, H2D) == SUCCESS
    back = ctypes.create_string_buffer(4096)
    assert rt.simnpuMemcpy(back, d, 4096, D2H) == SUCCESS
    assert back.raw == b"\x5a" * 4096
    assert rt.simnpuFreeHost(p) == SUCCESS
    rt.simnpuHostPointerIsPinned(p, ctypes.byref(pinned))
    assert pinned.value == 0
    assert rt.simnpuFreeHost(ctypes.addressof(host)) == INVALID_VALUE
    rt.simnpuFree(d)


# --------------------------------------------------------------------------- copies

def test_memcpy_roundtrip_all_directions(rt):
    n = 10000
    src = ctypes.create_string_buffer(os.urandom(n), n)
    a = malloc(rt, n)
    assert rt.simnpuMemcpy(a, src, n, H2D) == SUCCESS
    rt.simnpuSetDevice(1)
    b = malloc(rt, n)  # on device 1: D2D is a peer copy
    rt.simnpuSetDevice(0)
    d = ctypes.c_int()
    rt.simnpuPointerGetDevice(b, ctypes.byref(d))
    assert d.value == 1
    assert rt.simnpuMemcpy(b, a, n, D2D) == SUCCESS
    out = ctypes.create_string_buffer(n)
    assert rt.simnpuMemcpy(out, b, n, D2H) == SUCCESS
    assert out.raw == src.raw
    h2 = ctypes.create_string_buffer(n)
    assert rt.simnpuMemcpy(h2, src, n, H2H) == SUCCESS and h2.raw == src.raw
    # offsets inside allocations
    assert rt.simnpuMemcpy(ctypes.addressof(out), a + 100, 50, D2H) == SUCCESS
    assert out.raw[:50] == src.raw[100:150]
    rt.simnpuFree(a)
    rt.simnpuFree(b)


def test_memcpy_kind_validation(rt):
    n = 64
    host = ctypes.create_string_buffer(n)
    dev = malloc(rt, n)
    h = ctypes.addressof(host)
    assert rt.simnpuMemcpy(h, h, n, H2D) == INVALID_DEVPTR     # dst not device
    assert rt.simnpuMemcpy(h, h, n, D2H) == INVALID_DEVPTR     # src not device
    assert rt.simnpuMemcpy(dev, h, n, D2D) == INVALID_DEVPTR   # src not device
    assert rt.simnpuMemcpy(h, dev, n, H2D) == INVALID_DEVPTR   # dst is host
    assert rt.simnpuMemcpy(dev, h, n, 7) == INVALID_VALUE
    assert rt.simnpuMemcpy(dev, h, n + 1, H2D) == INVALID_VALUE  # overruns the allocation
    assert rt.simnpuMemset(h, 0, n) == INVALID_DEVPTR
    assert rt.simnpuMemcpyAsync(h, h, n, H2D, None) == INVALID_DEVPTR
    assert rt.simnpuGetLastErrorMessage()  # has detail text
    rt.simnpuFree(dev)


# --------------------------------------------------------------------------- streams

def test_stream_order(rt):
    n = 4096
    s = stream(rt)
    bufs = [malloc(rt, n) for _ in range(3)]
    host = ctypes.create_string_buffer(n)
    gate = Gate()
    # block the stream so everything below is really queued
    assert rt.simnpuLaunchHostFunc(s, gate.fn, None) == SUCCESS
    for i in range(50):
        assert rt.simnpuMemsetAsync(bufs[0], i, n, s) == SUCCESS
        assert rt.simnpuMemcpyAsync(bufs[1], bufs[0], n, D2D, s) == SUCCESS
        assert rt.simnpuMemcpyAsync(bufs[2] + i, bufs[1], n - 64, D2D, s) == SUCCESS
    assert rt.simnpuMemcpyAsync(ctypes.addressof(host), bufs[2], n, D2H, s) == SUCCESS
    assert rt.simnpuStreamQuery(s) == NOT_READY
    assert host.raw == b"\0" * n  # nothing ran yet
    gate.release()
    assert rt.simnpuStreamSynchronize(s) == SUCCESS
    assert rt.simnpuStreamQuery(s) == SUCCESS
    raw = host.raw
    # bufs[2][i] was last written by iteration i (value i) for i < 50; then 49 to n-64+49
    assert list(raw[:50]) == list(range(50))
    assert raw[50:n - 64 + 49] == bytes([49]) * (n - 64 + 49 - 50)
    d = ctypes.c_int(-1)
    assert rt.simnpuStreamGetDevice(s, ctypes.byref(d)) == SUCCESS and d.value == 0
    assert rt.simnpuStreamDestroy(s) == SUCCESS
    for b in bufs:
        rt.simnpuFree(b)


def test_default_stream_per_device_and_destroy_drains(rt):
    rt.simnpuSetDevice(1)
    d = ctypes.c_int(-1)
    assert rt.simnpuStreamGetDevice(None, ctypes.byref(d)) == SUCCESS and d.value == 1
    rt.simnpuSetDevice(0)
    assert rt.simnpuStreamGetDevice(None, ctypes.byref(d)) == SUCCESS and d.value == 0

    s = stream(rt)
    done = []
    fn = HOSTFN(lambda _: (time.sleep(0.05), done.append(1)))
    rt.simnpuLaunchHostFunc(s, fn, None)
    assert rt.simnpuStreamDestroy(s) == SUCCESS
    assert done == [1]
    assert rt.simnpuStreamQuery(s) == INVALID_HANDLE


def test_free_synchronizes_owning_device(rt):
    n = 1 << 16
    buf = malloc(rt, n)
    s = stream(rt)
    seen = []
    fn = HOSTFN(lambda _: (time.sleep(0.05), seen.append(1)))
    rt.simnpuLaunchHostFunc(s, fn, None)
    rt.simnpuMemsetAsync(buf, 1, n, s)
    assert rt.simnpuFree(buf) == SUCCESS
    assert seen == [1] and rt.simnpuStreamQuery(s) == SUCCESS
    rt.simnpuStreamDestroy(s)


def test_sticky_error_from_host_func(rt):
    s = stream(rt)
    stream_holder = {"s": s}

    def failing(_):
        rt.simnpuStreamSetError(stream_holder["s"], LAUNCH_FAILURE, b"kernel add: boom")

    def failing_null(_):
        rt.simnpuStreamSetError(None, LAUNCH_FAILURE, b"second")  # NULL = the executing stream

    f1, f2 = HOSTFN(failing), HOSTFN(failing_null)
    ran_after = []
    after = HOSTFN(lambda _: ran_after.append(1))
    rt.simnpuLaunchHostFunc(s, f1, None)
    rt.simnpuLaunchHostFunc(s, f2, None)
    rt.simnpuLaunchHostFunc(s, after, None)
    assert rt.simnpuStreamSynchronize(s) == LAUNCH_FAILURE
    assert rt.simnpuGetLastErrorMessage() == b"kernel add: boom"  # the first error sticks
    assert ran_after == [1]
    assert rt.simnpuStreamSynchronize(s) == SUCCESS  # cleared
    # device synchronize reports it too
    rt.simnpuLaunchHostFunc(s, f2, None)
    assert rt.simnpuDeviceSynchronize() == LAUNCH_FAILURE
    assert rt.simnpuGetLastErrorMessage() == b"second"
    assert rt.simnpuDeviceSynchronize() == SUCCESS
    rt.simnpuStreamDestroy(s)


# --------------------------------------------------------------------------- events

def test_event_never_recorded_and_timing(rt):
    e0 = event(rt)
    assert rt.simnpuEventQuery(e0) == SUCCESS
    assert rt.simnpuEventSynchronize(e0) == SUCCESS
    ms = ctypes.c_float()
    e1 = event(rt)
    assert rt.simnpuEventElapsedTime(ctypes.byref(ms), e0, e1) == INVALID_HANDLE  # never recorded

    s = stream(rt)
    gate = Gate()
    sleep = HOSTFN(lambda _: time.sleep(0.03))
    assert rt.simnpuEventRecord(e0, s) == SUCCESS
    rt.simnpuLaunchHostFunc(s, sleep, None)
    rt.simnpuLaunchHostFunc(s, gate.fn, None)
    assert rt.simnpuEventRecord(e1, s) == SUCCESS
    gate.started.wait(5)
    assert rt.simnpuEventQuery(e0) == SUCCESS
    assert rt.simnpuEventQuery(e1) == NOT_READY
    assert rt.simnpuEventElapsedTime(ctypes.byref(ms), e0, e1) == NOT_READY
    gate.release()
    assert rt.simnpuEventSynchronize(e1) == SUCCESS
    assert rt.simnpuEventQuery(e1) == SUCCESS
    assert rt.simnpuEventElapsedTime(ctypes.byref(ms), e0, e1) == SUCCESS
    assert ms.value >= 25.0
    assert rt.simnpuEventElapsedTime(ctypes.byref(ms), e1, e0) == SUCCESS and ms.value < 0

    nt = event(rt, 2)  # DisableTiming
    rt.simnpuEventRecord(nt, s)
    assert rt.simnpuEventSynchronize(nt) == SUCCESS
    assert rt.simnpuEventElapsedTime(ctypes.byref(ms), e0, nt) == INVALID_HANDLE
    for e in (e0, e1, nt):
        assert rt.simnpuEventDestroy(e) == SUCCESS
    assert rt.simnpuEventQuery(e0) == INVALID_HANDLE
    rt.simnpuStreamDestroy(s)


def test_stream_wait_event_cross_stream_and_device(rt):
    n = 1024
    s1 = stream(rt)
    rt.simnpuSetDevice(1)
    s2 = stream(rt)  # on another device
    rt.simnpuSetDevice(0)
    a = malloc(rt, n)
    b = malloc(rt, n)
    host = ctypes.create_string_buffer(n)
    gate = Gate()
    ev = event(rt)
    rt.simnpuLaunchHostFunc(s1, gate.fn, None)
    rt.simnpuMemsetAsync(a, 0x42, n, s1)
    rt.simnpuEventRecord(ev, s1)
    assert rt.simnpuStreamWaitEvent(s2, ev, 0) == SUCCESS
    rt.simnpuMemcpyAsync(b, a, n, D2D, s2)
    rt.simnpuMemcpyAsync(ctypes.addressof(host), b, n, D2H, s2)
    time.sleep(0.05)
    assert rt.simnpuStreamQuery(s2) == NOT_READY  # held back by the event
    assert host.raw == b"\0" * n
    gate.release()
    assert rt.simnpuStreamSynchronize(s2) == SUCCESS
    assert host.raw == b"\x42" * n
    # waiting on a completed or never-recorded event does not block
    ev2 = event(rt)
    assert rt.simnpuStreamWaitEvent(s2, ev2, 0) == SUCCESS
    assert rt.simnpuStreamWaitEvent(s2, ev, 0) == SUCCESS
    assert rt.simnpuStreamSynchronize(s2) == SUCCESS
    assert rt.simnpuStreamWaitEvent(s2, ev, 1) == INVALID_VALUE  # flags are CUDA's: only 0
    for s in (s1, s2):
        rt.simnpuStreamDestroy(s)
    rt.simnpuEventDestroy(ev)
    rt.simnpuEventDestroy(ev2)
    rt.simnpuFree(a)
    rt.simnpuFree(b)


def test_utilization(rt):
    rt.simnpuSetDevice(1)
    s = stream(rt)
    rt.simnpuSetDevice(0)
    time.sleep(1.05)  # let earlier tests' work age out of the window
    p = ctypes.c_int(-1)
    assert rt.simnpuDeviceGetUtilization(1, ctypes.byref(p)) == SUCCESS
    idle = p.value
    assert 0 <= idle <= 10
    busy = HOSTFN(lambda _: time.sleep(0.4))
    rt.simnpuLaunchHostFunc(s, busy, None)
    rt.simnpuStreamSynchronize(s)
    assert rt.simnpuDeviceGetUtilization(1, ctypes.byref(p)) == SUCCESS
    assert 25 <= p.value <= 75, p.value
    assert rt.simnpuDeviceGetUtilization(9, ctypes.byref(p)) == INVALID_DEVICE
    rt.simnpuStreamDestroy(s)


def test_threads_concurrent_alloc_and_copies(rt):
    errors = []

    def worker(dev):
        try:
            rt.simnpuSetDevice(dev)
            s = stream(rt)
            for i in range(30):
                p = malloc(rt, 512)
                src = bytes([i]) * 512
                assert rt.simnpuMemcpyAsync(p, src, 512, H2D, s) == SUCCESS
                out = ctypes.create_string_buffer(512)
                assert rt.simnpuMemcpyAsync(out, p, 512, D2H, s) == SUCCESS
                assert rt.simnpuStreamSynchronize(s) == SUCCESS
                assert out.raw == src
                assert rt.simnpuFree(p) == SUCCESS
            rt.simnpuStreamDestroy(s)
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i % 2,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_clean_exit_with_pending_work():
    # worker threads must not block or crash process exit
    out = _run_py("""
        s = ctypes.c_void_p(); rt.simnpuStreamCreate(ctypes.byref(s))
        p = ctypes.c_void_p(); rt.simnpuMalloc(ctypes.byref(p), 1 << 20)
        for _ in range(100):
            rt.simnpuMemsetAsync(p, 1, 1 << 20, s)
        print("bye")
    """)
    assert out == "bye"
