"""torch_fl.triton_ops `index` family (scans, sorting, indexing, scatter, selection)
against the CPU aten ops, under Triton's interpreter or compiled on a GPU
(tests/triton_ops/triton_device.py); a few cases on `npu` tensors."""
from triton_device import DEVICE, npu_available, on_device

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402
from torch_fl.triton_ops import family_ops  # noqa: E402

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

F32, F64, I64, BOOL = torch.float32, torch.float64, torch.int64, torch.bool
TOL = {F32: (1.3e-6, 1e-5), F64: (1e-7, 1e-7), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}
EXERCISED: set = set()


def _aten(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def _outs(name):
    return [a for a in _aten(name)._schema.arguments if a.kwarg_only and a.alias_info is not None
            and a.alias_info.is_write]


def rnd(*shape, dtype=F32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == BOOL:
        return torch.rand(shape, generator=g) > 0.5
    if dtype == I64:
        return torch.randint(-3, 4, shape, generator=g)
    return (torch.rand(shape, generator=g, dtype=F64) * 4 - 2).to(dtype)


def _same(got, exp):
    if isinstance(exp, (tuple, list)):
        assert len(got) == len(exp)
        for g, e in zip(got, exp):
            _same(g, e)
        return
    assert got.dtype == exp.dtype and got.shape == exp.shape, (got.dtype, got.shape, exp.dtype, exp.shape)
    got = got.cpu()
    if exp.dtype in TOL:
        rtol, atol = TOL[exp.dtype]
        torch.testing.assert_close(got, exp, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, exp), (got, exp)


def _functional(name):
    """The functional overload an out= overload computes (scatter.src_out -> scatter.src)."""
    base, _, ov = name.partition(".")
    ov = {"out": "", "values_stable": "stable", "dim_max": "dim", "dim_min": "dim"}.get(ov, ov.removesuffix("_out"))
    return base + ("." + ov if ov else "")


def _to(v, device):
    if isinstance(v, torch.Tensor):
        return v.clone().to(device)
    if isinstance(v, (list, tuple)):  # index.Tensor's list of index tensors
        return type(v)(_to(x, device) for x in v)
    return v


def check(name, *args, device=DEVICE, **kwargs):
    """kernel_for(name) vs the aten op; out= variants get empty outs (resized by the kernel),
    in-place variants work on clones and must return the mutated self."""
    EXERCISED.add(name)
    exp_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    exp = _aten(_functional(name) if _outs(name) else name)(*exp_args, **kwargs)
    got_args = [_to(a, device) for a in args]
    outs = {}
    for k, a in enumerate(_outs(name)):
        dt = (exp[k] if isinstance(exp, tuple) else exp).dtype
        outs[a.name] = torch.empty(0, dtype=dt, device=device)
    got = tops.kernel_for(name)(*got_args, **{k: _to(v, device) for k, v in kwargs.items()}, **outs)
    if name.split(".")[0].endswith("_"):
        assert got is got_args[0]
        _same(got_args[0], exp_args[0])
    if outs:
        _same(tuple(outs.values()) if len(outs) > 1 else next(iter(outs.values())), exp)
    _same(got, exp)


def variants(base, overload=""):
    """The functional, in-place and out names of a base op with optional overload suffix."""
    sfx = "." + overload if overload else ""
    return [base + sfx, base + "_" + sfx, base + "." + (overload + "_out" if overload else "out")]


# ------------------------------------------------------------ flip / roll --
@pytest.mark.parametrize("dtype", [F32, F64, I64, BOOL])
def test_flip(dtype):
    x = rnd(3, 4, 5, dtype=dtype)
    for dims in ([0], [2], [0, 2], [-1, 1], [0, 1, 2], []):
        check("flip", x, dims)
    check("flip", x.transpose(0, 2), [1])  # non-contiguous
    check("flip", rnd(dtype=dtype), [0])  # 0-dim
    check("flip", rnd(0, 3, dtype=dtype), [1])  # empty


@pytest.mark.parametrize("dtype", [F32, I64])
def test_roll(dtype):
    x = rnd(3, 4, 5, dtype=dtype)
    check("roll", x, [1], [0])
    check("roll", x, [-3, 7], [2, 1])
    check("roll", x, [13])  # no dims: flattened
    check("roll", x.transpose(0, 1), [2], [0])
    check("roll", x, [0], [1])
    check("roll", rnd(0, 4, dtype=dtype), [1], [1])


# ----------------------------------------------------------------- scatter --
def _perm_index(shape, dim, size, seed):
    """Index of `shape` along `dim` with distinct targets per slice (scatter's result is
    only defined without duplicates)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.empty(shape, dtype=I64)
    flat = idx.movedim(dim, -1).reshape(-1, shape[dim])
    for r in range(flat.shape[0]):
        flat[r] = torch.randperm(size, generator=g)[: shape[dim]]
    return flat.reshape(idx.movedim(dim, -1).shape).movedim(-1, dim).contiguous()


@pytest.mark.parametrize("dtype", [F32, F64, I64, BOOL])
def test_scatter(dtype):
    x = rnd(4, 5, dtype=dtype)
    for dim in (0, 1, -1):
        idx = _perm_index((3, 4), dim, x.shape[dim], seed=dim + 2)
        src = rnd(3, 5, dtype=dtype, seed=7)  # larger than the index: only its prefix is read
        for name in variants("scatter", "src"):
            check(name, x, dim, idx, src)
        for name in variants("scatter", "value"):
            check(name, x, dim, idx, True if dtype == BOOL else 3)
    check("scatter.src", x.t(), 1, _perm_index((5, 2), 1, 4, 3), rnd(5, 2, dtype=dtype).t().contiguous().t())
    check("scatter.value", rnd(dtype=dtype), 0, torch.tensor(0), 1)  # 0-dim
    check("scatter.src", x, 0, torch.empty(0, 5, dtype=I64), rnd(0, 5, dtype=dtype))


@pytest.mark.parametrize("dtype", [F32, F64, I64])
def test_index_add(dtype):
    x = rnd(4, 5, 3, dtype=dtype)
    idx = torch.tensor([0, 2, 0, 3])  # duplicates accumulate
    for name in variants("index_add"):
        check(name, x, 1, idx, rnd(4, 4, 3, dtype=dtype, seed=1))
        check(name, x, 0, idx, rnd(4, 5, 3, dtype=dtype, seed=2), alpha=2)
    check("index_add", x.transpose(0, 2), 2, torch.tensor([3, 1]), rnd(3, 5, 2, dtype=dtype))
    check("index_add", rnd(dtype=dtype), 0, torch.tensor([0]), rnd(dtype=dtype))


@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
def test_index_copy_fill(dtype):
    x = rnd(4, 5, dtype=dtype)
    idx = torch.tensor([4, 0, 2])
    for name in variants("index_copy"):
        check(name, x, 1, idx, rnd(4, 3, dtype=dtype, seed=1))
    check("index_copy", x.t(), 0, idx, rnd(3, 4, dtype=dtype))
    v = True if dtype == BOOL else -2
    check("index_fill_.int_Scalar", x, 1, idx, v)
    check("index_fill_.int_Scalar", x.t(), 0, torch.tensor([-1]), v)
    check("index_fill_.int_Tensor", x, 0, torch.tensor([1, 3]), torch.tensor(v, dtype=dtype))


# ------------------------------------------------------------------ scans --
@pytest.mark.parametrize("dtype", [F32, F64, I64, BOOL])
def test_scans(dtype):
    x = rnd(3, 4, 5, dtype=dtype)
    if dtype in (F32, F64):
        x = x / 2 + 1  # products stay moderate
    for dim in (0, 1, 2, -1):
        for base in ("cumsum", "cumprod"):
            check(base, x, dim)
            check(base + ".out", x, dim)
            if dtype != BOOL:
                check(base + "_", x, dim)
    check("cumsum", x.transpose(0, 2), 1)
    check("cumsum", rnd(dtype=dtype), 0)
    check("cumsum", rnd(0, 3, dtype=dtype), 1)
    if dtype != BOOL:
        check("cumsum", x, 1, dtype=F64)
    # rows longer than one block: the carry joins the chunks
    check("cumsum", rnd(2, 2500, dtype=dtype), 1)
    check("cumprod", (rnd(1500, dtype=F64) / 10 + 1) if dtype in (F32, F64) else rnd(1500, dtype=dtype), 0)


# ----------------------------------------------------------------- sorting --
@pytest.mark.parametrize("dtype", [F32, F64, I64, BOOL])
def test_sort(dtype):
    x = rnd(4, 37, dtype=dtype)
    if dtype in (F32, F64):
        x = (x * 2).round()  # many ties: stability decides the indices
        x[1, 3] = x[1, 9] = float("nan")
        x[2, 0] = float("-inf")
        x[0, 5] = -0.0
    for desc in (False, True):
        for dim in (1, 0):
            check("sort.stable", x, stable=True, dim=dim, descending=desc)
            check("sort.values_stable", x, stable=True, dim=dim, descending=desc)
    distinct = torch.randperm(148, generator=torch.Generator().manual_seed(0)).view(37, 4).to(dtype) if dtype != BOOL else x
    check("sort.stable", distinct.t(), stable=None, dim=1)  # without ties any sort order is determined
    check("sort.stable", rnd(dtype=dtype), stable=True)
    check("sort.stable", rnd(3, 0, dtype=dtype), stable=True)
    check("sort.stable", rnd(300, dtype=dtype), stable=True)  # several i/j blocks


# -------------------------------------------------------------- selection --
@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
def test_nonzero_masked_select(dtype):
    x = rnd(3, 4, 5, dtype=dtype)
    for t in (x, x.transpose(0, 2), rnd(dtype=dtype), rnd(0, 2, dtype=dtype), torch.zeros(4, 2, dtype=dtype),
              rnd(3000, dtype=dtype)):
        check("nonzero", t)
        check("nonzero.out", t)
        for size in (0, 3, 200):  # truncated and padded
            check("nonzero_static", t, size=size, fill_value=-7)
    m = rnd(4, 5, dtype=BOOL, seed=3)
    check("masked_select", x, m)
    check("masked_select.out", x, m)
    check("masked_select", x, m[0])  # mask broadcast
    check("masked_select", x[0, 0], m)  # self broadcast
    check("masked_select", x, torch.zeros(5, dtype=BOOL))


def test_masked_scatter():
    for dtype in (F32, I64, BOOL):
        x = rnd(4, 5, dtype=dtype)
        src = rnd(30, dtype=dtype, seed=5)
        check("masked_scatter_", x, rnd(4, 5, dtype=BOOL, seed=1), src)
        check("masked_scatter_", x.t(), rnd(4, dtype=BOOL, seed=2), src.view(5, 6))  # mask broadcast
        check("masked_scatter_", x, torch.zeros(4, 5, dtype=BOOL), src)


# ------------------------------------------------------- advanced indexing --
@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
def test_index_tensor(dtype):
    x = rnd(4, 5, 6, dtype=dtype)
    i = torch.tensor([[0, 3], [-1, 2]])
    j = torch.tensor([4, -5])
    for name in ("index.Tensor", "index.Tensor_out"):
        check(name, x, [i])
        check(name, x, [None, j])
        check(name, x, [i, j])  # adjacent: the index dims stay in place
        check(name, x, [None, j, torch.tensor([5, 0])])
        check(name, x, [i, None, torch.tensor([1])])  # separated: the index dims go first
    check("index.Tensor", x.transpose(0, 2), [None, torch.tensor([1, 1, 0])])
    check("index.Tensor", x, [rnd(4, 5, dtype=BOOL, seed=3)])  # mask
    check("index.Tensor", x, [None, None, rnd(6, dtype=BOOL, seed=4)])
    check("index.Tensor", x, [torch.tensor([], dtype=I64)])


@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
def test_take_put(dtype):
    x = rnd(4, 5, dtype=dtype)
    idx = torch.tensor([[0, 19], [-1, 7], [3, 3]])
    for t in (x, x.t(), rnd(dtype=dtype)):
        i = idx if t.dim() else torch.tensor([0, -1])
        check("take", t, i)
        check("take.out", t, i)
    check("put_", x, torch.tensor([0, 19, -3]), rnd(3, dtype=dtype, seed=1))
    check("put_", x.t(), torch.tensor([[1, 7], [2, 4]]), rnd(4, dtype=dtype, seed=2))  # non-contiguous self
    if dtype != BOOL:
        check("put_", x, torch.tensor([2, 2, 5, 2]), rnd(4, dtype=dtype, seed=3), True)  # duplicates add


def test_repeat_interleave():
    for reps in ([2, 0, 3, 1], [0, 0], [5], [0, 4, 0], []):
        r = torch.tensor(reps, dtype=I64)
        check("repeat_interleave.Tensor", r)
        check("repeat_interleave.Tensor", r, output_size=sum(reps))
    check("repeat_interleave.Tensor", torch.tensor([1, 3], dtype=torch.int32))



@pytest.mark.parametrize("dtype", [F32, F64, I64])
def test_searchsorted_bucketize(dtype):
    seq = rnd(3, 9, dtype=dtype).sort(dim=-1).values  # ties when I64
    vals = rnd(3, 5, dtype=dtype, seed=1)
    if dtype != I64:
        vals[0, 1] = float("nan")
        vals[1, 2] = seq[1, 4]  # an exact hit
    for right in (False, True):
        for name in ("searchsorted.Tensor", "searchsorted.Tensor_out"):
            check(name, seq, vals, right=right)
            check(name, seq[0], vals, right=right, out_int32=True)  # one shared sequence
        check("searchsorted.Tensor", seq[1], vals.t(), side="right" if right else "left")
        for name in ("bucketize.Tensor", "bucketize.Tensor_out"):
            check(name, vals, seq[2], right=right)
            check(name, rnd(dtype=dtype), seq[2], right=right)
    check("searchsorted.Tensor", seq[:, :0], vals)  # empty sequence
    shuffled = rnd(3, 9, dtype=dtype, seed=4)
    order = shuffled.argsort(dim=-1, stable=True)
    for right in (False, True):
        check("searchsorted.Tensor", shuffled, vals, right=right, sorter=order)
        check("searchsorted.Tensor", shuffled[0], vals, right=right, sorter=order[0])



@pytest.mark.parametrize("dtype", [F32, F64, I64])
def test_index_put(dtype):
    x = rnd(4, 5, dtype=dtype)
    i = torch.tensor([0, 3, 1])
    check("_index_put_impl_", x, [i], rnd(3, 5, dtype=dtype), False)
    check("_index_put_impl_", x, [None, torch.tensor([-1, 2])], rnd(4, 2, dtype=dtype), False)
    check("_index_put_impl_", x, [i, torch.tensor([4, 0, 2])], rnd(3, dtype=dtype), False)
    check("_index_put_impl_", x, [rnd(4, 5, dtype=BOOL, seed=2)], rnd(dtype=dtype), False)  # mask, 0-dim value
    check("_index_put_impl_", x.t(), [torch.tensor([1, 1, 4, 1])], rnd(4, 4, dtype=dtype), True)  # duplicates add


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16, BOOL])
def test_index_put_accumulates_dtypes_without_atomic_add(dtype):
    # accumulated in a wider dtype and stored back: exact for integers (8-bit sums wrap) and bool
    x = rnd(4, 5, dtype=dtype) if dtype in (torch.float16, torch.bfloat16, BOOL) else \
        torch.randint(0, 100, (4, 5), generator=torch.Generator().manual_seed(0)).to(dtype)
    values = rnd(4, 4, dtype=dtype, seed=1) if dtype in (torch.float16, torch.bfloat16, BOOL) else \
        torch.randint(0, 120, (4, 4), generator=torch.Generator().manual_seed(1)).to(dtype)
    check("_index_put_impl_", x.t(), [torch.tensor([1, 1, 4, 1])], values, True)
    check("_index_put_impl_", x, [torch.tensor([0, 0, 3])], values[:3, :1].expand(3, 5).contiguous(), True)


@pytest.mark.parametrize("dtype", [F32, F64, I64, BOOL])
def test_max_min_dim(dtype):
    x = rnd(4, 6, dtype=dtype)
    if dtype in (F32, F64):
        x = x.round()  # ties: the first index wins
        x[2, 4] = float("nan")
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            for name in ("max.dim", "max.dim_max", "min.dim", "min.dim_min"):
                check(name, x, dim, keepdim)
    check("max.dim", x.t(), 1)
    check("min.dim", rnd(dtype=dtype), 0)


@pytest.mark.parametrize("dtype", [F32, F64, I64])
def test_scatter_reduce(dtype):
    x = rnd(4, 5, dtype=dtype)
    idx = torch.tensor([[0, 1, 0, 3, 3], [0, 0, 2, 3, 1], [2, 0, 0, 3, 1]])  # duplicates along dim 0
    src = rnd(3, 6, dtype=dtype, seed=1)
    if dtype != I64:
        src[1, 2] = float("nan")
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            for name in ("scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out"):
                check(name, x, 0, idx, src, reduce, include_self=include_self)
            check("scatter_reduce.two", x.t(), 1, idx.t()[:, :2], src.t(), reduce, include_self=include_self)
    check("scatter_reduce.two", rnd(7, dtype=dtype), 0, torch.tensor([6, 6, 0, 6]), rnd(4, dtype=dtype), "mean",
          include_self=False)
    for reduce in ("add", "multiply"):
        for name in ("scatter.reduce", "scatter_.reduce", "scatter.reduce_out"):
            check(name, x, 1, idx[:, :4], src, reduce=reduce)
        for name in ("scatter.value_reduce", "scatter_.value_reduce", "scatter.value_reduce_out"):
            check(name, x, 0, idx, 3, reduce=reduce)


def test_scatter_reduce_on_bool_is_or_and():
    # ATen on bool: sum/amax accumulate as `or`, prod/amin as `and`; mean raises there (declined here)
    x, src = rnd(4, 5, dtype=BOOL), rnd(3, 6, dtype=BOOL, seed=1)
    idx = torch.tensor([[0, 1, 0, 3, 3], [0, 0, 2, 3, 1], [2, 0, 0, 3, 1]])
    for reduce in ("sum", "prod", "amax", "amin"):
        for include_self in (True, False):
            for name in ("scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out"):
                check(name, x, 0, idx, src, reduce, include_self=include_self)
    for reduce in ("add", "multiply"):
        check("scatter.reduce", x, 1, idx[:, :4], src, reduce=reduce)
        check("scatter_.value_reduce", x, 0, idx, True, reduce=reduce)
    with pytest.raises(tops.Unsupported):
        tops.kernel_for("scatter_reduce.two")(x, 0, idx, src, "mean")


@pytest.mark.parametrize("dtype", [F32, F64, I64])
def test_index_reduce(dtype):
    x = rnd(4, 5, 3, dtype=dtype)
    idx = torch.tensor([0, 3, 0, 3, 1, 0])  # duplicates, and row 2 receives nothing
    src = rnd(4, 6, 3, dtype=dtype, seed=1)
    if dtype != I64:
        src[1, 2, 0] = float("nan")
    for reduce in ("prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            for name in ("index_reduce", "index_reduce_", "index_reduce.out"):
                check(name, x.transpose(0, 1), 0, idx, src.transpose(0, 1), reduce, include_self=include_self)
            check("index_reduce", x, 1, idx, src, reduce, include_self=include_self)



@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
def test_count_nonzero(dtype):
    x = rnd(3, 4, 5, dtype=dtype)
    for dims in ([0], [1, 2], [], [-1, 0]):
        check("count_nonzero.dim_IntList", x, dims)
    check("count_nonzero.dim_IntList", x.transpose(0, 2), [1])



@pytest.mark.parametrize("dtype", [F32, F64])
def test_logcumsumexp(dtype):
    x = rnd(4, 6, 5, dtype=dtype) * 5
    x[1, 2, 3] = float("nan")
    x[2, 0, 1] = float("inf")
    x[3] = float("-inf")
    for dim in (0, 1, 2, -1):
        check("_logcumsumexp", x, dim)
        check("_logcumsumexp.out", x, dim)
    check("_logcumsumexp", x.transpose(0, 2), 1)
    check("_logcumsumexp", rnd(dtype=dtype), 0)
    check("_logcumsumexp", rnd(2, 1100, dtype=dtype), 1)  # carry across chunks


@pytest.mark.parametrize("dtype", [F32, F64, I64, BOOL])
def test_cummax_cummin(dtype):
    for x in (rnd(4, 7, dtype=dtype), rnd(2, 1100, dtype=dtype), rnd(dtype=dtype)):
        if dtype in (F32, F64) and x.dim():
            x = x.round()  # ties: the last maximum's index
            x[..., 3] = float("nan")  # NaN wins; the last NaN's index
        for dim in (range(-1, max(x.dim(), 1)) if x.numel() < 100 else [-1]):  # long rows: one dim
            for name in ("_cummax_helper", "_cummin_helper"):
                EXERCISED.add(name)
                v = torch.empty(0, dtype=dtype)
                i = torch.empty(0, dtype=I64)
                on_device(tops.kernel_for(name))(x, v, i, dim)
                ev, ei = (torch.cummax if name == "_cummax_helper" else torch.cummin)(x, dim)
                _same(v, ev)
                _same(i, ei)


# ------------------------------------------------------------- on the npu --
@pytest.mark.skipif(not npu_available(), reason="npu backend not installed")
def test_on_npu():
    x = rnd(3, 6)
    check("flip", x, [0, 1], device="npu")
    check("roll", x, [2], [1], device="npu")
    check("scatter.src_out", x, 1, _perm_index((3, 2), 1, 6, 0), rnd(3, 2), device="npu")
    check("index_add.out", x, 0, torch.tensor([2, 2]), rnd(2, 6), device="npu")
    check("cumsum.out", x, 1, device="npu")
    check("sort.values_stable", x.round(), stable=True, dim=1, descending=False, device="npu")
    check("nonzero", x > 0, device="npu")
    check("masked_select", x, x > 0, device="npu")


@pytest.mark.parametrize("dtype", [F32, I64])
def test_isin_by_binary_search(dtype):
    elements = rnd(4, 5, dtype=dtype)
    tests = rnd(7, dtype=dtype, seed=3)
    if dtype == F32:
        elements[0, 0] = tests[2] = float("nan")  # NaN is a member of nothing
    for invert in (False, True):
        check("isin.Tensor_Tensor_out", elements, tests, invert=invert)
    check("isin.Tensor_Tensor_out", elements, tests[:0])  # nothing to find
    check("isin.Tensor_Tensor_out", elements, tests.to(F64))  # promoted to a common dtype


def test_tril_triu_indices():
    for name in ("tril_indices", "triu_indices"):
        for row, col, offset in ((4, 5, 0), (5, 3, -1), (3, 6, 2), (0, 4, 0), (3, 3, -5)):
            for dtype in (I64, torch.int32):
                check(name, row, col, offset, dtype=dtype)


def test_zz_every_index_op_exercised():
    missing = sorted(set(family_ops("index")) - EXERCISED)
    assert not missing, f"index OPS entries not exercised: {missing}"
