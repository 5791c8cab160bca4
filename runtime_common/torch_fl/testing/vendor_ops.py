"""Every vendor kernel of a generated chip against the CPU.

Each case runs on the chip and on the CPU and compares (rtol/atol per dtype),
and asserts that the vendor kernel itself ran (its path counter moved). Where the
op is differentiable its backward is compared too, under strict mode: a backward
op that takes the CPU step fails the case instead of running there with a warning.

Written once for every chip. The cases are the generator's (generator/opinfo_map.py: how each
vendor op is checked), rendered as data into the chip suite's tests/test_vendor_ops.py, which
makes its tests with `kernel_test(CASES)` (and `checked_test(UNCHECKED)` where the generator
knows no check for some vendor op), for the chip its conftest.py configured.
"""
import pytest
import torch
import torch_fl
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_leaves

from torch_fl.testing import suite

__all__ = ["checked_test", "declined_test", "kernel_test"]

_suite = suite.chip()  # configured by the chip's conftest.py, imported before any test module
CHIP = _suite.spec.CHIP
TOLERANCES = {torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7), torch.float16: (1e-3, 1e-3),
              torch.bfloat16: (1.6e-2, 1e-2)}
OPINFO_DTYPES = [getattr(torch, _suite.float_dtype)]
OPINFOS = {}
for _info in op_db:
    OPINFOS.setdefault(_info.name, _info)


def to_chip(value):
    return value.to(CHIP) if isinstance(value, torch.Tensor) else value


def tree_map(fn, value):
    if isinstance(value, (list, tuple)):
        return type(value)(tree_map(fn, v) for v in value)
    if isinstance(value, dict):
        return {k: tree_map(fn, v) for k, v in value.items()}
    return fn(value)


def assert_same(actual, expected):
    if isinstance(expected, torch.Tensor):
        assert actual.device.type == CHIP, f"result on {actual.device}, not on the chip"
        rtol, atol = TOLERANCES.get(expected.dtype, (0, 0))
        torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol, equal_nan=True)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
    else:
        assert actual == expected


def vendor_calls(stats, op):
    return stats().get(op, {}).get("vendor", 0)


def permuted(value):
    """`value` with the same values, dense but not contiguous (strides in reverse dimension order),
    as a transposed activation or gradient is. A kernel that reads its arguments as contiguous
    gets them wrong: ATen's CPU `_log_softmax_backward_data.out` did so for a transposed gradient
    (CTC loss over `log_softmax(...).transpose(0, 1)`), where the simulated SDK's kernel used it."""
    if not isinstance(value, torch.Tensor) or value.dim() < 2:
        return value
    order = list(reversed(range(value.dim())))
    out = value.detach().permute(order).contiguous().permute(order)
    return out.requires_grad_(value.requires_grad)


LAYOUTS = {"contiguous": lambda value: value, "permuted": permuted}


def run_opinfo(info, dtype, layout="contiguous"):
    """Run every sample on both devices, backward too where differentiable; the samples compared.
    `layout` "permuted": on the chip, every tensor argument and upstream gradient of 2 or more
    dimensions permuted (`permuted`); the CPU computes the same values from the contiguous ones
    (its own kernels refuse some permuted layouts: nll_loss2d's backward)."""
    relayout = LAYOUTS[layout]
    compared = 0
    differentiable = info.supports_autograd and dtype in info.supported_backward_dtypes("cpu")
    samples = list(info.sample_inputs("cpu", dtype, requires_grad=differentiable))
    assert samples, f"OpInfo {info.name} has no samples for {dtype}"
    for sample in samples:
        cpu_args, cpu_kwargs = (sample.input, *sample.args), sample.kwargs
        chip_args = tree_map(lambda t: relayout(t).detach().to(CHIP).requires_grad_(t.requires_grad)
                             if isinstance(t, torch.Tensor) else t, cpu_args)
        chip_kwargs = tree_map(lambda value: to_chip(relayout(value)), cpu_kwargs)
        expected = info.op(*cpu_args, **cpu_kwargs)
        actual = info.op(*chip_args, **chip_kwargs)
        assert_same(actual, expected)
        compared += 1
        if differentiable:
            outputs = [o for o in (expected if isinstance(expected, (list, tuple)) else [expected])
                       if isinstance(o, torch.Tensor) and o.requires_grad]
            if not outputs:
                continue
            chip_outputs = [o for o in (actual if isinstance(actual, (list, tuple)) else [actual])
                            if isinstance(o, torch.Tensor) and o.requires_grad]
            grads = [torch.randn_like(o) for o in outputs]
            cpu_inputs = [t for t in tree_leaves(cpu_args) if isinstance(t, torch.Tensor) and t.requires_grad]
            chip_inputs = [t for t in tree_leaves(chip_args) if isinstance(t, torch.Tensor) and t.requires_grad]
            if not cpu_inputs:
                continue
            expected_grads = torch.autograd.grad(outputs, cpu_inputs, grads, allow_unused=True)
            with torch_fl.strict_fallback():  # the backward runs on the chip, or the case fails
                actual_grads = torch.autograd.grad(chip_outputs, chip_inputs, [relayout(g).to(CHIP) for g in grads],
                                                   allow_unused=True)
            for a, e in zip(actual_grads, expected_grads):
                if e is not None:
                    assert_same(a, e)
    return compared


def kernel_test(cases):
    """The test of every case, `cases` being [(aten op, case)]: ("opinfo", OpInfo name, mode) or
    ("expr", a generator expression of the device): `test_vendor_kernel_matches_cpu` of the suite."""
    # OpInfo cases run in both layouts; the generator's expressions choose their own.
    runs = [(i, op, case, layout) for i, (op, case) in enumerate(cases)
            for layout in (LAYOUTS if case[0] == "opinfo" else ["contiguous"])]

    @pytest.mark.parametrize("dtype", OPINFO_DTYPES, ids=str)
    @pytest.mark.parametrize("aten_op,case,layout", [run[1:] for run in runs],
                             ids=[f"{op}-{c[1] if c[0] == 'opinfo' else 'expr'}-{i}"
                                  + ("" if layout == "contiguous" else f"-{layout}")
                                  for i, op, c, layout in runs])
    def test_vendor_kernel_matches_cpu(aten_op, case, layout, dtype, fallback_stats):
        if case[0] == "opinfo":
            _, name, _mode = case  # mode "grad": the aten op is a backward, reached through autograd
            assert name in OPINFOS, f"torch's op_db has no OpInfo {name!r}"
            compared = run_opinfo(OPINFOS[name], dtype, layout)
            assert compared > 0
        else:
            fn = eval(case[1], {"torch": torch})  # the generator's own expressions, not spec text
            torch.manual_seed(0)
            actual = fn(CHIP)
            torch.manual_seed(0)
            expected = fn("cpu")
            assert_same(actual, expected)
        assert vendor_calls(fallback_stats, aten_op) > 0, (
            f"the vendor kernel for {aten_op} did not run; paths seen: {fallback_stats()}")

    return test_vendor_kernel_matches_cpu


def declined_test(cases):
    """Vendor kernels that compute in some dtypes only (`ops.<op>.dtypes`, the spec's KERNEL_DTYPES):
    a call in one of the chip's integer dtypes the kernel lacks takes the op's chain, matches the
    CPU and never reaches the kernel: `test_declined_dtype_takes_the_chain` of the suite."""
    from torch_fl import routes

    kernel_dtypes = getattr(_suite.spec, "KERNEL_DTYPES", {})
    chip_dtypes = set(_suite.spec.DTYPES)
    runs = [(op, case[1], dtype) for op, case in cases if op in kernel_dtypes and case[0] == "opinfo"
            and case[2] == "op" for dtype in ("int64", "int32")
            if dtype in chip_dtypes and dtype not in kernel_dtypes[op]
            and getattr(torch, dtype) in OPINFOS[case[1]].supported_dtypes("cpu")]

    @pytest.mark.parametrize("aten_op,name,dtype_name", runs, ids=[f"{op}-{d}" for op, _, d in runs])
    def test_declined_dtype_takes_the_chain(aten_op, name, dtype_name, fallback_stats):
        assert run_opinfo(OPINFOS[name], getattr(torch, dtype_name)) > 0
        taken = fallback_stats().get(aten_op, {})
        assert taken and "vendor" not in taken, f"{aten_op} in {dtype_name}: paths {taken}"
        assert set(taken) <= set(routes.route(_suite.spec, aten_op).chain), taken

    return test_declined_dtype_takes_the_chain


def checked_test(unchecked):
    """A test that fails while the generator knows no CPU comparison for the vendor ops
    `unchecked`: `test_every_vendor_op_is_checked` of the suite, so that the gap is visible."""
    def test_every_vendor_op_is_checked():
        assert not unchecked, f"vendor ops without a CPU comparison: {unchecked}"

    return test_every_vendor_op_is_checked
