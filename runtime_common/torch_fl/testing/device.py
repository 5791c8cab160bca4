"""Device semantics of a generated chip: memory, copies, streams, events, RNG.

Written once for every chip: a chip suite's tests/test_device.py imports these tests (after its
conftest.py configured torch_fl.testing.suite). What differs between chips comes from its spec
module: the dtypes it takes and refuses (DTYPES, REFUSED_DTYPES), amp (AMP_DTYPES and the op
lists), the collective backend (DIST_BACKEND), and the routing table (which op falls back). Tests
that apply to some chips only are defined only for them. A chip without float32 computes in its
first floating dtype, torch's default dtype there (suite.pytest_configure).
"""
import pytest
import torch

from torch_fl import coexistence, routes
from torch_fl.testing import suite
from torch_fl.testing.common import second_device

_suite = suite.chip()  # configured by the chip's conftest.py, imported before any test module
SPEC = _suite.spec
CHIP = SPEC.CHIP
DTYPES = [getattr(torch, d) for d in SPEC.DTYPES]
FLOAT = getattr(torch, _suite.float_dtype)
BYTE = getattr(torch, _suite.byte_dtype)
CONVERT = getattr(torch, _suite.convert_dtype) if _suite.convert_dtype else None
device_module = getattr(torch, CHIP)

# Ops the suite uses to watch an op take the fallback chain past Triton: the first that neither a
# vendor kernel nor the Triton library serves (the routing table's path). (aten op reached, call)
FALLBACK_PROBES = (
    ("cumsum.out", lambda x: torch.cumsum(x, 0)),
    ("histc", lambda x: torch.histc(x, bins=4)),
    ("bucketize.Tensor", lambda x: torch.bucketize(x, x)),
    ("searchsorted.Tensor", lambda x: torch.searchsorted(x, x)),
)
FALLBACK_PROBE = next((probe for probe in FALLBACK_PROBES
                       if routes.route(SPEC, probe[0]).path not in ("vendor", "triton")), None)


def make(dtype, shape=(5, 7)):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, dtype=dtype)


if SPEC.REFUSED_DTYPES:
    @pytest.mark.parametrize("dtype", [getattr(torch, d) for d in SPEC.REFUSED_DTYPES], ids=str)
    def test_dtype_outside_the_spec_is_refused(dtype):
        with pytest.raises(NotImplementedError, match=rf"chip '{CHIP}' does not support dtype .* \(spec "):
            torch.zeros(3, dtype=dtype, device=CHIP)


if "float16" in SPEC.DTYPES:
    def test_an_operator_result_outside_the_spec_names_the_dtype():
        # half * 1j is ComplexHalf, which no spec lists: Python's `*` must show the chip's message,
        # not "unsupported operand type(s)" (what a TypeError would become)
        with pytest.raises(NotImplementedError, match=rf"chip '{CHIP}' does not support dtype torch.ComplexHalf"):
            torch.ones(3, dtype=torch.float16, device=CHIP) * 1j


def test_device_type_and_count():
    assert device_module.device_count() >= 1
    x = torch.ones(3, device=CHIP)
    assert x.device.type == CHIP
    assert x.device.index == device_module.current_device()
    assert getattr(x, f"is_{CHIP}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_exact(dtype):
    x = make(dtype)
    assert torch.equal(x.to(CHIP).cpu(), x)
    # Non-contiguous both ways: a transposed source, and a strided destination.
    t = x.t()
    assert torch.equal(t.to(CHIP).cpu(), t)
    on_chip = x.to(CHIP)
    assert torch.equal(on_chip.t().cpu(), t)
    assert torch.equal(on_chip[:, ::2].cpu(), x[:, ::2])
    target = torch.zeros(5, 14, dtype=dtype, device=CHIP)
    target[:, ::2] = on_chip
    expected = torch.zeros(5, 14, dtype=dtype)
    expected[:, ::2] = x
    assert torch.equal(target.cpu(), expected)


def test_copy_between_devices():
    # A machine with one device says so explicitly; anywhere else the missing
    # second device is a failure, never a silent skip.
    other = second_device()
    x = torch.randn(64, 33)
    a = x.to(f"{CHIP}:0")
    b = a.to(f"{CHIP}:{other}")
    assert b.device == torch.device(CHIP, other)
    assert torch.equal(b.cpu(), x)
    if CONVERT is not None:  # the chip has a second dtype: the copy converts too
        c = b.t().to(f"{CHIP}:0", dtype=CONVERT)
        assert torch.equal(c.cpu(), x.t().to(CONVERT))
    else:
        c = b.t().to(f"{CHIP}:0")
        assert torch.equal(c.cpu(), x.t())


# Copies between the chip and a device torch drives itself (issue 22 item 3): through the host,
# or device to device where the spec says the chip's driver is that device's runtime
# (SHARES_MEMORY_WITH). They need a native accelerator in the process: on a CPU machine they
# skip, saying so; on a GPU machine they run (scripts/nvgpu_device_run.sh OUT ... test).
NATIVE = next(iter(coexistence.native_accelerators()), None)
needs_native = pytest.mark.skipif(NATIVE is None, reason="no native accelerator (cuda, xpu, mps) in this process")


@needs_native
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_copies_with_the_native_device(dtype):
    x = make(dtype, (33, 65))
    on_native = x.to(NATIVE)
    on_chip = on_native.to(CHIP)
    assert on_chip.device.type == CHIP
    assert torch.equal(on_chip.cpu(), x)
    back = on_chip.to(NATIVE)
    assert back.device.type == NATIVE
    assert torch.equal(back.cpu(), x)
    # Layouts that cannot move as bytes: transposed sources, strided and broadcast destinations.
    assert torch.equal(on_chip.t().to(NATIVE).cpu(), x.t())
    assert torch.equal(on_native.t().to(CHIP).cpu(), x.t())
    target = torch.zeros(33, 130, dtype=dtype, device=NATIVE)
    target[:, ::2] = on_chip
    expected = torch.zeros(33, 130, dtype=dtype)
    expected[:, ::2] = x
    assert torch.equal(target.cpu(), expected)
    row = torch.zeros(4, 65, dtype=dtype, device=CHIP)
    row.copy_(on_native[0])
    assert torch.equal(row.cpu(), x[0].expand(4, 65))


@needs_native
def test_copies_with_the_native_device_convert_and_resolve():
    x = torch.randn(17, 9)
    wide = torch.empty(17, 9, dtype=torch.float64, device=NATIVE)
    wide.copy_(x.to(CHIP))
    assert torch.equal(wide.cpu(), x.double())
    if CONVERT is not None:
        converted = x.to(NATIVE).to(CHIP, dtype=CONVERT)
        assert torch.equal(converted.cpu(), x.to(CONVERT))
    if "complex64" in SPEC.DTYPES:
        z = torch.randn(6, 5, dtype=torch.complex64)
        assert torch.equal(z.to(NATIVE).conj().to(CHIP).cpu(), z.conj())
        assert torch.equal(z.to(CHIP).conj().to(NATIVE).cpu(), z.conj())
        written = torch.zeros(6, 5, dtype=torch.complex64, device=NATIVE)
        written.conj().copy_(z.to(CHIP))            # a conjugate view as the destination
        assert torch.equal(written.cpu(), z.conj())


@needs_native
@pytest.mark.parametrize("non_blocking", [False, True], ids=["blocking", "non_blocking"])
def test_copies_with_the_native_device_keep_stream_order(non_blocking):
    # Work queued on each device's current stream, copied across before it is done, the source
    # freed at once (each caching allocator may hand its block to the next op): every result
    # must be the CPU's. Large tensors so that the kernels are still running at the copy.
    n = 1 << 22
    base = torch.arange(n, dtype=torch.float32) % 1000
    for step in range(12):
        produced = (base.to(NATIVE) * 2 + step)            # queued on the native stream
        on_chip = produced.to(CHIP, non_blocking=non_blocking)
        del produced
        scratch = torch.full((n,), -1.0, device=NATIVE)    # may reuse produced's block
        on_chip = on_chip + 1                              # queued on the chip's stream
        returned = on_chip.to(NATIVE, non_blocking=non_blocking)
        del on_chip
        overwrite = torch.full((n,), -2.0, device=CHIP)    # may reuse on_chip's block
        result = (returned * 3).cpu()
        assert torch.equal(result, (base * 2 + step + 1) * 3), f"step {step}"
        del scratch, overwrite


@needs_native
def test_autograd_through_a_copy_from_the_native_device_is_refused_by_name():
    # The backward starts on the chip and would reach the native leaf through the copy. torch's
    # engine asserts on the native node while the chip holds the accelerator slot (pytorch#161129),
    # so torch_fl refuses it first, by name; the same graph from a CPU leaf trains.
    w = torch.randn(8, 4, device=NATIVE, requires_grad=True)
    x = torch.randn(3, 8)
    with pytest.raises(coexistence.NativeBackwardError, match="pytorch/issues/161129"):
        (x.to(CHIP) @ w.to(CHIP)).sum().backward()
    assert w.grad is None
    w_host = w.detach().cpu().requires_grad_()
    (x.to(CHIP) @ w_host.to(CHIP)).sum().backward()
    assert torch.allclose(w_host.grad, x.sum(0, keepdim=True).t().expand(8, 4), atol=_suite.atol)


def test_memory_tracks_live_tensors():
    device_module.synchronize()
    device_module.empty_cache()
    baseline = device_module.memory_allocated()
    x = torch.empty(1024, 1024, dtype=FLOAT, device=CHIP)
    assert device_module.memory_allocated() >= baseline + x.numel() * x.element_size()
    assert device_module.max_memory_allocated() >= device_module.memory_allocated()
    assert device_module.memory_reserved() >= device_module.memory_allocated()
    stats = device_module.memory_stats()
    assert stats["allocation.all.current"] >= 1
    del x
    assert device_module.memory_allocated() == baseline
    device_module.empty_cache()
    assert device_module.memory_allocated() == baseline
    assert device_module.memory_reserved() <= stats["reserved_bytes.all.current"]


def test_out_of_memory_is_reported_with_sizes():
    free, total = device_module.mem_get_info()
    retries = device_module.memory_stats().get("num_alloc_retries", 0)
    with pytest.raises(torch.OutOfMemoryError) as error:
        torch.empty(total + (1 << 20), dtype=BYTE, device=CHIP)
    message = str(error.value)
    assert "Tried to allocate" in message and "total capacity" in message
    assert device_module.memory_stats()["num_alloc_retries"] == retries + 1
    # The device is still usable afterwards.
    assert torch.ones(4, device=CHIP).sum().item() == 4


def test_streams_ordered_by_events():
    s1 = device_module.Stream()
    s2 = device_module.Stream()
    x = torch.ones(256, 256, device=CHIP)
    s1.wait_stream(device_module.current_stream())  # x was filled on the current stream
    with device_module.stream(s1):
        y = torch.mm(x, x)  # 256 everywhere
        event = device_module.Event()
        event.record(s1)
    s2.wait_event(event)
    with device_module.stream(s2):
        z = y + 1
    s2.synchronize()
    assert torch.equal(z.cpu(), torch.full((256, 256), 257.0))
    assert event.query()


def test_event_elapsed_time():
    start = device_module.Event(enable_timing=True)
    end = device_module.Event(enable_timing=True)
    start.record()
    torch.mm(torch.ones(128, 128, device=CHIP), torch.ones(128, 128, device=CHIP))
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0


def test_current_stream_switches():
    default = device_module.default_stream()
    assert device_module.current_stream() == default
    s = device_module.Stream()
    with device_module.stream(s):
        assert device_module.current_stream() == s
    assert device_module.current_stream() == default


# Whether the chip's normal_ draws the CPU's stream (a vendor kernel lending the generator's CPU
# state, or the CPU step) or numbers of its own (the Triton random family's Philox, which differ
# from the CPU's as CUDA's do). Either way a seed reproduces them.
DRAWS_LIKE_THE_CPU = routes.route(SPEC, "normal_").path != "triton"


def test_manual_seed_reproducible_and_cpu_compatible():
    torch.manual_seed(1234)
    a = torch.randn(10, 10, device=CHIP).cpu()
    torch.manual_seed(1234)
    b = torch.randn(10, 10, device=CHIP).cpu()
    torch.manual_seed(1234)
    c = torch.randn(10, 10)
    assert torch.equal(a, b)
    assert torch.equal(a, c) == DRAWS_LIKE_THE_CPU
    torch.manual_seed(1235)
    assert not torch.equal(torch.randn(10, 10, device=CHIP).cpu(), a)


def test_manual_seed_waits_for_queued_random_work():
    # Random kernels still queued when the seed is set must not draw after it.
    torch.manual_seed(7)
    expected = torch.randn(16, device=CHIP).cpu() if not DRAWS_LIKE_THE_CPU else torch.randn(16)
    for _ in range(20):
        torch.randn(256, 256, device=CHIP)
    torch.manual_seed(7)
    a = torch.randn(16, device=CHIP).cpu()
    assert torch.equal(a, expected)


def test_rng_state_round_trip():
    state = device_module.get_rng_state()
    a = torch.rand(20, device=CHIP).cpu()
    device_module.set_rng_state(state)
    b = torch.rand(20, device=CHIP).cpu()
    assert torch.equal(a, b)


def test_amp_supported_dtypes_match_spec():
    assert [str(d) for d in device_module.get_amp_supported_dtype()] == [f"torch.{d}" for d in SPEC.AMP_DTYPES]


if SPEC.AMP_DTYPES:
    AMP_DTYPES = [getattr(torch, d) for d in SPEC.AMP_DTYPES]

    @pytest.mark.parametrize("dtype", AMP_DTYPES, ids=str)
    def test_autocast_follows_the_spec_lists(dtype):
        a = torch.randn(4, 4, device=CHIP)
        with torch.autocast(CHIP, dtype=dtype):
            low, full = torch.mm(a, a), torch.exp(a.to(dtype))
        assert (low.dtype, full.dtype) == (dtype if "mm" in SPEC.AMP_LOWER_PRECISION_OPS else torch.float32,
                                           torch.float32 if "exp" in SPEC.AMP_FP32_OPS else dtype)
        assert torch.get_autocast_dtype(CHIP) == getattr(torch, SPEC.AMP_DEFAULT_DTYPE)

    def test_autocast_warns_and_disables_for_a_dtype_the_spec_does_not_list():
        # torch's behaviour on every custom device (torch_fl.amp.autocast refuses instead)
        unlisted = next(d for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64)
                        if d not in set(AMP_DTYPES))
        with pytest.warns(UserWarning, match=f"In {CHIP} autocast, but the target dtype is not supported"):
            with torch.autocast(CHIP, dtype=unlisted):
                assert not torch.is_autocast_enabled(CHIP)


if SPEC.DIST_BACKEND:
    def test_distributed_backend_is_registered_for_the_chip():
        import torch.distributed as dist

        assert dist.Backend.backend_capability[SPEC.DIST_BACKEND] == [CHIP]
        assert dist.Backend.default_device_backend_map[CHIP] == SPEC.DIST_BACKEND


def test_autograd_runs_on_chip():
    w = torch.randn(8, 4, device=CHIP, requires_grad=True)
    x = torch.randn(3, 8, device=CHIP)
    (x @ w).sum().backward()
    assert w.grad.device.type == CHIP
    assert torch.allclose(w.grad.cpu(), x.cpu().sum(0, keepdim=True).t().expand(8, 4), atol=_suite.atol)


def test_pinned_memory():
    x = torch.randn(1000).pin_memory()
    assert x.is_pinned()
    y = x.to(CHIP, non_blocking=True)
    device_module.synchronize()
    assert torch.equal(y.cpu(), x)


if FALLBACK_PROBE is not None and "cpu" in routes.Route(*SPEC.DEFAULT_ROUTE).chain:
    def test_op_without_kernel_falls_back_visibly(fallback_stats):
        # FALLBACK_PROBE: served by no vendor kernel and no Triton kernel of this build
        probe_op, probe_call = FALLBACK_PROBE
        x = torch.arange(10.0, device=CHIP)
        ref = torch.arange(10.0)
        assert torch.equal(probe_call(x).cpu(), probe_call(ref))
        cpu_calls = {op: paths["cpu"] for op, paths in fallback_stats().items() if "cpu" in paths}
        assert cpu_calls.get(probe_op) == 1, cpu_calls
elif FALLBACK_PROBE is not None:
    def test_op_without_kernel_raises_located_error():
        probe_op, probe_call = FALLBACK_PROBE
        x = torch.arange(10.0, device=CHIP)
        with pytest.raises(NotImplementedError, match=probe_op.split(".")[0] + ".*" + CHIP):
            probe_call(x)


# The tests a chip suite's test_device.py imports: those defined for this chip.
__all__ = [name for name in tuple(globals()) if name.startswith("test_")]
