"""A generated chip through torch's device-generic API, as client code uses it: PyTorch's own
reference-backend tests (OpenReg's) where they apply to a generated chip, and the cases real
clients hit (tied weights, fork, host cache, device queries, fused RNN cells). The package's
README.md lists the upstream tests that do not apply here, with the reason.

Written once for every chip: a chip suite's tests/test_torch_api.py imports these tests (after its
conftest.py configured torch_fl.testing.suite). Tests that apply to some chips only are defined
only for them (amp where the spec has it, the fused RNN cells where Triton serves them, the
complex and bool cases where the chip has the dtype).
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

from torch_fl import routes
from torch_fl.testing import suite
from torch_fl.testing.common import script_prelude

_suite = suite.chip()  # configured by the chip's conftest.py, imported before any test module
SPEC = _suite.spec
CHIP = SPEC.CHIP
DTYPES = {getattr(torch, d) for d in SPEC.DTYPES}

FLOAT_NAME = _suite.float_dtype
FLOAT = getattr(torch, FLOAT_NAME)
device_module = getattr(torch, CHIP)
PRELUDE = script_prelude()


def run_script(source: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`source` in a fresh interpreter (a crash or a hang there fails the test, not the run)."""
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(source)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONFAULTHANDLER": "1"})


class TiedModel(nn.Module):
    """The shape of GPT-2's and BERT's tied input and output embeddings."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 6, dtype=FLOAT)
        self.head = nn.Linear(6, 11, bias=False, dtype=FLOAT)
        self.head.weight = self.embed.weight


def test_module_to_chip_keeps_parameters_and_ties():
    model = TiedModel()
    before = list(model.parameters())
    model.to(CHIP)
    after = list(model.parameters())
    assert len(after) == len(before) == 1
    assert after[0] is before[0] and model.head.weight is model.embed.weight
    assert model.embed.weight.device.type == CHIP
    model.to("cpu")
    assert model.head.weight is model.embed.weight and model.embed.weight.device.type == "cpu"


def test_set_data_between_cpu_and_chip():
    parameter = nn.Parameter(torch.zeros(3, dtype=FLOAT))
    parameter.data = torch.ones(3, dtype=FLOAT, device=CHIP)
    assert isinstance(parameter, nn.Parameter) and parameter.device.type == CHIP
    assert torch.equal(parameter.detach().cpu(), torch.ones(3, dtype=FLOAT))
    parameter.data = torch.full((2,), 2.0, dtype=FLOAT)
    assert parameter.device.type == "cpu" and parameter.tolist() == [2.0, 2.0]


def test_shallow_copy_compatibility_is_answered():
    on_chip = torch.ones(2, dtype=FLOAT, device=CHIP)
    assert torch._has_compatible_shallow_copy_type(on_chip, torch.ones(2, dtype=FLOAT))
    assert torch._has_compatible_shallow_copy_type(torch.ones(2, dtype=FLOAT), on_chip)
    assert not torch._has_compatible_shallow_copy_type(on_chip, torch.ones(2, 2, dtype=FLOAT).to_sparse())


def test_forked_child_raises_instead_of_hanging():
    result = run_script(f"""
        import os, torch
        (torch.ones(4, dtype=torch.{FLOAT_NAME}, device="{CHIP}") * 3).cpu()
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                (torch.ones(4, dtype=torch.{FLOAT_NAME}, device="{CHIP}") * 3).cpu()
            except RuntimeError as error:
                code = 0 if "Cannot re-initialize {CHIP} in forked subprocess" in str(error) else 4
            if not torch.{CHIP}._is_in_bad_fork():
                code = 5
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        print("parent", (torch.ones(2, dtype=torch.{FLOAT_NAME}, device="{CHIP}") + 1).cpu().tolist())
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "child 0" in result.stdout and "parent [2.0, 2.0]" in result.stdout, result.stdout + result.stderr


def test_fork_dataloader_workers_after_chip_use():
    # Workers forked from a process that used the chip: they never touch it (seeding skips a
    # chip in a bad fork), batches are pinned in the parent and moved to the chip there.
    result = run_script(f"""
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        (torch.ones(4, dtype=torch.{FLOAT_NAME}, device="{CHIP}") * 2).cpu()
        data = TensorDataset(torch.arange(64, dtype=torch.{FLOAT_NAME}).view(32, 2))
        loader = DataLoader(data, batch_size=8, num_workers=2, multiprocessing_context="fork", pin_memory=True)
        total = sum(batch.to("{CHIP}").sum().item() for (batch,) in loader)
        print("total", total)
    """, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "total 2016.0" in result.stdout, result.stdout + result.stderr


def test_empty_host_cache_after_chip_use():
    result = run_script(f"""
        import torch
        x = torch.ones(64, dtype=torch.{FLOAT_NAME}, device="{CHIP}")
        pinned = torch.ones(64, dtype=torch.{FLOAT_NAME}).pin_memory()
        x.copy_(pinned, non_blocking=True)
        torch.{CHIP}.synchronize()
        del pinned
        torch.{CHIP}.empty_host_cache()
        if hasattr(torch.accelerator, "empty_host_cache"):  # torch >= 2.12
            torch.accelerator.empty_host_cache()
        torch.accelerator.empty_cache()
        print("ok", x.sum().item())
    """)
    assert result.returncode == 0, result.stderr
    assert "ok 64.0" in result.stdout


def test_serialization_round_trip(tmp_path):
    # OpenReg's test_serialization: tensors and a module's state on the chip, saved and loaded.
    x = torch.randn(4, 3).to(FLOAT).to(CHIP)
    model = nn.Linear(3, 2, dtype=FLOAT).to(CHIP)
    torch.save({"x": x, "view": x[1:, ::2], "state": model.state_dict()}, tmp_path / "saved.pt")
    loaded = torch.load(tmp_path / "saved.pt")
    assert loaded["x"].device == x.device and torch.equal(loaded["x"].cpu(), x.cpu())
    assert torch.equal(loaded["view"].cpu(), x[1:, ::2].cpu())
    assert all(t.device.type == CHIP for t in loaded["state"].values())
    on_cpu = torch.load(tmp_path / "saved.pt", map_location="cpu")
    assert on_cpu["x"].device.type == "cpu" and torch.equal(on_cpu["x"], x.cpu())


def test_storage_of_a_chip_tensor():
    # OpenReg's test_storage: the untyped storage lives on the chip, is shared by views and resizes there.
    x = torch.arange(6, dtype=FLOAT).to(CHIP)
    storage = x.untyped_storage()
    assert storage.device == x.device and storage.nbytes() == 6 * x.element_size()
    assert x[2:].untyped_storage().data_ptr() == storage.data_ptr()
    storage.resize_(12 * x.element_size())
    assert storage.nbytes() == 12 * x.element_size()
    assert torch.equal(x.cpu(), torch.arange(6, dtype=FLOAT))
    assert storage.cpu().device.type == "cpu"


def test_backward_from_several_threads():
    # OpenReg's autograd-thread tests: backwards on the chip from threads of their own.
    import threading

    errors, results = [], {}

    def run(k):
        try:
            w = torch.full((4,), float(k + 1), dtype=FLOAT, device=CHIP, requires_grad=True)
            (w * w).sum().backward()
            results[k] = w.grad.cpu()
        except Exception as error:  # reported below, with the thread's number
            errors.append((k, repr(error)))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for k in range(4):
        assert torch.equal(results[k], torch.full((4,), 2.0 * (k + 1), dtype=FLOAT))


def test_threads_with_side_streams_compute_and_copy_exactly():
    # One thread per device and side stream (two per device): fill, compute, copy to the
    # other device where there is one, check exactly. Catches launches that share state
    # across threads (Triton's interpreter did) and copies unordered against side streams.
    import threading

    count = device_module.device_count()
    failures = []

    def run(k):
        device = k % count
        other = f"{CHIP}:{(device + 1) % count}"
        device_module.set_device(device)
        stream = device_module.Stream()
        try:
            for i in range(3):
                n = 20_000 + 7_919 * (k + 4 * i)
                value = float((k * 37 + i) % 100)
                with device_module.stream(stream):
                    t = torch.full((n,), value, dtype=FLOAT, device=f"{CHIP}:{device}")
                    negated = t.neg()
                stream.synchronize()
                moved = negated.to(other)
                ok = bool(moved.eq(-value).all().item()) and bool((moved.cpu() == -value).all())
                if not ok:
                    failures.append((k, i, n))
        except Exception as error:  # reported below, with the thread's number
            failures.append((k, repr(error)[:300]))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_device_properties_and_capability():
    properties = device_module.get_device_properties(0)
    assert properties.name == SPEC.DESCRIPTION
    assert properties.total_memory == device_module.mem_get_info(0)[1] > 0
    assert (properties.major, properties.minor) == device_module.get_device_capability(0) == SPEC.CAPABILITY
    assert properties.type == CHIP
    assert torch.accelerator.get_device_capability(0)["supported_dtypes"] == DTYPES
    with pytest.raises(AssertionError, match="Invalid device id"):
        device_module.get_device_properties(device_module.device_count())


def test_memory_summary_snapshot_and_peak_reset():
    device_module.empty_cache()
    x = torch.empty(1 << 16, dtype=FLOAT, device=CHIP)
    summary = device_module.memory_summary()
    assert f"{CHIP.upper()} memory summary, device ID 0" in summary and "Allocated memory" in summary
    segments = [s for s in device_module.memory_snapshot() if s["device"] == x.device.index]
    blocks = [b for s in segments for b in s["blocks"] if b["state"] == "active_allocated"]
    assert any(b["address"] == x.data_ptr() and b["requested_size"] == x.numel() * x.element_size() for b in blocks)
    assert all(s["total_size"] == sum(b["size"] for b in s["blocks"]) for s in segments)
    del x
    device_module.reset_max_memory_allocated()
    assert device_module.max_memory_allocated() == device_module.memory_allocated()


def test_per_process_memory_fraction():
    total = device_module.mem_get_info(0)[1]
    device_module.empty_cache()
    device_module.set_per_process_memory_fraction(0.5, 0)
    try:
        assert device_module.get_per_process_memory_fraction(0) == 0.5
        size = FLOAT.itemsize
        with pytest.raises(torch.OutOfMemoryError, match="set_per_process_memory_fraction"):
            torch.empty(int(total * 0.6) // size, dtype=FLOAT, device=f"{CHIP}:0")
        assert torch.empty(int(total * 0.1) // size, dtype=FLOAT, device=f"{CHIP}:0").numel() > 0
    finally:
        device_module.set_per_process_memory_fraction(1.0, 0)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        device_module.set_per_process_memory_fraction(1.5, 0)


def test_stream_context_and_queries():
    stream = device_module.Stream()
    before = device_module.current_stream()
    with device_module.StreamContext(stream):
        assert device_module.current_stream() == stream
    assert device_module.current_stream() == before
    with device_module.stream(stream):
        assert device_module.current_stream() == stream
    assert device_module.OutOfMemoryError is torch.OutOfMemoryError
    assert device_module.get_sync_debug_mode() == 0
    assert not device_module.can_device_access_peer(0, 0)
    generators = device_module.default_generators
    assert len(generators) == device_module.device_count()
    assert all(g.device == torch.device(CHIP, i) for i, g in enumerate(generators))
    torch.manual_seed(123)
    state = generators[0].get_state()
    torch.manual_seed(123)
    assert torch.equal(generators[0].get_state(), state)


if SPEC.AMP_DTYPES:
    def test_amp_submodule():
        a = torch.randn(4, 4, dtype=FLOAT, device=CHIP)
        with device_module.amp.autocast():
            assert torch.is_autocast_enabled(CHIP)
            assert torch.get_autocast_dtype(CHIP) == getattr(torch, SPEC.AMP_DEFAULT_DTYPE)
        scaler = device_module.amp.GradScaler()
        assert scaler._device == CHIP
        assert a.dtype == FLOAT


# (where the routing table sends the fused LSTM cell to Triton)
if routes.route(SPEC, "_thnn_fused_lstm_cell").path == "triton":
    @pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU], ids=lambda c: c.__name__)
    def test_fused_rnn_cells_match_cpu(cell):
        torch.manual_seed(0)
        reference = cell(8, 16, num_layers=2, batch_first=True, dtype=FLOAT)
        inputs = torch.randn(3, 5, 8, dtype=FLOAT, requires_grad=True)
        out, _ = reference(inputs)
        out.square().sum().backward()
        model = cell(8, 16, num_layers=2, batch_first=True, dtype=FLOAT).to(CHIP)
        model.load_state_dict(reference.state_dict())
        chip_inputs = inputs.detach().to(CHIP).requires_grad_()
        chip_out, _ = model(chip_inputs)
        chip_out.square().sum().backward()
        tolerance = dict(atol=1e-4, rtol=1e-4) if FLOAT == torch.float32 else dict(atol=2e-2, rtol=2e-2)
        torch.testing.assert_close(chip_out.cpu(), out, **tolerance)
        torch.testing.assert_close(chip_inputs.grad.cpu(), inputs.grad, **tolerance)
        for (name, expected), actual in zip(reference.named_parameters(), model.parameters()):
            torch.testing.assert_close(actual.grad.cpu(), expected.grad, **tolerance, msg=name)


# torch passes conjugated and negated views (lazy flags on a view) through to the backend for
# a few ops (its Conjugate/Negative fallthrough lists: the matmuls, dot, triangular solve,
# repeat_interleave, clone, copy_); kernels that read raw memory must apply the flags.
MATH_BIT_CASES = {
    "mm": lambda a, b, c: torch.mm(a, b),
    "addmm": lambda a, b, c: torch.addmm(c, a, b),
    "bmm": lambda a, b, c: torch.bmm(a.unsqueeze(0), b.unsqueeze(0)),
    "baddbmm": lambda a, b, c: torch.baddbmm(c.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0)),
    "dot": lambda a, b, c: torch.dot(a[0], b[:, 0]),
    "solve_triangular": lambda a, b, c: torch.linalg.solve_triangular(
        torch.eye(3, dtype=a.dtype, device=a.device) * 4 + a.triu(), b, upper=True),
    "repeat_interleave_expanded": lambda a, b, c: a[:1].expand(3, 3).repeat_interleave(2, dim=0),
    "clone_expanded": lambda a, b, c: a[:1].expand(3, 3).clone(),
}


def _math_bit_operands(dtype, flag):
    generator = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(3, 3, generator=generator).to(dtype) for _ in range(3))
    if dtype.is_complex:
        a, b, c = (x + 1j * torch.randn(3, 3, generator=generator).to(dtype) for x in (a, b, c))
    chip = tuple(x.to(CHIP) for x in (a, b, c))
    return (a, b, c), tuple(flag(x) for x in chip), tuple(flag(x) for x in (a, b, c))


@pytest.mark.parametrize("case", sorted(MATH_BIT_CASES))
def test_negative_views_reach_kernels_resolved(case):
    _, chip, host = _math_bit_operands(FLOAT, torch._neg_view)
    assert chip[0].is_neg()
    try:
        expected = MATH_BIT_CASES[case](*host)
    except (NotImplementedError, RuntimeError):  # not for this dtype on the CPU (e.g. float16)
        with pytest.raises((NotImplementedError, RuntimeError)):
            MATH_BIT_CASES[case](*chip)
        return
    tolerance = dict(atol=1e-4, rtol=1e-4) if FLOAT == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(MATH_BIT_CASES[case](*chip).cpu(), expected.resolve_neg(), **tolerance)


if "complex64" in SPEC.DTYPES:
    @pytest.mark.parametrize("case", sorted(MATH_BIT_CASES) + ["vdot", "cov", "corrcoef"])
    def test_conjugate_views_reach_kernels_resolved(case):
        cases = {**MATH_BIT_CASES, "vdot": lambda a, b, c: torch.vdot(a[0], b[:, 0]),
                 "cov": lambda a, b, c: torch.cov(a), "corrcoef": lambda a, b, c: torch.corrcoef(a)}
        _, chip, host = _math_bit_operands(torch.complex64, torch.conj)
        assert chip[0].is_conj()
        expected = cases[case](*host)
        torch.testing.assert_close(cases[case](*chip).cpu(), expected.resolve_conj(), atol=1e-4, rtol=1e-4)

    @pytest.mark.parametrize("op", [torch.exp, torch.log, torch.sigmoid, torch.rsqrt, torch.acos])
    def test_zero_element_complex_results_keep_their_dtype(op):
        # Triton has no complex types: even a call that launches nothing must not answer in float.
        x = torch.zeros(1, 0, 3, dtype=torch.complex64, device=CHIP)
        assert op(x).dtype == op(x.cpu()).dtype == torch.complex64
        assert torch.cumprod(x, 1).dtype == torch.complex64


SCALAR_CASES = {
    "mul_float": lambda t: t * 0.5, "add_int": lambda t: t + 2, "div_int": lambda t: t / 2,
    "mul_bool": lambda t: t * True, "add_0dim_tensor": lambda t: t + torch.tensor(2.0),
    "mul_": lambda t: t.clone().mul_(3), "add_": lambda t: t.clone().add_(2),
}


@pytest.mark.parametrize("case", sorted(SCALAR_CASES))
@pytest.mark.parametrize("shape", [(), (3,)], ids=["0dim", "1dim"])
def test_python_numbers_promote_as_on_the_cpu(case, shape):
    # A Python number takes part in type promotion only by its category: a 0-dim float16
    # loss times 0.5 stays float16, a 0-dim int32 count plus 2 stays int32.
    for dtype in sorted(DTYPES, key=str):
        host = torch.ones(shape, dtype=dtype)
        try:
            expected = SCALAR_CASES[case](host)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                SCALAR_CASES[case](host.to(CHIP))
            continue
        if expected.dtype not in DTYPES:
            continue
        actual = SCALAR_CASES[case](host.to(CHIP))
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), f"{dtype} {case}"
        torch.testing.assert_close(actual.cpu(), expected)


if "bool" in SPEC.DTYPES:
    def test_bool_subtraction_raises_at_the_call_and_the_chip_stays_usable():
        flags = torch.ones(3, dtype=torch.bool, device=CHIP)
        for operand in (1, flags, torch.tensor(True)):
            with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with"):
                flags - operand
        device_module.synchronize()
        assert (torch.ones(2, dtype=FLOAT, device=CHIP) * 2).cpu().tolist() == [2, 2]


# (index tensors are int64: a chip without it has no index_add)
@pytest.mark.parametrize("dtype_name", [d for d in ("int8", "uint8", "int16", "bool")
                                        if getattr(torch, d) in DTYPES and torch.int64 in DTYPES])
def test_index_add_and_scatter_add_on_small_integers_wrap_as_on_the_cpu(dtype_name):
    dtype = getattr(torch, dtype_name)
    value = 1 if dtype == torch.bool else 100
    x, src = torch.full((3,), value, dtype=dtype), torch.full((4,), value, dtype=dtype)
    index = torch.tensor([0, 0, 1, 0])
    assert torch.equal(x.to(CHIP).index_add(0, index.to(CHIP), src.to(CHIP)).cpu(), x.index_add(0, index, src))
    assert torch.equal(torch.scatter_add(x.to(CHIP), 0, index[:3].to(CHIP), src[:3].to(CHIP)).cpu(),
                       torch.scatter_add(x, 0, index[:3], src[:3]))


LAYOUT_CASES = {
    "mul by a number": lambda x, y: x * 2, "add, both transposed": lambda x, y: x + y,
    "add, transposed and contiguous": lambda x, y: x + y.contiguous(), "add a broadcast row": lambda x, y: x + y[:, :1],
    "relu": lambda x, y: torch.relu(x), "neg": lambda x, y: -x, "sin": lambda x, y: torch.sin(x),
    "where": lambda x, y: torch.where(x > 0, x, y), "cat": lambda x, y: torch.cat([x, y], -1),
}


@pytest.mark.parametrize("case", sorted(LAYOUT_CASES))
def test_results_are_laid_out_as_on_the_cpu(case):
    # A transformer's heads are a transposed view; an op on them (rotary embeddings) gives a
    # transposed result on the CPU and CUDA, and torch's meta functions say so: a compiled graph
    # views it back without a copy, which a result of another layout refuses.
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(2, 5, 3, 4, generator=g).to(FLOAT).transpose(1, 2) for _ in range(2))
    expected = LAYOUT_CASES[case](x, y)
    actual = LAYOUT_CASES[case](x.to(CHIP), y.to(CHIP))
    assert actual.stride() == expected.stride(), case
    torch.testing.assert_close(actual.cpu(), expected)


def test_op_without_a_cpu_kernel_raises_located_error():
    # aten::_fused_dropout exists for CUDA only: the CPU step of a chain cannot run it.
    x = torch.ones(8, dtype=FLOAT, device=CHIP)
    with pytest.raises(NotImplementedError, match=rf"aten::_fused_dropout is not supported on chip '{CHIP}' "
                                                  r"\(spec .*\): .*torch has no CPU kernel for it"):
        torch._fused_dropout(x, 0.5)


# The tests a chip suite's test_torch_api.py imports: those defined for this chip.
__all__ = [name for name in (
    "test_module_to_chip_keeps_parameters_and_ties", "test_set_data_between_cpu_and_chip",
    "test_shallow_copy_compatibility_is_answered", "test_forked_child_raises_instead_of_hanging",
    "test_fork_dataloader_workers_after_chip_use", "test_empty_host_cache_after_chip_use",
    "test_serialization_round_trip", "test_storage_of_a_chip_tensor", "test_backward_from_several_threads",
    "test_threads_with_side_streams_compute_and_copy_exactly", "test_device_properties_and_capability",
    "test_memory_summary_snapshot_and_peak_reset", "test_per_process_memory_fraction",
    "test_stream_context_and_queries", "test_amp_submodule", "test_fused_rnn_cells_match_cpu",
    "test_negative_views_reach_kernels_resolved", "test_conjugate_views_reach_kernels_resolved",
    "test_zero_element_complex_results_keep_their_dtype", "test_python_numbers_promote_as_on_the_cpu",
    "test_bool_subtraction_raises_at_the_call_and_the_chip_stays_usable",
    "test_index_add_and_scatter_add_on_small_integers_wrap_as_on_the_cpu",
    "test_results_are_laid_out_as_on_the_cpu", "test_op_without_a_cpu_kernel_raises_located_error",
) if name in globals()]
