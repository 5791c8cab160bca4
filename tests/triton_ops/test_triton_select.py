"""torch_fl.triton_ops `select` family (topk, kthvalue, median, nanmedian, mode) against the
CPU aten ops, under Triton's interpreter or compiled on a GPU (tests/triton_ops/triton_device.py).

Values must match exactly. Indices must match where the selected value occurs once in its
row; among equal values ATen's CPU choice is its selection algorithm's (std::nth_element,
std::sort), so there an index only has to point at an element holding the returned value."""
from triton_device import on_device

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402
from torch_fl.triton_ops import Unsupported, family_ops  # noqa: E402

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
I64, I32, I8, U8, BOOL = torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool
DTYPES = [F32, F64, F16, BF16, I64, I32, I8, U8, BOOL]
NAN = float("nan")
EXERCISED: set = set()
# The functional op an out= overload computes.
FUNCTIONAL = {"topk.values": "topk", "kthvalue.values": "kthvalue", "median.dim_values": "median.dim",
              "nanmedian.dim_values": "nanmedian.dim", "mode.values": "mode"}


def _aten(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def _kernel(name):
    EXERCISED.add(name)
    return on_device(tops.kernel_for(name))


def rnd(*shape, dtype=F32, seed=0, nan=False):
    """Few distinct values (ties in most rows); floats get NaNs at about a quarter of the places."""
    g = torch.Generator().manual_seed(seed)
    if dtype == BOOL:
        return torch.rand(shape, generator=g) > 0.5
    if dtype == U8:
        return torch.randint(0, 7, shape, generator=g, dtype=U8)
    if not dtype.is_floating_point:
        return torch.randint(-3, 4, shape, generator=g, dtype=dtype)
    x = (torch.randint(-4, 5, shape, generator=g) / 2).to(dtype)
    if nan:
        x[torch.rand(shape, generator=g) < 0.25] = NAN
    return x


def distinct(*shape, dtype=F32, seed=0):
    """Pairwise distinct values (fit int8 and fp16 exactly): every index is determined."""
    n = torch.Size(shape).numel()
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)) - (0 if dtype == U8 else n // 2)
    return perm.view(shape).to(dtype)


def _eq(a, b):
    """Elementwise equality with NaN equal to NaN (broadcasting)."""
    both_nan = torch.isnan(a) & torch.isnan(b) if a.dtype.is_floating_point else torch.zeros((), dtype=BOOL)
    return (a == b) | both_nan


def _per_row(t, x, d, keepdim):
    """An output in the layout of x's rows along d (dim moved last): (..., k)."""
    if x.dim() == 0:
        return t.reshape(1)
    return t.movedim(d, -1) if keepdim else t.unsqueeze(-1)


def _same(got, exp, x, d, keepdim, ordered=True):
    """got (values, indices) vs aten's: values exactly (as multisets unless `ordered`), each
    index selecting its value, indices equal where the value is not repeated in its row."""
    (gv, gi), (ev, ei) = got, exp
    assert (gv.dtype, gv.shape, gi.dtype, gi.shape) == (ev.dtype, ev.shape, ei.dtype, ei.shape)
    gv, gi = gv.cpu(), gi.cpu()
    xr = x.reshape(1) if x.dim() == 0 else x.movedim(d, -1)
    gv, gi, ev, ei = (_per_row(t, x, d, keepdim) for t in (gv, gi, ev, ei))
    if not ordered:
        order = gv.sort(dim=-1, stable=True).indices
        gv, gi = gv.gather(-1, order), gi.gather(-1, order)
        order = ev.sort(dim=-1, stable=True).indices
        ev, ei = ev.gather(-1, order), ei.gather(-1, order)
    torch.testing.assert_close(gv, ev, rtol=0, atol=0, equal_nan=True)
    assert _eq(xr.gather(-1, gi), gv).all(), (x, gi, gv)
    repeats = _eq(xr.unsqueeze(-2), gv.unsqueeze(-1)).sum(-1)
    assert torch.equal(gi[repeats == 1], ei[repeats == 1]), (x, gi, ei)


def _layout(name, x, args, kwargs):
    """(d, keepdim, ordered) of a call: its dim wrapped, whether the outputs keep it (topk's
    do), whether their order is defined (topk's sorted)."""
    call = dict(zip([a.name for a in _aten(name)._schema.arguments], (x, *args)), **kwargs)
    d = call.get("dim", -1) % max(x.dim(), 1)
    return d, name.startswith("topk") or call.get("keepdim", False), call.get("sorted", True)


def check(name, x, *args, **kwargs):
    """kernel_for(name) vs the aten op on x; returns both results."""
    got = _kernel(name)(x.clone(), *args, **kwargs)
    exp = _aten(name)(x.clone(), *args, **kwargs)
    if name in ("median", "nanmedian"):
        torch.testing.assert_close(got, exp, rtol=0, atol=0, equal_nan=True)
    else:
        _same(got, exp, x, *_layout(name, x, args, kwargs))
    return got, exp


def check_out(name, x, *args, values, indices, **kwargs):
    """The out= overload: its outs (here wrongly shaped or strided) resized and returned."""
    got = _kernel(name)(x.clone(), *args, values=values, indices=indices, **kwargs)
    assert got[0] is values and got[1] is indices
    _same(got, _aten(FUNCTIONAL[name])(x.clone(), *args, **kwargs), x, *_layout(name, x, args, kwargs))


def check_error(name, x, *args, same_message=True, **kwargs):
    """The kernel raises what aten raises (type, and message where asked)."""
    with pytest.raises(Exception) as aten_error:  # aten may resize its out= tensors before raising: clones
        _aten(name)(x.clone(), *args, **{k: v.clone() for k, v in kwargs.items()})
    with pytest.raises(aten_error.type) as kernel_error:
        _kernel(name)(x.clone(), *args, **kwargs)
    assert not isinstance(kernel_error.value, Unsupported)
    if same_message:
        assert str(kernel_error.value) == str(aten_error.value)


def check_declined(name, x, *args, **kwargs):
    """Inputs outside the kernels' design: Unsupported, so the CPU step answers."""
    with pytest.raises(Unsupported):
        _kernel(name)(x, *args, **kwargs)


def _inputs(dtype):
    """(tensor, dims) cases: 0-dim, one element, rows with ties (NaNs for floats), a
    non-contiguous view, an all-NaN row."""
    float_ = dtype.is_floating_point
    x3 = rnd(2, 3, 4, dtype=dtype, seed=3, nan=float_)
    cases = [(rnd(dtype=dtype), (0, -1)), (rnd(1, dtype=dtype), (0,)), (rnd(7, dtype=dtype, nan=float_), (-1,)),
             (rnd(5, 3, dtype=dtype, seed=1, nan=float_).t(), (0, 1, -1, -2)), (x3, (0, 1, 2, -1, -2, -3))]
    if float_:
        cases.append((torch.tensor([[NAN, NAN, NAN], [1, NAN, 2]], dtype=dtype), (1,)))
    return cases


# ------------------------------------------------------------------------ topk --
@pytest.mark.parametrize("dtype", DTYPES)
def test_topk(dtype):
    if dtype == BOOL:
        check_declined("topk", rnd(4, dtype=dtype), 2)
        return
    for x, dims in _inputs(dtype):
        for n, dim in enumerate(dims):
            size = x.shape[dim] if x.dim() else 1
            for k in sorted({0, 1, size // 2 + 1, size} & set(range(size + 1))):
                check("topk", x, k, dim, n % 2 == 0)  # largest and smallest
            check("topk", x, size, dim, n % 2 == 1, False)  # sorted=False: compared as multisets
    check("topk", distinct(4, 9, dtype=dtype), 4, 1, False)  # no ties: every index exact
    check("topk", distinct(4, 9, dtype=dtype, seed=1), 3, 0, True)


def test_topk_errors():
    x = rnd(3, 4)
    for k in (-1, 5):
        check_error("topk", x, k, 1)
    check_error("topk", rnd(), 2)  # a 0-dim tensor has one element (k of 0 or 1)
    check_error("topk", x, 1, 2)  # dim out of range
    check_error("topk", rnd(0, 3), 4, 1)
    check("topk", rnd(0, 3), 2, 1)  # empty
    check("topk", rnd(3, 0), 0, 1)


# -------------------------------------------------------------------- kthvalue --
@pytest.mark.parametrize("dtype", DTYPES)
def test_kthvalue(dtype):
    if dtype == BOOL:
        check_declined("kthvalue", rnd(4, dtype=dtype), 2)
        return
    for x, dims in _inputs(dtype):
        for n, dim in enumerate(dims):
            size = x.shape[dim] if x.dim() else 1
            for k in sorted({1, (size + 1) // 2, size}):
                check("kthvalue", x, k, dim, (n + k) % 2 == 0)
    check("kthvalue", distinct(5, 6, dtype=dtype), 2, 0, True)


def test_kthvalue_errors():
    x = rnd(3, 4)
    for k in (0, 5):
        check_error("kthvalue", x, k, 1)
    check_error("kthvalue", rnd(), 2)
    check_error("kthvalue", x, 1, -3)
    check_error("kthvalue", rnd(3, 0), 1, 1)  # reducing an empty dim
    check_error("kthvalue", rnd(0), 1)
    check_error("kthvalue", rnd(0, 3), 4, 1)
    check("kthvalue", rnd(0, 3), 2, 1, True)  # empty but not along dim


# ----------------------------------------------------------- median, nanmedian --
@pytest.mark.parametrize("dtype", DTYPES)
def test_median(dtype):
    names = ("median", "median.dim", "nanmedian", "nanmedian.dim")
    if dtype == BOOL:
        for name in names:
            check_declined(name, rnd(4, dtype=dtype), *([0] if "." in name else []))
        return
    for x, dims in _inputs(dtype):
        check("median", x)
        check("nanmedian", x)
        for n, dim in enumerate(dims):
            for name in ("median.dim", "nanmedian.dim"):
                got, exp = check(name, x, dim, n % 2 == 0)
                if name == "median.dim" and dtype.is_floating_point:
                    # a row holding NaN: NaN at its first NaN's index, exactly as aten
                    nan_rows = torch.isnan(exp[0])
                    assert torch.equal(got[1][nan_rows], exp[1][nan_rows])
    check("median.dim", distinct(4, 7, dtype=dtype), 1)  # no ties: exact indices
    check("nanmedian.dim", distinct(6, 3, dtype=dtype), 0, True)
    if dtype.is_floating_point:
        check("median", torch.empty(0, 2, dtype=dtype))  # empty: NaN
        check("nanmedian", torch.full((3,), NAN, dtype=dtype))
    else:  # aten's NaN cast to an integer type: no value to reproduce
        check_declined("median", torch.empty(0, dtype=dtype))


def test_median_errors():
    for name in ("median.dim", "nanmedian.dim"):
        check_error(name, rnd(3, 0), 1)
        check_error(name, rnd(0), 0)
        check_error(name, rnd(3, 4), 2)
        check_error(name, rnd(), 1)
        check(name, rnd(0, 4), 1)  # empty but not along dim


# ------------------------------------------------------------------------ mode --
@pytest.mark.parametrize("dtype", DTYPES)
def test_mode(dtype):
    for x, dims in _inputs(dtype):
        for n, dim in enumerate(dims):
            if dtype.is_floating_point and torch.isnan(x).any():
                check_mode_with_nans(x, dim, n % 2 == 0)
            else:
                keepdim = n % 2 == 0
                (v, i), _ = check("mode", x, dim, keepdim)
                d = dim % max(x.dim(), 1)
                xr = x.reshape(1) if x.dim() == 0 else x.movedim(d, -1)
                hits = _eq(xr, _per_row(v, x, d, keepdim)).flip(-1).int()
                last = xr.shape[-1] - 1 - hits.argmax(-1)
                assert torch.equal(_per_row(i, x, d, keepdim).squeeze(-1), last)  # as aten for rows up to 16
    if dtype != BOOL:
        check("mode", distinct(3, 5, dtype=dtype), 1)  # all distinct: the smallest, exact index


def check_mode_with_nans(x, dim, keepdim):
    """aten's CPU mode sorts with `<`, no ordering with NaNs in a row, so its answer there is
    undefined. The kernel counts NaNs as one value larger than all others: aten's mode of x
    with NaN replaced by such a value is the reference."""
    v, i = _kernel("mode")(x.clone(), dim, keepdim)
    finite = x[~torch.isnan(x)]
    above = (finite.abs().max().item() if finite.numel() else 0) + 1  # larger than every value
    ev, ei = torch.mode(x.nan_to_num(above), dim, keepdim)
    ev[ev == above] = NAN
    _same((v, i), (ev, ei), x, *_layout("mode", x, (dim, keepdim), {})[:2])


def test_mode_errors():
    check_error("mode", rnd(2, 0), 1)
    check_error("mode", rnd(0), 0)
    check_error("mode", rnd(2, 3), -3)
    check("mode", rnd(0, 3), 1, True)


def test_long_rows():
    """Rows over one block (1024) of the pick kernel: NaN counts and runs across chunks."""
    g = torch.Generator().manual_seed(5)
    # row 0: the mode's run crosses the block boundary; row 1: two runs of the most frequent
    # count, the second crossing it (the first, smaller value wins)
    x = torch.stack([torch.repeat_interleave(torch.arange(3), torch.tensor(counts))[torch.randperm(1100, generator=g)]
                     for counts in ([300, 350, 450], [500, 100, 500])])
    check("mode", x, 1)
    check("mode", x.t(), 0, True)
    f = x[0].double()
    f[torch.randperm(1100, generator=g)[:200]] = NAN
    check("median.dim", f, 0)
    check("nanmedian.dim", f, 0)
    check("nanmedian", f)
    check("kthvalue", f, 1000)


def test_rows_beyond_the_sort_decline():
    """Longer rows than the sort handles: Unsupported, the out= tensors untouched."""
    x = torch.zeros(2, 16385)
    values, indices = torch.empty(3), torch.empty(3, dtype=I64)
    for name in ("topk.values", "kthvalue.values", "median.dim_values", "nanmedian.dim_values", "mode.values"):
        args = (1, 1) if name.split(".")[0] in ("topk", "kthvalue") else (1,)
        check_declined(name, x, *args, values=values, indices=indices)
        assert values.shape == (3,) and indices.shape == (3,)
    check_declined("median", x)


# ------------------------------------------------------------------------ out= --
@pytest.mark.parametrize("dtype", [F32, I64, F16])
def test_out_variants(dtype):
    x = rnd(3, 5, dtype=dtype, seed=2, nan=dtype.is_floating_point)
    if dtype == F32:
        x[1] = distinct(5)  # one row without ties or NaNs

    def outs():  # wrongly shaped: resized
        return {"values": torch.empty(7, 3, dtype=dtype), "indices": torch.empty(1, dtype=I64)}

    for keepdim in (False, True):
        check_out("kthvalue.values", x, 2, 1, keepdim, **outs())
        check_out("median.dim_values", x, 0, keepdim, **outs())
        check_out("nanmedian.dim_values", x, -1, keepdim, **outs())
        if not dtype.is_floating_point:
            check_out("mode.values", x, 1, keepdim, **outs())
    check_out("topk.values", x, 3, 1, **outs())
    check_out("topk.values", x, 2, 0, False, **outs())
    check_out("mode.values", rnd(4, 3, dtype=dtype), 0, **outs())
    # already of the output's shape, non-contiguous: written in place through its strides
    values, indices = torch.empty(5, 2, dtype=dtype).t(), torch.empty(5, 2, dtype=I64).t()
    check_out("topk.values", x, 2, 0, values=values, indices=indices)
    assert values.stride() == (1, 2)


def test_out_dtype_errors():
    """out= tensors of another dtype: aten's RuntimeError, before anything is written."""
    x = rnd(2, 3)
    for name, args in (("topk.values", (2, 1)), ("kthvalue.values", (1, 1)), ("median.dim_values", (1,)),
                       ("nanmedian.dim_values", (1,)), ("mode.values", (1,))):
        for values, indices in ((torch.empty(0, dtype=F64), torch.empty(0, dtype=I64)),
                                (torch.empty(0), torch.empty(0, dtype=I32))):
            check_error(name, x, *args, values=values, indices=indices, same_message=False)
            assert values.numel() == 0 and indices.numel() == 0


def test_zz_every_select_op_exercised():
    missing = sorted(set(family_ops("select")) - EXERCISED)
    assert not missing, f"select OPS entries not exercised: {missing}"
