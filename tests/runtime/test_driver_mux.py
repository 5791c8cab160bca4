"""torch_fl's composite driver (csrc/src/driver_mux.cpp): two vendors' drivers, simnpu (2 devices)
and simvpu (1 device), behind one hook table, called through ctypes as the runtime calls it.
The harness (tests/data/driver_mux/harness.cpp) resolves each member's hooks by name."""
import ctypes
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "simnpu" / "build" / "lib"
RUNTIME = ROOT / "runtime_common" / "torch_fl" / "csrc"
HARNESS = ROOT / "tests" / "data" / "driver_mux" / "harness.cpp"
VERSION_CODE = 1000

vp, c_int, c_size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
P = ctypes.POINTER
HOOKS = [  # DriverApi's fields, in order (csrc/include/torch_fl/driver.h)
    ("driver_version", [P(c_int)]), ("error_string", [c_int]), ("device_count", [P(c_int)]),
    ("set_device", [c_int]), ("get_device", [P(c_int)]), ("device_synchronize", []),
    ("malloc", [P(vp), c_size]), ("free", [vp]), ("mem_get_info", [P(c_size), P(c_size)]),
    ("host_malloc", [P(vp), c_size]), ("host_free", [vp]), ("memcpy", [vp, vp, c_size, c_int]),
    ("memcpy_async", [vp, vp, c_size, c_int, vp]), ("memset_async", [vp, c_int, c_size, vp]),
    ("stream_create", [P(vp)]), ("stream_destroy", [vp]), ("stream_synchronize", [vp]), ("stream_query", [vp]),
    ("stream_wait_event", [vp, vp, ctypes.c_uint]), ("event_create", [P(vp)]), ("event_destroy", [vp]),
    ("event_record", [vp, vp]), ("event_query", [vp]), ("event_synchronize", [vp]),
    ("event_elapsed_time", [P(ctypes.c_float), vp, vp]),
]


class DriverApi(ctypes.Structure):
    _fields_ = [(name, ctypes.CFUNCTYPE(ctypes.c_char_p if name == "error_string" else c_int, *args))
                for name, args in HOOKS]


SUCCESS, NOT_READY, OUT_OF_MEMORY, MISUSE = 0, 1, 2, 6
H2H, H2D, D2H, D2D = range(4)


def _harness_library() -> Path:
    """The harness and driver_mux.cpp compiled once per source and torch (about 15 s)."""
    import torch
    from torch.utils import cpp_extension

    sources = [HARNESS, RUNTIME / "src" / "driver_mux.cpp"]
    key = hashlib.sha256(b"".join(p.read_bytes() for p in [*sources, RUNTIME / "include" / "torch_fl" / "driver.h",
                                                            RUNTIME / "include" / "torch_fl" / "driver_mux.h"])
                         + torch.__version__.encode()).hexdigest()[:16]
    target = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "torchfl-gen" / f"driver-mux-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    torch_lib = Path(torch.__file__).parent / "lib"
    major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    command = ["g++", f"-std=c++{20 if (major, minor) >= (2, 14) else 17}", "-O1", "-fPIC", "-shared",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", f"-I{RUNTIME / 'include'}",
               *(f"-isystem{p}" for p in cpp_extension.include_paths()), *map(str, sources),
               f"-L{torch_lib}", "-lc10", f"-Wl,-rpath,{torch_lib}", "-ldl", "-o", f"{target}.tmp"]
    subprocess.run(command, check=True)
    os.replace(f"{target}.tmp", target)
    return target


@pytest.fixture(scope="module")
def harness():
    if not (LIB / "libsimvpu_runtime.so").exists():
        subprocess.run(["bash", str(ROOT / "simnpu" / "build.sh")], check=True)
    return _harness_library()


def _run(harness, code: str, **env) -> str:
    """`code` in a fresh process (each configures the composite once), with `api` (the hook table),
    `npu`/`vpu` (the member libraries, for checking from the side) and helpers."""
    prelude = textwrap.dedent(f"""
        import ctypes, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_driver_mux import DriverApi, SUCCESS, NOT_READY, OUT_OF_MEMORY, MISUSE, H2H, H2D, D2H, D2D
        npu = ctypes.CDLL({str(LIB / 'libsimnpu_runtime.so')!r})
        vpu = ctypes.CDLL({str(LIB / 'libsimvpu_runtime.so')!r})
        h = ctypes.CDLL({str(harness)!r})
        h.harness_configure.restype = ctypes.POINTER(DriverApi)
        api = h.harness_configure({str(LIB / 'libsimnpu_runtime.so').encode()!r},
                                  {str(LIB / 'libsimvpu_runtime.so').encode()!r}, {VERSION_CODE}).contents
        def out(hook, *args, kind=ctypes.c_int):
            value = kind()
            status = hook(*args, ctypes.byref(value))
            assert status == SUCCESS, (status, api.error_string(status))
            return value.value
        def made(hook, *args):  # a hook whose handle comes back through its first argument
            value = ctypes.c_void_p()
            status = hook(ctypes.byref(value), *args)
            assert status == SUCCESS, (status, api.error_string(status))
            return value.value
        def ok(status):
            assert status == SUCCESS, (status, api.error_string(status))
        def malloc(device, size):
            ok(api.set_device(device))
            return made(api.malloc, size)
        def put(device, data):
            p = malloc(device, len(data))
            ok(api.memcpy(p, data, len(data), H2D))
            return p
        def get(p, size):
            buffer = ctypes.create_string_buffer(size)
            ok(api.memcpy(buffer, p, size, D2H))
            return buffer.raw
    """)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SIMNPU_", "SIMVPU_"))}
    environment.update(env)
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=120, env=environment)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_devices_are_the_members_devices_in_order(harness):
    assert _run(harness, """
        print(out(api.device_count), out(api.driver_version), [h.harness_member_of(d) for d in range(3)],
              [h.harness_local_index(d) for d in range(3)], h.harness_member_of(3))
        ok(api.set_device(2)); print(out(api.get_device))
        total = ctypes.c_size_t(); free = ctypes.c_size_t()
        ok(api.mem_get_info(ctypes.byref(free), ctypes.byref(total))); print(total.value >> 30)  # vpu: 2 GiB
        ok(api.set_device(1)); ok(api.mem_get_info(ctypes.byref(free), ctypes.byref(total))); print(total.value >> 30)
    """).splitlines() == ["3 1000 [0, 0, 1] [0, 1, 0] -1", "2", "2", "8"]


def test_memory_lives_on_the_device_s_own_chip_and_is_freed_there(harness):
    assert _run(harness, """
        p = put(2, b"vpu bytes"); q = put(1, b"npu bytes")
        device = ctypes.c_int()
        print(vpu.simvpuPointerGetDevice(ctypes.c_void_p(p), ctypes.byref(device)), device.value,
              npu.simnpuPointerGetDevice(ctypes.c_void_p(p), ctypes.byref(device)))
        print(npu.simnpuPointerGetDevice(ctypes.c_void_p(q), ctypes.byref(device)), device.value)
        print(get(p, 9), get(q, 9))
        ok(api.set_device(0)); ok(api.free(p)); ok(api.free(q))  # each freed by its owner, whatever is current
        print(vpu.simvpuPointerGetDevice(ctypes.c_void_p(p), ctypes.byref(device)))
    """).splitlines() == ["0 0 4", "0 1", "b'vpu bytes' b'npu bytes'", "4"]


def test_copies_between_members_go_through_the_host(harness):
    assert _run(harness, """
        src = put(0, b"from npu:0 to vpu:0"); dst = malloc(2, 19)
        ok(api.memcpy(dst, src, 19, D2D)); print(get(dst, 19))
        ok(api.set_device(2)); stream = made(api.stream_create)
        back = malloc(1, 19); ok(api.set_device(2))
        ok(api.memcpy_async(back, dst, 19, D2D, stream))  # on a vpu stream, into npu memory
        print(get(back, 19))
        same = malloc(0, 19); ok(api.memcpy(same, back, 19, D2D)); print(get(same, 19))  # within npu: its own D2D
    """).splitlines() == ["b'from npu:0 to vpu:0'"] * 3


def test_streams_and_events_belong_to_their_chip(harness):
    assert _run(harness, """
        ok(api.set_device(0)); s0 = made(api.stream_create)
        ok(api.set_device(2)); s2 = made(api.stream_create)
        device = ctypes.c_int()
        print(vpu.simvpuStreamGetDevice(ctypes.c_void_p(s2), ctypes.byref(device)),
              npu.simnpuStreamGetDevice(ctypes.c_void_p(s0), ctypes.byref(device)))
        e = made(api.event_create)
        print(api.event_query(e))  # never recorded: complete
        ok(api.event_record(e, s0)); ok(api.event_synchronize(e)); ok(api.stream_wait_event(s2, e, 0))
        f = made(api.event_create)
        ok(api.event_record(f, s2)); ok(api.event_synchronize(f))
        ms = ctypes.c_float()
        status = api.event_elapsed_time(ctypes.byref(ms), e, f)
        print(status == MISUSE, api.error_string(status).decode())
        ok(api.event_record(e, s2)); ok(api.event_record(f, s2)); ok(api.event_synchronize(f))  # e again, on vpu
        ok(api.event_elapsed_time(ctypes.byref(ms), e, f)); print(ms.value >= 0)  # both on vpu now
        ok(api.stream_synchronize(s0)); ok(api.stream_query(s2))
        for event in (e, f): ok(api.event_destroy(event))
        ok(api.stream_destroy(s0)); ok(api.stream_destroy(s2))
    """).splitlines() == [
        "0 0", "0",
        "True elapsed time between events of two chips (npu and vpu) is not measured: each chip has its own clock",
        "True"]


def test_statuses_are_the_composite_s_and_name_the_member(harness):
    lines = _run(harness, """
        status = api.set_device(3); print(status == MISUSE, api.error_string(status).decode())
        ok(api.set_device(2)); p = ctypes.c_void_p()
        status = api.malloc(ctypes.byref(p), 1 << 40)  # more than vpu's 2 GiB
        print(status == OUT_OF_MEMORY, api.error_string(status).decode())
        status = api.free(ctypes.c_void_p(12345))  # not an allocation: the current chip's own status
        print(status >= 16, api.error_string(status).decode())
    """).splitlines()
    assert lines[0] == "True invalid device index 3 (the composite has 3 devices)"
    assert lines[1].startswith("True vpu status 2: ")
    assert lines[2].startswith("True vpu status 4: ")


def test_pinned_host_memory_returns_to_its_chip(harness):
    assert _run(harness, """
        ok(api.set_device(2)); p = made(api.host_malloc, 64)
        pinned = ctypes.c_int(); vpu.simvpuHostPointerIsPinned(ctypes.c_void_p(p), ctypes.byref(pinned)); print(pinned.value)
        ok(api.set_device(0)); ok(api.host_free(p))
        vpu.simvpuHostPointerIsPinned(ctypes.c_void_p(p), ctypes.byref(pinned)); print(pinned.value)
    """).splitlines() == ["1", "0"]
