"""PyTorch's reference out-of-tree backend tests (OpenReg's, test/cpp_extensions/open_registration_extension/
torch_openreg/tests) for a generated chip (`torch.<chip>`, device "<chip>"): the device-generic behaviours
they check. What test_device.py and test_torch_api.py already check is not repeated; the package's
README.md lists the upstream tests that do not apply, and the known gaps, with reasons.

Written once for every chip: a chip suite's tests/test_upstream.py imports these tests (after its
conftest.py configured torch_fl.testing.suite). Tests that apply to some chips only are defined
only for them (autocast where the spec has amp, the LSTM tests where the chip runs the fused cell, the
fused attention tests where it has torch's overrideable attention kernel).
"""
import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch.nn as nn

from torch_fl import routes
from torch_fl.testing import suite
from torch_fl.testing.common import script_prelude, second_device

_suite = suite.chip()  # configured by the chip's conftest.py, imported before any test module
SPEC = _suite.spec
CHIP = SPEC.CHIP
DTYPES = [getattr(torch, d) for d in SPEC.DTYPES]
FLOAT_NAME = _suite.float_dtype
FLOAT = getattr(torch, FLOAT_NAME)
BYTE = getattr(torch, _suite.byte_dtype)
# The torch release running the suite, e.g. (2, 13): where torch's own behaviour differs by release.
TORCH_RELEASE = tuple(int(n) for n in torch.__version__.split("+")[0].split(".")[:2])
device_module = getattr(torch, CHIP)
PRELUDE = script_prelude()


@pytest.fixture(autouse=True)
def _restore_device_and_stream():
    """Every test starts and ends on device 0 with its default stream current."""
    torch.accelerator.set_device_index(0)
    yield
    for index in range(device_module.device_count()):
        torch.accelerator.set_stream(device_module.default_stream(index))
    torch.accelerator.set_device_index(0)


# -- test_device.py: device queries and the device guard ------------------------------------------


def test_accelerator_is_the_chip():
    accelerator = torch.accelerator.current_accelerator()
    assert accelerator is not None and accelerator.type == CHIP
    assert torch.accelerator.is_available() and device_module.is_available()
    assert torch.accelerator.device_count() == device_module.device_count() >= 1
    device_module.init()
    assert device_module.is_initialized()
    capability = torch.accelerator.get_device_capability(f"{CHIP}:{device_module.device_count() - 1}")
    assert capability["supported_dtypes"] == torch.accelerator.get_device_capability(f"{CHIP}:0")["supported_dtypes"]


def test_set_device_index_persists_across_operations():
    other = second_device()
    torch.accelerator.set_device_index(other)
    assert torch.accelerator.current_device_index() == device_module.current_device() == other
    x = torch.randn(2, 3, dtype=FLOAT, device=CHIP)
    y = torch.matmul(x, x.t())
    assert x.device.index == y.device.index == y.sum().device.index == other
    device_module.set_device(f"{CHIP}:0")
    assert torch.accelerator.current_device_index() == 0
    assert torch.empty(1, dtype=FLOAT, device=CHIP).device.index == 0


def test_device_contexts_restore_after_exceptions():
    other = second_device()
    with torch.accelerator.device_index(None):
        assert torch.accelerator.current_device_index() == 0
    with pytest.raises(ValueError):
        with torch.accelerator.device_index(other):
            assert torch.accelerator.current_device_index() == other
            assert torch.ones(2, dtype=FLOAT, device=CHIP).device.index == other
            raise ValueError("inside the guard")
    assert torch.accelerator.current_device_index() == 0
    with pytest.raises(RuntimeError, match="nested"):
        with device_module.device(other):
            assert device_module.current_device() == other
            with device_module.device(0):
                assert device_module.current_device() == 0
                raise RuntimeError("nested")
    assert device_module.current_device() == 0
    with device_module.device(torch.device(CHIP, other)):
        assert torch.zeros(1, dtype=FLOAT, device=CHIP).device.index == other
    assert device_module.current_device() == 0


def test_invalid_device_index_is_refused():
    count = device_module.device_count()
    with pytest.raises(RuntimeError):
        torch.accelerator.set_device_index(count)
    with pytest.raises(RuntimeError):
        device_module.set_device(count)
    with pytest.raises(RuntimeError):
        torch.empty(1, dtype=FLOAT, device=f"{CHIP}:{count}")
    assert torch.accelerator.current_device_index() == 0
    assert torch.ones(2, dtype=FLOAT, device=CHIP).sum().item() == 2


def test_current_device_is_per_thread():
    count = device_module.device_count()
    errors, barrier = [], threading.Barrier(4)

    def work(k):
        try:
            barrier.wait()
            index = k % count
            for _ in range(10):
                torch.accelerator.set_device_index(index)
                x = torch.randn(8, 8, dtype=FLOAT, device=CHIP)
                result = torch.matmul(x, x).sum()
                seen = (torch.accelerator.current_device_index(), x.device.index, result.device.index)
                if seen != (index, index, index):
                    errors.append((k, seen))
        except Exception as error:  # reported below, with the thread's number
            errors.append((k, repr(error)[:300]))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert torch.accelerator.current_device_index() == 0  # the main thread's device did not move


def test_device_usable_after_an_op_error():
    x = torch.randn(5, 5, dtype=FLOAT, device=CHIP)
    with pytest.raises(RuntimeError):
        torch.matmul(x, torch.randn(3, 3, dtype=FLOAT, device=CHIP))
    assert torch.accelerator.current_device_index() == 0
    ones = torch.ones(5, 5, dtype=FLOAT, device=CHIP)
    assert torch.equal(torch.matmul(ones, ones).cpu(), torch.full((5, 5), 5.0, dtype=FLOAT))


def test_spawned_process_uses_the_chip(tmp_path):
    # OpenReg's test_device_multiprocessing_spawn: the 'spawn' start method is the safe path.
    (tmp_path / "spawn_worker.py").write_text(PRELUDE + textwrap.dedent(f"""
        def work(queue):
            torch.accelerator.set_device_index(0)
            x = torch.ones(4, 4, dtype=torch.{FLOAT_NAME}, device="{CHIP}")
            queue.put((torch.accelerator.current_device_index(), torch.matmul(x, x).sum().item()))
    """))
    script = PRELUDE + textwrap.dedent(f"""
        import multiprocessing, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import spawn_worker
        if __name__ == "__main__":
            context = multiprocessing.get_context("spawn")
            queue = context.Queue()
            process = context.Process(target=spawn_worker.work, args=(queue,))
            process.start()
            print("result", queue.get(timeout=120))
            process.join()
            print("exit", process.exitcode)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    assert result.returncode == 0, result.stderr
    assert "result (0, 64.0)" in result.stdout and "exit 0" in result.stdout, result.stdout + result.stderr


# -- test_memory.py: the caching allocator -------------------------------------------------------


def test_peak_stats_and_their_reset():
    device_module.synchronize()
    device_module.empty_cache()
    device_module.reset_peak_memory_stats()
    baseline = device_module.memory_allocated()
    x = torch.empty(1 << 18, dtype=FLOAT, device=CHIP)
    size = x.numel() * x.element_size()
    assert device_module.memory_allocated() == baseline + size
    stats = device_module.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                "active_bytes.all.current", "requested_bytes.all.current", "num_alloc_retries", "num_ooms"):
        assert key in stats, key
    assert stats["allocated_bytes.all.current"] == baseline + size
    del x
    assert device_module.memory_allocated() == baseline
    assert device_module.max_memory_allocated() >= baseline + size
    assert device_module.max_memory_reserved() >= device_module.memory_reserved() >= size
    device_module.reset_peak_memory_stats()
    assert device_module.max_memory_allocated() == baseline
    device_module.reset_accumulated_memory_stats()
    assert device_module.memory_stats()["allocation.all.allocated"] == 0
    torch.empty(16, dtype=FLOAT, device=CHIP)
    assert device_module.memory_stats()["allocation.all.allocated"] == 1


def test_empty_cache_and_mem_get_info():
    device_module.synchronize()
    device_module.empty_cache()
    free, total = device_module.mem_get_info()
    assert 0 < free <= total
    size = 16 << 20
    x = torch.empty(size // BYTE.itemsize, dtype=BYTE, device=CHIP)
    free_while_held = device_module.mem_get_info()[0]
    assert free_while_held <= free - size
    del x
    cached = device_module.memory_reserved()
    assert cached >= size  # the block stays cached ...
    device_module.empty_cache()
    assert device_module.memory_reserved() <= cached - size  # ... until emptied
    assert no_unused_segments()
    assert device_module.mem_get_info()[0] >= free_while_held + size
    assert torch.accelerator.get_memory_info() == device_module.mem_get_info()


def test_accelerator_memory_api_matches_the_device_module():
    x = torch.empty(4096, dtype=FLOAT, device=CHIP)
    assert torch.accelerator.memory_allocated() == device_module.memory_allocated() > 0
    assert torch.accelerator.memory_reserved() == device_module.memory_reserved()
    assert torch.accelerator.max_memory_allocated() == device_module.max_memory_allocated()
    assert torch.accelerator.max_memory_reserved() == device_module.max_memory_reserved()
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == device_module.memory_allocated()
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.reset_accumulated_memory_stats()
    del x
    torch.accelerator.empty_cache()
    assert no_unused_segments()


def no_unused_segments() -> bool:
    """After empty_cache every segment still reserved holds a live block (tensors of earlier
    tests may keep some: reserved equals allocated only in a fresh process)."""
    return all(segment["allocated_size"] > 0 for segment in device_module.memory_snapshot())


def test_allocations_are_per_device():
    other = second_device()
    device_module.synchronize(0)
    device_module.synchronize(other)
    before = [device_module.memory_allocated(0), device_module.memory_allocated(other)]
    on_first = [torch.empty(1000, dtype=FLOAT, device=f"{CHIP}:0") for _ in range(5)]
    on_other = [torch.empty(1000, dtype=FLOAT, device=f"{CHIP}:{other}") for _ in range(5)]
    assert all(t.device.index == 0 for t in on_first) and all(t.device.index == other for t in on_other)
    assert not {t.data_ptr() for t in on_first} & {t.data_ptr() for t in on_other}
    size = 5 * 1000 * FLOAT.itemsize
    assert device_module.memory_allocated(0) >= before[0] + size
    assert device_module.memory_allocated(other) >= before[1] + size
    del on_other
    assert device_module.memory_allocated(other) == before[1]
    assert device_module.memory_allocated(0) >= before[0] + size


def test_inplace_ops_views_and_resize_keep_storage():
    x = torch.ones(100, dtype=FLOAT, device=CHIP)
    pointer = x.data_ptr()
    x.add_(1)
    x.mul_(2)
    assert x.data_ptr() == pointer and bool((x == 4).all())
    view = x.view(10, 10)
    alias = x.view_as(x)
    assert view.data_ptr() == alias.data_ptr() == pointer
    assert x[10:20].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    x.fill_(5.0)
    assert bool((view == 5).all()) and bool((alias == 5).all())
    x.resize_(50)
    assert x.numel() == 50 and x.data_ptr() == pointer
    x.resize_(100)
    assert x.numel() == 100
    channels_last = torch.empty(2, 3, 4, 4, dtype=FLOAT, device=CHIP, memory_format=torch.channels_last)
    assert channels_last.is_contiguous(memory_format=torch.channels_last) and not channels_last.is_contiguous()


def test_alloc_free_cycles_do_not_leak():
    # OpenReg's TestMemoryLeaks: here the allocator's own count proves it.
    gc.collect()  # garbage of earlier tests must not be freed inside the measured loop
    device_module.synchronize()
    baseline = device_module.memory_allocated()
    for i in range(60):
        x = torch.randn(500 + 10 * i, dtype=FLOAT, device=CHIP, requires_grad=i % 2 == 0)
        views = (x.view(-1)[10:20], x.reshape(-1, 1), x.detach().clone())
        back = x.detach().cpu().to(CHIP)
        y = x * 2 + back
        del x, views, back, y
        if i == 9:
            device_module.synchronize()
            warm_reserved = device_module.memory_reserved()
    device_module.synchronize()
    gc.collect()
    assert device_module.memory_allocated() == baseline
    assert device_module.memory_reserved() <= warm_reserved + (2 << 20)  # blocks were reused, not hoarded


# -- test_streams.py and test_event.py -----------------------------------------------------------


def test_generic_streams_on_the_chip():
    stream = torch.Stream(device=CHIP)
    assert stream.device == torch.device(CHIP, 0) and stream.device_index == 0
    rebuilt = torch.Stream(stream_id=stream.stream_id, device_type=stream.device_type,
                           device_index=stream.device_index)
    assert rebuilt == stream
    assert f"torch.Stream device_type={CHIP}, device_index=0" in repr(stream)
    streams = [device_module.Stream() for _ in range(3)]
    assert len({s.stream_id for s in streams}) == 3
    assert all(isinstance(s, torch.Stream) for s in streams)
    assert torch.accelerator.current_stream() == device_module.current_stream() == device_module.default_stream()


def test_stream_as_context_and_set_stream():
    stream = torch.Stream(device=CHIP)
    with stream:
        assert torch.accelerator.current_stream() == stream
        assert device_module.current_stream() == stream
    assert torch.accelerator.current_stream() == device_module.default_stream()
    other = torch.Stream(device=CHIP)
    torch.accelerator.set_stream(stream)
    assert torch.accelerator.current_stream().stream_id == stream.stream_id
    device_module.set_stream(other)
    assert torch.accelerator.current_stream().stream_id == other.stream_id


def test_stream_query_synchronize_and_record_event():
    stream = torch.Stream(device=CHIP)
    assert stream.query()
    x = torch.ones(256, 256, dtype=FLOAT, device=CHIP)
    stream.wait_stream(torch.accelerator.current_stream())
    with stream:
        y = torch.matmul(x, x)
    event = stream.record_event()
    assert event.event_id != 0 and event.device == torch.device(CHIP, 0)
    stream.synchronize()
    assert stream.query() and event.query()
    assert torch.equal(y.cpu(), torch.full((256, 256), 256.0, dtype=FLOAT))


def test_several_streams_wait_on_one_event():
    first, second, third = (torch.Stream(device=CHIP) for _ in range(3))
    x = torch.randn(30, 30, dtype=FLOAT, device=CHIP)
    first.wait_stream(torch.accelerator.current_stream())
    with first:
        y = x * 2
    event = first.record_event()
    second.wait_event(event)
    third.wait_event(event)
    with second:
        z2 = torch.matmul(y, x)
    with third:
        z3 = torch.matmul(y, x)
    torch.accelerator.synchronize()
    assert event.query()
    assert torch.equal(z2.cpu(), z3.cpu())
    torch.testing.assert_close(z2.cpu(), torch.matmul(x.cpu() * 2, x.cpu()), atol=0.1, rtol=0.05)


def test_streams_and_events_on_another_device():
    other = second_device()
    stream = torch.Stream(device=f"{CHIP}:{other}")
    assert stream.device == torch.device(CHIP, other) and stream.device_index == other
    assert torch.Stream(other).device_index == other
    assert device_module.Stream(device=other).device_index == other
    assert device_module.current_stream(other).device_index == other
    torch.accelerator.set_stream(stream)  # a stream of another device makes that device current
    assert torch.accelerator.current_stream() == stream and torch.accelerator.current_device_index() == other
    torch.accelerator.set_stream(device_module.default_stream(other))  # entering a current stream is a no-op
    torch.accelerator.set_device_index(0)
    with stream:
        assert torch.accelerator.current_device_index() == other
    assert torch.accelerator.current_device_index() == 0
    first = torch.Stream(device=f"{CHIP}:0")
    stream.wait_stream(first)
    event = stream.record_event()
    assert event.device == torch.device(CHIP, other)
    first.wait_event(event)
    first.synchronize()
    assert event.query()
    x = torch.ones(50, 50, dtype=FLOAT, device=f"{CHIP}:{other}")
    (x + 1).sum()
    torch.accelerator.synchronize(other)
    device_module.synchronize(other)
    assert torch.accelerator.current_device_index() == 0


def test_event_before_and_after_recording():
    event = torch.Event(device=CHIP)
    assert event.device.type == CHIP and event.device.index is None and event.event_id == 0
    assert event.query()  # never recorded: complete
    assert isinstance(event, device_module.Event)
    stream = torch.Stream(device=CHIP)
    event.record(stream)
    first_id = event.event_id
    assert first_id != 0 and event.device.index == 0
    event.synchronize()
    assert event.query()
    event.record(stream)  # reused
    stream.synchronize()
    assert event.query()
    other_event = stream.record_event()
    assert other_event.event_id not in (0, event.event_id)


def test_event_timing():
    stream = torch.Stream(device=CHIP)
    start = torch.Event(device=CHIP, enable_timing=True)
    end = torch.Event(device=CHIP, enable_timing=True)
    x = torch.ones(64, 64, dtype=FLOAT, device=CHIP)
    stream.wait_stream(torch.accelerator.current_stream())
    start.record(stream)
    with stream:
        torch.matmul(x, x)
    end.record(stream)
    stream.synchronize()
    assert start.query() and end.query()
    assert 0 <= start.elapsed_time(end) < 60_000
    untimed = [torch.Event(device=CHIP), torch.Event(device=CHIP)]
    for e in untimed:
        e.record(stream)
    stream.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        untimed[0].elapsed_time(untimed[1])


# -- test_rng.py -----------------------------------------------------------------------------------


def test_generator_objects_on_the_chip():
    last = device_module.device_count() - 1
    generator = torch.Generator(device=f"{CHIP}:{last}")
    assert generator.device == torch.device(CHIP, last)
    generator = torch.Generator(device=CHIP)
    generator.manual_seed(42)
    assert generator.initial_seed() == 42
    state = generator.get_state()
    a = torch.rand(16, dtype=FLOAT, device=CHIP, generator=generator).cpu()
    torch.manual_seed(0)  # the global seed does not touch a private generator
    generator.set_state(state)
    b = torch.rand(16, dtype=FLOAT, device=CHIP, generator=generator).cpu()
    assert torch.equal(a, b)
    generator.manual_seed(43)
    assert not torch.equal(torch.rand(16, dtype=FLOAT, device=CHIP, generator=generator).cpu(), a)


def test_seed_all_and_rng_states_of_every_device():
    device_module.manual_seed_all(42)
    assert device_module.initial_seed() == 42
    device_module.seed_all()
    first = device_module.initial_seed()
    device_module.seed_all()
    assert device_module.initial_seed() != first
    states = device_module.get_rng_state_all()
    assert len(states) == device_module.device_count()
    draws = [torch.rand(8, dtype=FLOAT, device=f"{CHIP}:{i}").cpu() for i in range(len(states))]
    device_module.set_rng_state_all(states)
    assert all(torch.equal(torch.rand(8, dtype=FLOAT, device=f"{CHIP}:{i}").cpu(), draws[i])
               for i in range(len(states)))
    last = len(states) - 1
    state = device_module.get_rng_state(last)
    drawn = torch.rand(8, dtype=FLOAT, device=f"{CHIP}:{last}").cpu()
    device_module.set_rng_state(state, last)
    assert torch.equal(torch.rand(8, dtype=FLOAT, device=f"{CHIP}:{last}").cpu(), drawn)


def test_fork_rng_restores_the_chip_state():
    torch.manual_seed(5)
    with torch.random.fork_rng(devices=range(device_module.device_count()), device_type=CHIP):
        torch.rand(32, dtype=FLOAT, device=CHIP)
        torch.manual_seed(99)
    after = torch.rand(8, dtype=FLOAT, device=CHIP).cpu()
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(8, dtype=FLOAT, device=CHIP).cpu())


# -- test_storage.py and test_memory.py's TestPinMemory --------------------------------------------


def test_pinned_host_memory_for_the_chip():
    tensor = torch.randn(10, dtype=FLOAT)
    assert not tensor.is_pinned()
    pinned = tensor.pin_memory()
    assert pinned.is_pinned() and pinned[2:5].is_pinned() and torch.equal(pinned, tensor)
    rewrapped = torch.tensor((), dtype=FLOAT).set_(pinned.untyped_storage()[2 * FLOAT.itemsize:], size=(5,),
                                                   stride=(1,), storage_offset=0)
    assert rewrapped.is_pinned() and rewrapped.data_ptr() != pinned.data_ptr()
    assert torch.equal(rewrapped, tensor[2:7])
    # torch 2.13 deprecates the device argument of storage.pin_memory/is_pinned (the accelerator's
    # is meant); up to 2.12 it defaults to "cuda", so there the chip is named (docs/compat.md).
    device = () if TORCH_RELEASE >= (2, 13) else (CHIP,)
    untyped = torch.randn(10, dtype=FLOAT).untyped_storage()
    assert not untyped.is_pinned(*device)
    pinned_storage = untyped.pin_memory(*device)
    assert pinned_storage.is_pinned(*device) and pinned_storage.device.type == "cpu"
    assert torch.equal(torch.tensor((), dtype=FLOAT).set_(pinned_storage), torch.tensor((), dtype=FLOAT).set_(untyped))


def test_serialization_location_tags():
    # Untyped storages move as zero-element byte views, which every chip takes (even one whose
    # spec lists no uint8): torch.save, storage.<chip>() and map_location all rely on it.
    storage = torch.UntypedStorage(4, device=torch.device(CHIP))
    assert storage.device == torch.device(CHIP, 0)
    assert torch.serialization.location_tag(storage) == f"{CHIP}:0"
    last = device_module.device_count() - 1
    assert torch.serialization.location_tag(torch.UntypedStorage(4, device=f"{CHIP}:{last}")) == f"{CHIP}:{last}"
    restored = torch.serialization.default_restore_location(torch.empty(4, 4, dtype=FLOAT).storage(), f"{CHIP}:{last}")
    assert getattr(restored, f"is_{CHIP}") and restored.device == torch.device(CHIP, last)


def test_load_onto_another_device(tmp_path):
    other = second_device()
    x = torch.randn(3, 3, dtype=FLOAT).to(f"{CHIP}:0")
    torch.save(x, tmp_path / "x.pt")
    loaded = torch.load(tmp_path / "x.pt", map_location=f"{CHIP}:{other}")
    assert loaded.device == torch.device(CHIP, other) and torch.equal(loaded.cpu(), x.cpu())


def test_dlpack_round_trip():
    # OpenReg's test_utils.py
    x = torch.randn(2, 3, dtype=FLOAT).to(CHIP)
    y = torch.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert y.device == x.device and y.data_ptr() == x.data_ptr()
    assert torch.equal(y.cpu(), x.cpu())


# -- test_autograd.py ----------------------------------------------------------------------------


def test_autograd_has_a_thread_per_device():
    torch.ones(2, dtype=FLOAT, device=CHIP, requires_grad=True).sum().backward()
    names = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as file:
                names.add(file.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    for index in range(device_module.device_count()):
        assert f"pt_autograd_{index}" in names, sorted(names)


def test_autograd_hooks_see_chip_gradients():
    x = torch.ones(3, dtype=FLOAT, device=CHIP, requires_grad=True)
    seen = []

    def hook(grad):
        seen.append(grad.device)
        return grad * 2

    x.register_hook(hook)
    (x * 3).sum().backward()
    assert seen == [x.device]
    assert torch.equal(x.grad.cpu(), torch.full((3,), 6.0, dtype=FLOAT))
    layer = nn.Linear(3, 2, dtype=FLOAT).to(CHIP)
    grads_out = []
    layer.register_full_backward_hook(lambda module, grad_in, grad_out: grads_out.append(grad_out[0].device))
    inputs = torch.ones(4, 3, dtype=FLOAT, device=CHIP, requires_grad=True)
    (grad_inputs,) = torch.autograd.grad(layer(inputs).sum(), inputs)
    assert grads_out == [inputs.device] and grad_inputs.device == inputs.device
    expected = layer.weight.detach().cpu().sum(0).expand(4, 3)
    torch.testing.assert_close(grad_inputs.cpu(), expected, atol=1e-2, rtol=1e-2)


if SPEC.AMP_DTYPES:
    # -- test_autocast.py (the spec's own lists: test_device.py) ----------------------------------

    AMP_DEFAULT = getattr(torch, SPEC.AMP_DEFAULT_DTYPE)

    def test_autocast_nesting_and_cache_flag():
        assert not torch.is_autocast_enabled(CHIP)
        with torch.autocast(CHIP):
            assert torch.is_autocast_enabled(CHIP) and torch.get_autocast_dtype(CHIP) == AMP_DEFAULT
            with torch.autocast(CHIP, enabled=False):
                assert not torch.is_autocast_enabled(CHIP)
            assert torch.is_autocast_enabled(CHIP)
            for name in SPEC.AMP_DTYPES:
                with torch.autocast(CHIP, dtype=getattr(torch, name)):
                    assert torch.get_autocast_dtype(CHIP) == getattr(torch, name)
            assert torch.get_autocast_dtype(CHIP) == AMP_DEFAULT
        assert not torch.is_autocast_enabled(CHIP)
        with torch.autocast(CHIP, cache_enabled=False):
            assert not torch.is_autocast_cache_enabled()
        assert torch.is_autocast_cache_enabled()
        assert not torch.is_autocast_enabled("cpu")  # the chip's autocast is its own

    if "mm" in SPEC.AMP_LOWER_PRECISION_OPS:
        def test_autocast_backward_and_disabled_region():
            w = torch.randn(4, 4, dtype=FLOAT, device=CHIP, requires_grad=True)
            x = torch.randn(4, 4, dtype=FLOAT, device=CHIP)
            with torch.autocast(CHIP):
                low = torch.mm(x, w)
                with torch.autocast(CHIP, enabled=False):
                    full = torch.mm(x, w)
            assert low.dtype == AMP_DEFAULT and full.dtype == FLOAT
            (low.float().sum() + full.float().sum()).backward()
            assert w.grad.dtype == FLOAT and w.grad.device == w.device


# -- test_misc.py: the backend's registration, generated methods, tensor types ---------------------


def test_torch_device_parsing():
    device = torch.device(f"{CHIP}:0")
    assert (device.type, device.index, str(device)) == (CHIP, 0, f"{CHIP}:0")
    assert torch.device(CHIP, 0) == device and torch.device(CHIP).index is None
    assert torch.ones(1, dtype=FLOAT, device=device).device == device
    with pytest.raises(RuntimeError, match="Invalid device string"):
        torch.device(f"{CHIP}:x")


def test_backend_registration_is_fixed():
    assert torch._C._get_privateuse1_backend_name() == CHIP
    torch.utils.rename_privateuse1_backend(CHIP)  # the same name again is fine
    with pytest.raises(RuntimeError, match="has already been set"):
        torch.utils.rename_privateuse1_backend("dev")
    import types

    with pytest.raises(RuntimeError, match="Expected one of cpu"):
        torch._register_device_module("dev", types.ModuleType("fake_module"))
    with pytest.raises(RuntimeError, match="The runtime module of"):
        torch._register_device_module(CHIP, types.ModuleType("fake_module"))
    get = torch.utils.backend_registration._get_custom_mod_func
    assert get("device_count")() == device_module.device_count()
    with pytest.raises(RuntimeError, match=f"Try to call torch.{CHIP}"):
        get("non_existent_func")
    with pytest.raises(RuntimeError, match="The custom device module of"):
        torch.utils.generate_methods_for_privateuse1_backend()


def test_generated_methods_move_to_the_chip():
    for owner in (torch.Tensor, torch.TypedStorage, torch.UntypedStorage, nn.utils.rnn.PackedSequence):
        assert hasattr(owner, f"is_{CHIP}") and hasattr(owner, CHIP), owner
    assert hasattr(nn.Module, CHIP)
    x = torch.empty(4, 4, dtype=FLOAT)
    assert not getattr(x, f"is_{CHIP}")
    last = device_module.device_count() - 1
    for where, index in ((None, 0), (torch.device(CHIP), 0), (0, 0), (last, last), (torch.device(CHIP, last), last)):
        moved = getattr(x, CHIP)() if where is None else getattr(x, CHIP)(where)
        assert getattr(moved, f"is_{CHIP}") and moved.device.index == index, where
    assert getattr(getattr(x.untyped_storage(), CHIP)(), f"is_{CHIP}")
    assert getattr(getattr(x.storage(), CHIP)(), f"is_{CHIP}")
    module = getattr(nn.Linear(2, 2, dtype=FLOAT), CHIP)()
    assert all(p.device.type == CHIP for p in module.parameters())
    packed = nn.utils.rnn.PackedSequence(torch.rand(5, 3, dtype=FLOAT), torch.tensor([1, 1, 1, 1, 1]))
    assert not getattr(packed, f"is_{CHIP}")
    on_chip = getattr(packed, CHIP)()
    assert getattr(on_chip, f"is_{CHIP}") and getattr(on_chip.data, f"is_{CHIP}")


LEGACY_TYPE_NAMES = {
    torch.float32: "FloatTensor", torch.float64: "DoubleTensor", torch.float16: "HalfTensor",
    torch.bfloat16: "BFloat16Tensor", torch.int8: "CharTensor", torch.uint8: "ByteTensor",
    torch.int16: "ShortTensor", torch.int32: "IntTensor", torch.int64: "LongTensor", torch.bool: "BoolTensor",
}


def test_tensor_type_names_and_storage():
    for dtype in DTYPES:
        if dtype in LEGACY_TYPE_NAMES:
            assert torch.empty(4, dtype=dtype, device=CHIP).type() == f"torch.{CHIP}.{LEGACY_TYPE_NAMES[dtype]}"
    tensor = torch.randn(4, 4, dtype=FLOAT, device=CHIP)
    storage = tensor.storage()
    assert getattr(storage, f"is_{CHIP}") and storage.size() == tensor.numel()
    assert storage.device == tensor.device


def test_new_tensor_methods_follow_the_source():
    last = device_module.device_count() - 1
    source = torch.ones(2, dtype=FLOAT, device=f"{CHIP}:{last}")
    made = [source.new_zeros(3), source.new_ones(3), source.new_empty(3), source.new_full((3,), 3.0),
            source.new_tensor([1.0, 2.0, 3.0])]
    assert all(t.device == source.device and t.dtype == FLOAT for t in made)
    assert made[3].cpu().tolist() == [3.0, 3.0, 3.0] and made[4].cpu().tolist() == [1.0, 2.0, 3.0]
    assert torch.ones(2, dtype=FLOAT).to(source).device == source.device
    converted = torch.ones(2, dtype=FLOAT).to(CHIP, BYTE)
    assert converted.device.type == CHIP and converted.dtype == BYTE
    assert torch.zeros_like(source).device == source.device


def test_dataloader_pins_batches_for_the_chip():
    dataset = torch.utils.data.TensorDataset(torch.randn(8, 2, dtype=FLOAT), torch.arange(8))
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, pin_memory=True)
    batches = list(loader)
    assert len(batches) == 2 and all(x.is_pinned() and y.is_pinned() for x, y in batches)
    moved = batches[0][0].to(CHIP, non_blocking=True)
    device_module.synchronize()
    assert torch.equal(moved.cpu(), dataset.tensors[0][:4])


def test_accelerator_stream_and_synchronize():
    assert torch.accelerator.current_stream() == device_module.current_stream()
    assert torch.accelerator.current_stream(0).device == torch.device(CHIP, 0)
    stream = torch.Stream(device=CHIP)
    x = torch.ones(128, 128, dtype=FLOAT, device=CHIP)
    stream.wait_stream(torch.accelerator.current_stream())
    with stream:
        y = x * 3
    torch.accelerator.synchronize()
    assert stream.query()
    assert torch.equal(y.cpu(), torch.full((128, 128), 3.0, dtype=FLOAT))


# -- test_rnn.py: where the chip runs the fused LSTM cell (a vendor kernel or Triton) ------------

if routes.route(SPEC, "_thnn_fused_lstm_cell").path in ("vendor", "triton"):
    def test_lstm_matches_cpu():
        torch.manual_seed(0)
        lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, dtype=FLOAT)
        x = torch.randn(4, 3, 8, dtype=FLOAT)
        h0 = torch.randn(4, 3, 16, dtype=FLOAT)
        c0 = torch.randn(4, 3, 16, dtype=FLOAT)
        out, (h, c) = lstm(x, (h0, c0))
        chip_lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, dtype=FLOAT).to(CHIP)
        chip_lstm.load_state_dict(lstm.state_dict())
        chip_out, (chip_h, chip_c) = chip_lstm(x.to(CHIP), (h0.to(CHIP), c0.to(CHIP)))
        assert chip_out.device.type == chip_h.device.type == chip_c.device.type == CHIP
        assert chip_out.shape == (4, 3, 32) and chip_h.shape == chip_c.shape == (4, 3, 16)
        tolerance = dict(atol=1e-4, rtol=1e-4) if FLOAT == torch.float32 else dict(atol=2e-2, rtol=2e-2)
        torch.testing.assert_close(chip_out.cpu(), out, **tolerance)
        torch.testing.assert_close(chip_h.cpu(), h, **tolerance)
        torch.testing.assert_close(chip_c.cpu(), c, **tolerance)

    def test_lstm_packed_and_batch_first():
        lstm = nn.LSTM(10, 20, dtype=FLOAT).to(CHIP)
        sequences = [torch.randn(5, 10, dtype=FLOAT), torch.randn(3, 10, dtype=FLOAT), torch.randn(1, 10, dtype=FLOAT)]
        packed = nn.utils.rnn.pack_sequence(sequences, enforce_sorted=True).to(CHIP)
        out, (h, c) = lstm(packed)
        assert out.data.device.type == h.device.type == c.device.type == CHIP
        padded, lengths = nn.utils.rnn.pad_packed_sequence(out)
        assert padded.shape == (5, 3, 20) and lengths.tolist() == [5, 3, 1]
        batch_first = nn.LSTM(10, 20, batch_first=True, dtype=FLOAT).to(CHIP)
        result, _ = batch_first(torch.randn(2, 5, 10, dtype=FLOAT, device=CHIP))
        assert result.device.type == CHIP and result.shape == (2, 5, 20)


# -- test_sdpa.py: where the chip has torch's overrideable fused attention (Triton's or a vendor's) ---

if routes.route(SPEC, "_scaled_dot_product_fused_attention_overrideable").path in ("vendor", "triton"):
    from torch.nn.attention import SDPBackend

    # Upstream's shape and dtype (float16 where the chip lists it).
    _SDPA_SHAPE = (4, 2, 256, 128)
    _SDPA_DTYPE = torch.float16 if torch.float16 in DTYPES else FLOAT
    _SDPA_TOLERANCE = dict(atol=1e-4, rtol=1e-4) if _SDPA_DTYPE == torch.float32 else dict(atol=2e-2, rtol=2e-2)

    def _sdpa_operands(*shapes, requires_grad=False):
        g = torch.Generator().manual_seed(0)
        return [torch.rand(shape, generator=g, dtype=_SDPA_DTYPE).requires_grad_(requires_grad) for shape in shapes]

    if routes.route(SPEC, "_fused_sdp_choice").path != "vendor":  # a vendor's choice answers its own kernel
        def test_fused_sdp_choice_privateuseone():
            q, k, v = (t.to(CHIP) for t in _sdpa_operands(_SDPA_SHAPE, _SDPA_SHAPE, _SDPA_SHAPE))
            assert torch._fused_sdp_choice(q, k, v) == SDPBackend.OVERRIDEABLE.value

    def test_scaled_dot_product_fused_attention_overrideable():
        q, k, v = _sdpa_operands(_SDPA_SHAPE, _SDPA_SHAPE, _SDPA_SHAPE)
        out = torch.nn.functional.scaled_dot_product_attention(q.to(CHIP), k.to(CHIP), v.to(CHIP), attn_mask=None,
                                                               dropout_p=0.0)
        want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
        torch.testing.assert_close(out.cpu().float(), want, **_SDPA_TOLERANCE)

    def test_scaled_dot_product_fused_attention_overrideable_backward():
        batch, heads, length, _ = _SDPA_SHAPE
        q, k, v, mask, upward = _sdpa_operands(_SDPA_SHAPE, _SDPA_SHAPE, _SDPA_SHAPE, (batch, heads, length, length),
                                               _SDPA_SHAPE)
        chip = [t.to(CHIP) for t in (q, k, v, mask)]
        (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset,
         _) = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(*chip[:3], attn_bias=chip[3])
        grads = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
            upward.to(CHIP), *chip, [True, True, True, True], output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
            dropout_p=0.0, is_causal=False, philox_seed=philox_seed, philox_offset=philox_offset)
        reference = [t.float().requires_grad_() for t in (q, k, v, mask)]
        want = torch.nn.functional.scaled_dot_product_attention(*reference[:3], attn_mask=reference[3])
        want.backward(upward.float())
        torch.testing.assert_close(output.cpu().float(), want.detach(), **_SDPA_TOLERANCE)
        for got, ref in zip(grads, reference):
            assert got.shape == ref.shape and got.device.type == CHIP
            torch.testing.assert_close(got.cpu().float(), ref.grad, **_SDPA_TOLERANCE)


# The tests (and the autouse fixture) a chip suite's test_upstream.py imports: those defined for this chip.
__all__ = [name for name in (
    "_restore_device_and_stream", "test_accelerator_is_the_chip",
    "test_set_device_index_persists_across_operations", "test_device_contexts_restore_after_exceptions",
    "test_invalid_device_index_is_refused", "test_current_device_is_per_thread",
    "test_device_usable_after_an_op_error", "test_spawned_process_uses_the_chip",
    "test_peak_stats_and_their_reset", "test_empty_cache_and_mem_get_info",
    "test_accelerator_memory_api_matches_the_device_module", "test_allocations_are_per_device",
    "test_inplace_ops_views_and_resize_keep_storage", "test_alloc_free_cycles_do_not_leak",
    "test_generic_streams_on_the_chip", "test_stream_as_context_and_set_stream",
    "test_stream_query_synchronize_and_record_event", "test_several_streams_wait_on_one_event",
    "test_streams_and_events_on_another_device", "test_event_before_and_after_recording", "test_event_timing",
    "test_generator_objects_on_the_chip", "test_seed_all_and_rng_states_of_every_device",
    "test_fork_rng_restores_the_chip_state", "test_pinned_host_memory_for_the_chip",
    "test_serialization_location_tags", "test_load_onto_another_device", "test_dlpack_round_trip",
    "test_autograd_has_a_thread_per_device", "test_autograd_hooks_see_chip_gradients",
    "test_autocast_nesting_and_cache_flag", "test_autocast_backward_and_disabled_region",
    "test_torch_device_parsing", "test_backend_registration_is_fixed",
    "test_generated_methods_move_to_the_chip", "test_tensor_type_names_and_storage",
    "test_new_tensor_methods_follow_the_source", "test_dataloader_pins_batches_for_the_chip",
    "test_accelerator_stream_and_synchronize", "test_lstm_matches_cpu", "test_lstm_packed_and_batch_first",
    "test_fused_sdp_choice_privateuseone", "test_scaled_dot_product_fused_attention_overrideable",
    "test_scaled_dot_product_fused_attention_overrideable_backward",
) if name in globals()]
