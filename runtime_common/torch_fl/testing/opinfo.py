"""torch's whole op_db on a generated chip against the CPU, with the path every aten op took.

The OpInfo tests of every chip suite, written once: a chip's tests/test_opinfo.py imports them
(after its conftest.py configured torch_fl.testing.suite), and its docstring says how to run them.
One test per OpInfo (name + variant) and dtype, e.g. `nn.functional.conv2d-float32`,
`div.floor_rounding-float32`. Each runs at most MAX_SAMPLES sample inputs on the CPU and on the
chip and compares (forward; and backward, the gradient of the sum of the outputs, when the OpInfo
supports autograd and the dtype is floating). It also asserts that every aten op the chip ran
took a path the spec allows (a vendor op on "vendor"; an op on "cpu" only when its chain has cpu).
"""
import hashlib
import itertools
import json
import os
import signal
from pathlib import Path

import pytest
import torch
from torch.utils import _pytree as pytree

from torch_fl import env, routes
from torch_fl.divergence import RANDOM_OPS
from torch_fl.testing import suite

__all__ = ["test_opinfo"]

_suite = suite.chip()  # configured by the chip's conftest.py, imported before any test module
chip_spec = _suite.spec
CHIP = chip_spec.CHIP
# TORCH_FL_OPINFO_DEVICE=I puts the samples on device I while device 0 stays current: every op
# must then run on its operands' device (its stream, its memory), not on the current one.
_DEVICE_INDEX = env.get("OPINFO_DEVICE")
TARGET = f"{CHIP}:{int(_DEVICE_INDEX)}" if _DEVICE_INDEX else CHIP
MAX_SAMPLES = 8
TEST_TIMEOUT_S = int(env.get("OPINFO_TIMEOUT", "120"))
TOLERANCES = {torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7), torch.float16: (1e-3, 1e-3),
              torch.bfloat16: (1.6e-2, 1e-2), torch.complex64: (1.3e-6, 1e-5), torch.complex128: (1e-7, 1e-7),
              torch.complex32: (1e-3, 1e-3)}
SWEEP_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "bool")
CHIP_DTYPES = list(chip_spec.DTYPES)

# Uninitialised results: only their metadata (shape, dtype, strides, device) is defined.
UNINITIALISED = frozenset([
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
])
# Random results: compared after seeding both devices alike; they pass when the chip's
# generator reproduces the CPU's stream, and are recorded as not comparable otherwise.
RANDOM = frozenset([
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal", "uniform",
    "rand_like", "randint", "randint_like", "randn", "randn_like",
    "nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
])


# Ops whose indices are unspecified among equal elements (sorts unless stable=True): their
# indices are compared by the input values they select (a sort's also as a permutation), not
# number for number. Value: the position of `dim` among the sample's args.
TIES_UNORDERED = {"sort": 0, "argsort": 0, "topk": 1, "kthvalue": 1, "median": 0, "nanmedian": 0, "mode": 0}


def allowed_paths(op):
    """The paths the spec allows for aten op `op` ("name.overload"): the routing table's."""
    return routes.allowed_paths(chip_spec, op)


def declared_path(op):
    return routes.route(chip_spec, op).path


def mode():
    return env.get("OPINFO", "").strip().lower() or "full"


def _key(info):
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


def _dtypes_for(info):
    wanted = env.get("OPINFO_DTYPES")
    names = [d.strip() for d in wanted.split(",") if d.strip()] if wanted else SWEEP_DTYPES
    cpu = info.supported_dtypes("cpu")
    return [name for name in names if name in CHIP_DTYPES and getattr(torch, name, None) in cpu]


def baseline_path():
    """The last committed sweep: TORCH_FL_OPINFO_BASELINE, or docs/ops/<chip>.json above here."""
    given = env.get("OPINFO_BASELINE")
    if given:
        return Path(given)
    for folder in _suite.tests_dir.resolve().parents:
        candidate = folder / "docs" / "ops" / f"{CHIP}.json"
        if candidate.is_file():
            return candidate
    return None


def _sample_selection():
    """(op key, dtype) pairs of a deterministic subset of the OpInfos that passed in the baseline."""
    path = baseline_path()
    if path is None:
        raise RuntimeError(f"TORCH_FL_OPINFO=sample needs the last sweep (docs/ops/{CHIP}.json); "
                           "none found (set TORCH_FL_OPINFO_BASELINE)")
    data = json.loads(path.read_text(encoding="utf-8"))
    passing = {}
    for key, entry in data["ops"].items():
        dtypes = [d for d, r in entry["dtypes"].items() if r["outcome"] == "pass"]
        if dtypes and entry["status"] in ("basic", "strict"):
            passing[key] = dtypes
    count = int(env.get("OPINFO_SAMPLE", "40"))
    ranked = sorted(passing, key=lambda k: hashlib.sha256(k.encode()).hexdigest())[:count]
    return {(k, d) for k in ranked for d in passing[k]}


def _shard():
    """TORCH_FL_OPINFO_SHARD=I/N: the I-th of N interleaved parts of the sweep (0 <= I < N),
    for running a sweep in N processes, each with its own TORCH_FL_OPINFO_RESULTS."""
    text = env.get("OPINFO_SHARD", "").strip()
    if not text:
        return 0, 1
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise ValueError(f"TORCH_FL_OPINFO_SHARD={text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
    return int(index), int(count)


def _cases():
    from torch.testing._internal.common_methods_invocations import op_db

    selection = _sample_selection() if mode() == "sample" else None
    index, count = _shard()
    cases = []
    for info in op_db:
        for dtype in _dtypes_for(info):
            if selection is None or (_key(info), dtype) in selection:
                cases.append(pytest.param(info, dtype, id=f"{_key(info)}-{dtype}"))
    return cases[index::count]


CASES = _cases()


# -- running samples --------------------------------------------------------------------------

def _is_cpu_device(value):
    return (isinstance(value, str) and value == "cpu") or (isinstance(value, torch.device) and value.type == "cpu")


def to_chip(value):
    """The sample's value on the chip: tensors (nested in lists, tuples, dicts) moved, a CPU
    device argument (`x.to("cpu")`) replaced by the chip, other leaves kept."""
    def move(x):
        if isinstance(x, torch.Tensor):
            moved = _move_keeping_storage(x) if _is_partial_view(x) else x.detach().to(TARGET)
            return moved.requires_grad_(x.requires_grad) if x.requires_grad else moved
        return TARGET if _is_cpu_device(x) else x
    return pytree.tree_map(move, value)


def _is_partial_view(x):
    """A strided view into a larger storage (as_strided samples depend on the whole storage)."""
    if x.layout != torch.strided or x.is_conj() or x.is_neg() or x.numel() == 0:
        return False
    return x.storage_offset() != 0 or x.untyped_storage().nbytes() > x.numel() * x.element_size()


def _move_keeping_storage(x):
    """x on the chip with the same storage contents, offset and strides."""
    count = x.untyped_storage().nbytes() // x.element_size()
    flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (count,), (1,))
    return flat.to(TARGET).as_strided(x.shape, x.stride(), x.storage_offset()).detach()


def host_arguments_error(error):
    """ATen asks for some arguments on the host (tensor_split's indices): the call is then
    repeated with only the sample's input on the chip, as a user would write it."""
    return isinstance(error, RuntimeError) and "to be on cpu" in str(error)


def assert_same_metadata(actual, expected, where):
    actual, expected = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    assert len(actual) == len(expected), f"{where}: {len(actual)} results, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if isinstance(e, torch.Tensor):
            wanted = CHIP if e.device.type == "cpu" else e.device.type  # as in assert_same
            assert isinstance(a, torch.Tensor) and a.device.type == wanted, f"{where}[{i}]: not a tensor on {wanted}"
            assert (a.shape, a.dtype, a.stride()) == (e.shape, e.dtype, e.stride()), \
                f"{where}[{i}]: {tuple(a.shape)} {a.dtype} {a.stride()} != {tuple(e.shape)} {e.dtype} {e.stride()}"


def chip_kwargs(kwargs):
    out = {}
    for name, value in kwargs.items():
        out[name] = TARGET if name == "device" and _is_cpu_device(value) else to_chip(value)
    return out


def assert_same(actual, expected, where="output", reference=None, accepted=None):
    """actual (the chip's) == expected (the CPU's) within TOLERANCES. With `reference`, the
    same structure computed on the CPU in float64, a floating result outside TOLERANCES still
    passes when it is no less accurate than the CPU's (no_less_accurate); `accepted` collects
    where that rule was used."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: {type(actual).__name__}, not a tensor"
        if expected.layout != torch.strided:
            expected, actual = expected.to_dense(), actual.to_dense()
        # A sample that names a device other than the CPU (a `*_like` with device="cuda", where
        # torch sees a GPU) asks for that device on both runs; every other result is the chip's.
        wanted = CHIP if expected.device.type == "cpu" else expected.device.type
        assert actual.device.type == wanted, f"{where}: result on {actual.device}, not on {wanted}"
        rtol, atol = TOLERANCES.get(expected.dtype, (0, 0))
        try:
            torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=rtol, atol=atol,
                                       equal_nan=True, check_device=False, msg=lambda m: f"{where}: {m}")
        except AssertionError:
            if not (isinstance(reference, torch.Tensor) and no_less_accurate(actual, expected, reference)):
                raise
            accepted.append(where)
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), \
            f"{where}: {type(actual).__name__} of {len(actual) if hasattr(actual, '__len__') else '?'}, " \
            f"expected {len(expected)}"
        references = reference if isinstance(reference, (list, tuple)) and len(reference) == len(expected) \
            else [None] * len(expected)
        for i, (a, e, r) in enumerate(zip(actual, expected, references)):
            assert_same(a, e, f"{where}[{i}]", r, accepted)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), f"{where}: keys differ"
        for k in expected:
            r = reference.get(k) if isinstance(reference, dict) else None
            assert_same(actual[k], expected[k], f"{where}[{k!r}]", r, accepted)
    elif isinstance(expected, float) and expected != expected:
        assert actual != actual, f"{where}: {actual!r} != nan"
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-6, abs=1e-6), f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def no_less_accurate(actual, expected, reference):
    """The rule Inductor checks its kernels by (torch._dynamo.utils.same with a float64
    reference), tightened: against `reference` (the op computed on the CPU in float64), the
    chip's RMS error is at most 2x the CPU's (3x for 16-bit floats) and its largest error at
    most 4x the CPU's largest, each plus a tenth of the dtype's atol. Non-finite values must
    match exactly. A result that differs from the CPU's only by rounding (another summation
    order, a fused multiply-add) passes; a wrong one does not."""
    if reference.dtype not in (torch.float64, torch.complex128) or actual.dtype != expected.dtype:
        return False
    if not (expected.is_floating_point() or expected.is_complex()) or expected.shape != reference.shape:
        return False
    a, e = actual.detach().cpu().to(reference.dtype), expected.detach().to(reference.dtype)
    r = reference.detach().to_dense() if reference.layout != torch.strided else reference.detach()
    if a.shape != e.shape or not torch.equal(torch.isfinite(a), torch.isfinite(e)):
        return False
    finite = torch.isfinite(a)
    try:
        torch.testing.assert_close(a[~finite], e[~finite], rtol=0, atol=0, equal_nan=True)
    except AssertionError:
        return False
    finite &= torch.isfinite(r)
    if not finite.any():
        return True
    chip, cpu = (a[finite] - r[finite]).abs(), (e[finite] - r[finite]).abs()
    tol = TOLERANCES[expected.dtype][1] / 10
    multiplier = 3.0 if expected.dtype in (torch.float16, torch.bfloat16) else 2.0
    rms = lambda errors: errors.square().mean().sqrt().item()  # noqa: E731
    return rms(chip) <= multiplier * rms(cpu) + tol and chip.max().item() <= 4 * cpu.max().item() + tol


def _widened(value, integers=False):
    """The sample's floating tensors in float64 (complex in complex128), for the reference;
    with `integers`, its integer tensors too (an op on integers with a floating result, e.g.
    polygamma of int8, computes in floating point anyway)."""
    def widen(x):
        if not isinstance(x, torch.Tensor):
            return x
        if x.is_floating_point() or x.is_complex() or (integers and x.dtype != torch.bool):
            wide = x.detach().to(torch.complex128 if x.is_complex() else torch.float64)
            return wide.requires_grad_(x.requires_grad)
        return x
    return pytree.tree_map(widen, value)


def _grad_inputs(args):
    return [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor) and t.requires_grad]


def _sum_of_outputs(out):
    parts = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not parts:
        return None
    total = 0
    for t in parts:
        total = total + (t.real.sum() if t.is_complex() else t.sum())
    return total


def _gradients(out, inputs):
    total = _sum_of_outputs(out)
    if total is None or not inputs:
        return None
    return torch.autograd.grad(total, inputs, allow_unused=True)


def _merge(into, stats):
    for op, paths in stats.items():
        for path, calls in paths.items():
            if calls:
                into.setdefault(op, {}).setdefault(path, 0)
                into[op][path] += calls


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout(f"test took more than {TEST_TIMEOUT_S} s")


def by_selection(name, sample, actual, expected, where):
    """(actual, expected) with each index tensor of a TIES_UNORDERED op replaced by the input
    values it selects, after checking that a sort's indices permute each row."""
    x = sample.input
    if name not in TIES_UNORDERED or sample.kwargs.get("stable") or not isinstance(x, torch.Tensor) or x.dim() == 0:
        return actual, expected
    pair = isinstance(expected, tuple) and len(expected) == 2
    if not pair and name != "argsort":
        return actual, expected  # values only (median() of the whole tensor)
    cpu_indices = expected[1] if pair else expected
    position = TIES_UNORDERED[name]
    dim = sample.args[position] if len(sample.args) > position else sample.kwargs.get("dim", -1)
    dim %= x.dim()
    chip_indices = (actual[1] if pair else actual).cpu()
    if name in ("sort", "argsort"):
        rows = torch.arange(x.shape[dim]).view([-1 if d == dim else 1 for d in range(x.dim())])
        assert torch.equal(torch.sort(chip_indices, dim=dim).values, rows.expand_as(chip_indices)), \
            f"{where}: the chip's indices are not a permutation along dim {dim}"
    reduced = cpu_indices.dim() < x.dim()  # keepdim=False removed `dim`

    def select(indices):
        chosen = x.gather(dim, indices.unsqueeze(dim) if reduced else indices)
        return chosen.squeeze(dim) if reduced else chosen

    chosen, reference = select(chip_indices).to(CHIP), select(cpu_indices)
    if pair:
        return (actual[0], chosen), (expected[0], reference)
    return chosen, reference


def _on_meta(info, sample):
    """The sample's outputs on the meta device, or None where the op has no meta kernel for it."""
    on_meta = lambda x: x.detach().to("meta") if isinstance(x, torch.Tensor) else x  # noqa: E731
    try:
        out = info.op(*pytree.tree_map(on_meta, (sample.input, *sample.args)), **pytree.tree_map(on_meta, sample.kwargs))
        return sample.output_process_fn_grad(out)
    except Exception:  # noqa: BLE001 - no meta answer: the CPU's metadata is the one to match
        return None


def as_devices_give(info, sample, actual, expected, where, record):
    """(actual, expected) where torch defines an output otherwise on devices than on the CPU.
    Its meta function is torch's word for every device but the CPU: layer and batch norm's saved
    statistics in float32 for half-precision inputs (the CPU: the input's dtype), batch norm's
    saved statistics computed in evaluation too (the CPU: empty). An output whose shape and
    dtype differ from the CPU's and equal the meta function's is compared in the chip's dtype
    (the CPU's values converted; the float64 rule judges the rounding), or, where the CPU's is
    empty, not compared; the record lists each such output."""
    chip_leaves, chip_tree = pytree.tree_flatten(actual)
    cpu_leaves, cpu_tree = pytree.tree_flatten(expected)
    if chip_tree != cpu_tree:
        return actual, expected
    meta = lambda t: (tuple(t.shape), t.dtype)  # noqa: E731
    differs = [i for i, (a, e) in enumerate(zip(chip_leaves, cpu_leaves))
               if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and meta(a) != meta(e)]
    if not differs:
        return actual, expected
    meta_leaves, meta_tree = pytree.tree_flatten(_on_meta(info, sample))
    if meta_tree != cpu_tree:
        return actual, expected
    for i in differs:
        a, e, m = chip_leaves[i], cpu_leaves[i], meta_leaves[i]
        if not isinstance(m, torch.Tensor) or meta(m) != meta(a):
            continue  # the chip's own: assert_same reports it
        if a.shape == e.shape:
            cpu_leaves[i] = e.to(a.dtype)
            note = f"{where}[{i}]: {a.dtype} as on devices ({e.dtype} on the CPU), compared in {a.dtype}"
        elif e.numel() == 0:
            chip_leaves[i] = cpu_leaves[i] = None
            note = f"{where}[{i}]: {tuple(a.shape)} as on devices (empty on the CPU), not compared"
        else:
            continue
        record.setdefault("device_outputs", []).append(note)
    return pytree.tree_unflatten(chip_leaves, chip_tree), pytree.tree_unflatten(cpu_leaves, cpu_tree)


class _Reference:
    """One sample computed on the CPU in float64 (forward outputs, then gradients), only when
    a comparison needs it; None where float64 does not apply or the op refuses it."""

    def __init__(self, info, sample, index):
        self.info, self.sample, self.index = info, sample, index
        self._out, self._grads = None, None

    def forward(self):
        if self._out is None:
            self._out = (None,)
            for integers in (False, True):
                args = _widened((self.sample.input, *self.sample.args), integers)
                kwargs = _widened(self.sample.kwargs, integers)
                try:
                    torch.manual_seed(self.index)
                    out = self.sample.output_process_fn_grad(self.info.op(*args, **kwargs))
                except Exception:  # noqa: BLE001 - no float64 reference this way
                    continue
                self._out = (out, args)
                if all(t.dtype in (torch.float64, torch.complex128)
                       for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()):
                    break
        return self._out[0]

    def grads(self):
        if self._grads is None:
            out = self.forward()
            grads = None
            if out is not None:
                try:
                    grads = _gradients(out, _grad_inputs(self._out[1]))
                except Exception:  # noqa: BLE001
                    grads = None
            self._grads = grads or [None] * 64
        return self._grads


def compare(actual, expected, where, reference, record):
    """assert_same, then, for a mismatch, again with the float64 `reference()` (no_less_accurate);
    the record lists where the second rule decided."""
    try:
        assert_same(actual, expected, where)
    except AssertionError:
        accepted = []
        assert_same(actual, expected, where, reference(), accepted)
        record.setdefault("accuracy_rule", []).extend(accepted)


def run_case(info, dtype, record):
    """Every (bounded) sample on both devices; fills `record` (paths, samples); raises on mismatch."""
    _C = _suite.backend()

    uninitialised, random = info.name in UNINITIALISED, info.name in RANDOM
    comparable = not uninitialised
    stream_differs = None  # for random ops: the first sample whose values differ from the CPU's
    backward = info.supports_autograd and dtype.is_floating_point
    paths = record["paths"]
    torch.manual_seed(0)
    samples = list(itertools.islice(info.sample_inputs("cpu", dtype, requires_grad=backward), MAX_SAMPLES))
    assert samples, f"OpInfo {_key(info)} has no sample inputs for {dtype}"
    for index, sample in enumerate(samples):
        cpu_args = (sample.input, *sample.args)
        where = f"sample {index}"
        try:
            torch.manual_seed(index)
            expected = info.op(*cpu_args, **sample.kwargs)
            cpu_error = None
        except Exception as error:  # the CPU rejects it too: the chip must reject it as well
            expected, cpu_error = None, error
        args, kwargs = to_chip(cpu_args), chip_kwargs(sample.kwargs)
        _C.reset_fallback_stats()
        try:
            torch.manual_seed(index)
            try:
                try:
                    actual = info.op(*args, **kwargs)
                except Exception as error:
                    if not host_arguments_error(error):
                        raise
                    args = (to_chip(sample.input), *sample.args)
                    torch.manual_seed(index)
                    actual = info.op(*args, **kwargs)
            except Exception:
                if cpu_error is not None:
                    continue
                raise
            assert cpu_error is None, f"{where}: the CPU raised {type(cpu_error).__name__}: " \
                f"{str(cpu_error).splitlines()[0][:120]} but the chip did not"
            # A sample that drew random numbers on the chip (e.g. attention with dropout_p > 0) is
            # random whatever the OpInfo: compared as the random ops are.
            drew = random or any(op.split(".")[0] in RANDOM_OPS for op in _C.fallback_stats())
            if uninitialised:
                assert_same_metadata(actual, expected, f"{where} forward")
            elif drew:
                try:
                    assert_same(sample.output_process_fn_grad(actual), sample.output_process_fn_grad(expected),
                                f"{where} forward")
                except AssertionError as error:
                    stream_differs = stream_differs or f"{where}: {str(error).splitlines()[0][:160]}"
                    comparable = False
            reference = _Reference(info, sample, index)
            same_indices = True
            if comparable and not drew:
                chip_out, cpu_out = sample.output_process_fn_grad(actual), sample.output_process_fn_grad(expected)
                chip_out, cpu_out = as_devices_give(info, sample, chip_out, cpu_out, f"{where} forward", record)
                compared = by_selection(info.name, sample, chip_out, cpu_out, f"{where} forward")
                if compared[1] is not cpu_out:  # indices among ties: the gradient follows them
                    same_indices = torch.equal(pytree.tree_leaves(chip_out)[-1].cpu(), pytree.tree_leaves(cpu_out)[-1])
                compare(*compared, f"{where} forward", reference.forward, record)
            inputs = _grad_inputs(cpu_args)
            if not same_indices:
                # The chip picked other elements among equal ones: its gradient goes to those, so
                # it is not the CPU's; the forward check above proved the choice valid.
                record.setdefault("ties_backward_not_compared", []).append(where)
            elif backward and comparable and inputs:
                try:
                    expected_grads = _gradients(sample.output_process_fn_grad(expected), inputs)
                except Exception as error:  # the CPU has no backward for it: neither may the chip
                    expected_grads = None
                    try:
                        _gradients(sample.output_process_fn_grad(actual), _grad_inputs(args))
                    except Exception:  # noqa: BLE001
                        pass
                    else:
                        raise AssertionError(f"{where} backward: the CPU raised {type(error).__name__}: "
                                             f"{str(error).splitlines()[0][:120]} but the chip did not")
                if expected_grads is not None:
                    actual_grads = _gradients(sample.output_process_fn_grad(actual), _grad_inputs(args))
                    assert actual_grads is not None, f"{where} backward: the chip's outputs need no grad"
                    for i, (a, e) in enumerate(zip(actual_grads, expected_grads)):
                        if e is None:
                            continue
                        assert a is not None, f"{where} backward: no gradient for input {i}"
                        compare(a, e, f"{where} backward grad[{i}]", lambda i=i: reference.grads()[i], record)
        finally:
            _merge(paths, _C.fallback_stats())
        record["samples"] += 1
    wrong = sorted(f"{op} on {path} (spec: {declared_path(op)})"
                   for op, by_path in paths.items() for path in by_path if path not in allowed_paths(op))
    assert not wrong, "paths disagree with the spec: " + "; ".join(wrong)
    if stream_differs:
        record["outcome"] = "not_comparable"
        record["message"] = f"random output: the chip's stream differs from the CPU's ({stream_differs})"


@pytest.mark.parametrize("info,dtype_name", CASES)
def test_opinfo(info, dtype_name, opinfo_record):
    opinfo_record.update(op=info.name, variant=info.variant_test_name, dtype=dtype_name)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TEST_TIMEOUT_S)
    try:
        run_case(info, getattr(torch, dtype_name), opinfo_record)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
