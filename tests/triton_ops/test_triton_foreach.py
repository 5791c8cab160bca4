"""torch_fl.triton_ops, foreach family: every torch._foreach_* kernel against aten's CPU op.

The table kernel (one launch for a whole tensor list) runs under Triton's interpreter on
CPU tensors here, compiled on a GPU with TORCH_FL_TRITON_TEST_DEVICE=cuda. A chip whose Triton
is interpreted (the simulated `npu`) does not route the family at all (COMPILED_ONLY): torch's
per-tensor decomposition reaches its vendor kernels, faster there (see the last test).
"""
from triton_device import DEVICE  # noqa: I001  (sets TRITON_INTERPRET before triton is imported)

import pytest
import torch

import torch_fl.triton_ops as tops
from torch_fl.triton_ops import family_ops

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

F32, F64, F16, BF16, I64 = torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64
TOL = {F32: (1.3e-6, 1e-5), F64: (1e-7, 1e-7), F16: (1e-3, 1e-3), BF16: (1.6e-2, 1e-2)}
# Shapes of one list: one tensor spans several table rows (_CHUNK = 16384 elements).
SHAPES = [(3, 5), (40000,), (1,), (2, 3, 4)]
EXERCISED: set = set()


def _aten(name):
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _tensors(dtype=F32, seed=0, lo=0.5, hi=2.0, shapes=SHAPES):
    g = torch.Generator().manual_seed(seed)
    out = []
    for shape in shapes:
        if dtype == I64:
            out.append(torch.randint(1, 5, shape, generator=g))
        else:
            out.append((torch.rand(shape, generator=g, dtype=F64) * (hi - lo) + lo).to(dtype))
    return out


def _to(v, device):
    if isinstance(v, torch.Tensor):
        return v.clone() if device == "cpu" else v.to(device)
    if isinstance(v, list):
        return [_to(x, device) for x in v]
    return v


def _close(got, ref):
    got = got.cpu()
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert got.shape == ref.shape
    if ref.dtype in TOL:
        rtol, atol = TOL[ref.dtype]
        torch.testing.assert_close(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, ref), (got, ref)


def check(name, args, kwargs=None, device=DEVICE, tensor_scalar_on_cpu=True):
    """kernel_for(name) on `device` copies of args against aten's op on the CPU; an in-place
    op is compared by what it left in its first list."""
    kwargs = kwargs or {}
    EXERCISED.add(name)
    ref_args = [_to(a, "cpu") for a in args]
    ref = _aten(name)(*ref_args, **kwargs)
    dev_args = []
    for a in args:
        keep = tensor_scalar_on_cpu and isinstance(a, torch.Tensor) and a.dim() <= 1 and name.endswith(".Tensor")
        dev_args.append(_to(a, "cpu" if keep else device))
    got = tops.kernel_for(name)(*dev_args, **kwargs)
    if ref is None:  # in place: the first list (or, for pow(scalar, list), nothing) was written
        assert got is None
        for g, r in zip(dev_args[0], ref_args[0]):
            assert g.device.type == device
            _close(g, r)
    else:
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.device.type == device
            _close(g, r)


def _variants(base, overload):
    return [f"_foreach_{base}{s}.{overload}" for s in ("", "_")]


@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64])
@pytest.mark.parametrize("base", ["add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max",
                                  "pow"])
def test_binary_list_scalar_scalarlist(base, dtype):
    a, b = _tensors(dtype), _tensors(dtype, seed=1)
    kw = {"alpha": 0.5} if base in ("add", "sub") else {}
    for name in _variants(base, "List"):
        check(name, [a, b], kw)
    for name in _variants(base, "Scalar"):
        check(name, [a, 1.5])
    scalars = [0.5, 2.0, -1.0, 3.0] if base != "pow" else [0.5, 2.0, 1.5, 3.0]
    for name in _variants(base, "ScalarList"):
        check(name, [a, scalars])


@pytest.mark.parametrize("base", ["add", "mul", "div"])
def test_tensor_scalar_overload(base):
    a = _tensors()
    kw = {"alpha": -2.0} if base == "add" else {}
    for name in _variants(base, "Tensor"):
        check(name, [a, torch.tensor(0.75)], kw)  # a host 0-dim tensor: taken by value
        check(name, [a, torch.tensor(0.75)], kw, tensor_scalar_on_cpu=False)  # a device 0-dim tensor


def test_integer_lists_and_promotion():
    ints = _tensors(I64)
    check("_foreach_add.Scalar", [ints, 2])
    check("_foreach_add_.Scalar", [ints, 3])
    check("_foreach_mul.Scalar", [ints, 0.5])  # int list x float scalar -> float results
    check("_foreach_add.List", [ints, _tensors(F32)])
    with pytest.raises(RuntimeError, match="can't be cast"):
        tops.kernel_for("_foreach_mul_.Scalar")(_to(ints, DEVICE), 0.5)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_lerp_addcmul_addcdiv(dtype):
    a, b, c = _tensors(dtype), _tensors(dtype, seed=1), _tensors(dtype, seed=2)
    for name in _variants("lerp", "List"):
        check(name, [a, b, _tensors(dtype, seed=3, lo=0.0, hi=1.0)])
    for name in _variants("lerp", "Scalar"):
        check(name, [a, b, 0.3])
    for name in _variants("lerp", "ScalarList"):
        check(name, [a, b, [0.1, 0.9, 0.5, 0.25]])
    for base in ("addcmul", "addcdiv"):
        for name in _variants(base, "Scalar"):
            check(name, [a, b, c, -0.5])
        for name in _variants(base, "ScalarList"):
            check(name, [a, b, c, [0.5, -1.0, 2.0, 0.125]])
        for name in _variants(base, "Tensor"):
            check(name, [a, b, c, torch.tensor([0.5, -1.0, 2.0, 0.125])])


@pytest.mark.parametrize("base", ["neg", "abs", "sqrt", "rsqrt", "reciprocal", "sign", "exp", "log"])
def test_unary(base):
    x = _tensors(lo=0.25, hi=3.0)
    for name in (f"_foreach_{base}", f"_foreach_{base}_"):
        check(name, [x])


def test_pow_scalar_and_tensor_zero_copy():
    check("_foreach_pow.ScalarAndTensor", [2.0, _tensors(lo=-1.0, hi=2.0)])
    check("_foreach_zero_", [_tensors()])
    check("_foreach_copy_", [_tensors(), _tensors(F16, seed=1)])


def test_non_contiguous_and_mixed_lists():
    """A transposed tensor takes the strided kernel for its row; the rest share one launch."""
    a = _tensors()
    a[0] = a[0].t().contiguous().t()  # same values, transposed strides
    check("_foreach_add.List", [a, _tensors(seed=1)], {"alpha": 2})
    check("_foreach_mul_.Scalar", [a, 3.0])
    # tensors of two dtypes in one list: one launch per dtype group
    mixed = [_tensors(F32)[0], _tensors(F16)[1], _tensors(F64)[2]]
    check("_foreach_mul.Scalar", [mixed, 2.5])


def test_errors_name_the_lists():
    add = tops.kernel_for("_foreach_add.List")
    with pytest.raises(RuntimeError, match="same number of tensors, got 4 and 3"):
        add(_tensors(), _tensors()[:3])
    with pytest.raises(RuntimeError, match="at least one tensor"):
        tops.kernel_for("_foreach_neg")([])
    with pytest.raises(RuntimeError, match="scalar tensor expected to be 0 dim"):
        tops.kernel_for("_foreach_mul.Tensor")(_tensors(), torch.ones(2))
    with pytest.raises(RuntimeError, match="scalar tensor expected to be 0 dim but it has 1 dimensions"):
        tops.kernel_for("_foreach_mul.Tensor")(_tensors(), torch.ones(1))  # aten refuses (1,) too


def _aliased(device):
    """A list whose row 1 is a strided view (the per-tensor launch) and reads row 0's
    output through the second list."""
    self = [torch.zeros(4, device=device), torch.zeros(4, 2, device=device)[:, 0]]
    return self, [torch.ones(4, device=device), self[0]]


@pytest.mark.parametrize("name", ["_foreach_add_.List", "_foreach_copy_"])
def test_rows_run_in_order_when_lists_alias(name):
    """Rows of one call take effect in list order, as aten's loop does: a row computed on
    the spot (strided, another device, a torch call) first launches the table rows before
    it, so reading an earlier row's output sees it written."""
    ref_self, ref_other = _aliased("cpu")
    _aten(name)(ref_self, ref_other)
    self, other = _aliased(DEVICE)
    tops.kernel_for(name)(self, other)
    assert ref_self[1].tolist() == [1.0] * 4  # aten's: row 1 sees row 0 written
    for got, want in zip(self, ref_self):
        _close(got, want)


@pytest.mark.skipif(DEVICE != "cpu", reason="counts the launches of the interpreter run")
def test_one_launch_per_call_and_cached_table(monkeypatch):
    """Contiguous lists never take the per-tensor launch, and a second call with the same
    tensors reuses the uploaded table."""
    from torch_fl.triton_ops import _foreach

    def per_tensor(*args, **kwargs):
        raise AssertionError("a contiguous list took the per-tensor launch")

    monkeypatch.setattr(_foreach, "launch_pointwise", per_tensor)
    launches = []
    kernel = _foreach.foreach_pointwise_kernel
    monkeypatch.setattr(_foreach, "foreach_pointwise_kernel",
                        type("Counting", (), {"__getitem__": lambda self, grid: (launches.append(grid), kernel[grid])[1]})())
    _foreach._TABLE_CACHE.clear()
    a, b = _tensors(), _tensors(seed=1)
    once = [x + 0.5 * y for x, y in zip(a, b)]
    twice = [x + 0.5 * y for x, y in zip(once, b)]
    tops.kernel_for("_foreach_add_.List")(a, b, alpha=0.5)
    # one program per table row: 15, 40000 (three chunks of 16384), 1 and 24 elements
    assert launches == [(6,)]
    assert len(_foreach._TABLE_CACHE) == 1
    for got, want in zip(a, once):
        torch.testing.assert_close(got, want)
    tops.kernel_for("_foreach_add_.List")(a, b, alpha=0.5)  # same tensors: the cached table
    assert launches == [(6,), (6,)] and len(_foreach._TABLE_CACHE) == 1
    for got, want in zip(a, twice):
        torch.testing.assert_close(got, want)


def test_rows_like_row_zero_skip_their_preparation(monkeypatch):
    """A row with row 0's dtypes and layout reuses row 0's preparation (_foreach._Template);
    any row that differs (aliasing, strides, dtype, a 0-dim lead) is prepared in full, and
    every result matches aten's."""
    from torch_fl.triton_ops import _foreach

    prepared = []
    row = _foreach._row
    monkeypatch.setattr(_foreach, "_row", lambda *a, **k: (prepared.append(tuple(a[3].shape)), row(*a, **k))[1])
    shapes = [(3, 5), (40000,), (1,), (2, 3, 4), (7,)]
    a, b = _tensors(shapes=shapes), _tensors(seed=1, shapes=shapes)
    check("_foreach_add_.List", [a, b], {"alpha": 0.5})
    assert len(prepared) == 1  # row 0 only
    prepared.clear()
    check("_foreach_mul.Scalar", [a, 2.5])
    check("_foreach_add.Tensor", [a, torch.tensor(0.75)], tensor_scalar_on_cpu=False)  # shared device 0-dim
    check("_foreach_addcmul_.Scalar", [a, b, _tensors(seed=2, shapes=shapes), -0.5])
    assert len(prepared) == 3
    # aliasing in row 0 only: row 1 must not read row 0's aliasing
    dev_a, dev_b = _to(a, DEVICE), _to(b, DEVICE)
    dev_b[0] = dev_a[0]
    ref = [x + y for x, y in zip([t.cpu() for t in dev_a], [t.cpu() for t in dev_b])]
    tops.kernel_for("_foreach_add_.List")(dev_a, dev_b)
    for got, want in zip(dev_a, ref):
        _close(got, want)
    # one tensor in two places of every row (AdamW's addcmul_(v, g, g)): row 0's preparation
    # serves each row that aliases alike; a row that does not is prepared in full
    def addcmul_squares(v, g, other):
        ref_v = [t.cpu().clone() for t in v]
        torch._foreach_addcmul_(ref_v, [t.cpu() for t in g], [t.cpu() for t in other], value=0.25)
        prepared.clear()
        tops.kernel_for("_foreach_addcmul_.Scalar")(v, g, other, value=0.25)
        for got, want in zip(v, ref_v):
            _close(got, want)
        return list(prepared)

    v, g = _to(_tensors(shapes=shapes), DEVICE), _to(_tensors(seed=3, shapes=shapes), DEVICE)
    assert addcmul_squares(v, g, g) == [(3, 5)]
    other = list(g)
    other[2] = g[2].clone()
    assert addcmul_squares(v, g, other) == [(3, 5), (1,)]
    # a row of another dtype, a transposed row, a row with a 0-dim lead: each prepared in full
    prepared.clear()
    mixed = _tensors(shapes=shapes)
    mixed[1] = mixed[1].double()
    mixed[3] = mixed[3].transpose(0, 2)
    check("_foreach_mul_.Scalar", [mixed, 3.0])
    assert prepared == [(3, 5), (40000,), (4, 3, 2)], prepared  # rows 0, 1 and 3
    prepared.clear()
    zero_dim = [torch.tensor(2.0), torch.tensor(3.0), torch.ones(4)]
    check("_foreach_sub.List", [zero_dim, [torch.tensor(0.5), torch.tensor(1.5), torch.ones(4)]], {"alpha": 2})
    check("_foreach_pow.ScalarAndTensor", [2.0, _tensors(lo=-1.0, hi=2.0, shapes=shapes)])
    check("_foreach_add.List", [_tensors(I64, shapes=shapes), _tensors(F32, shapes=shapes)])  # promotion


def _npu_ok():
    try:
        return torch.zeros(1).to("npu").device.type == "npu"
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(DEVICE != "cpu" or not _npu_ok(), reason="npu backend not available")
def test_tables_upload_to_the_chip_from_pinned_memory_without_waiting(monkeypatch):
    """A chip's table goes up from pinned memory, asynchronously (from pageable memory the copy
    waited for the chip's stream to drain): every table of a burst of uploads, each from a
    pinned block freed at once and reused by the next, arrives intact."""
    from torch_fl.triton_ops import _foreach

    pinned = []
    zeros = torch.zeros
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: (t := zeros(*a, **k), pinned.append(t.is_pinned()))[0])
    chip = torch.device("npu")
    uploads = []
    for i in range(24):
        tensors = [v for t in range(1 + i % 5) for v in (4096 * (t + 1), 8 * t, i, 0, 0, 1000 + 20000 * t + i)]
        uploads.append((_foreach._table(tensors, torch.device("cpu")), _foreach._table(tensors, chip)))
    assert pinned == [False, True] * 24  # the CPU's tables stay pageable
    for (expected, rows, host), (got, got_rows, got_host) in uploads:
        assert got.device.type == "npu" and got_rows == rows
        assert torch.equal(got.cpu(), expected) and torch.equal(got_host, expected) and host is expected


@pytest.mark.skipif(DEVICE != "cpu" or not _npu_ok(), reason="npu backend not available")
def test_optimizer_step_on_npu_decomposes_into_its_vendor_kernels():
    """Under the interpreter the foreach family is not routed (COMPILED_ONLY): SGD with momentum
    (foreach) on npu takes torch's per-tensor decomposition, onto the chip's vendor add_/mul_,
    and ends with the CPU's parameters."""
    import torch_fl_npu
    from torch_fl import routes

    assert routes.route(torch_fl_npu.spec, "_foreach_add_.List").path != "triton"
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    npu_model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)).to("npu")
    npu_model.load_state_dict(cpu_model.state_dict())
    x = torch.randn(4, 6)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, foreach=True) for m in (cpu_model, npu_model)]
    torch_fl_npu._C.reset_fallback_stats()
    for _ in range(3):
        for model, opt, inp in ((cpu_model, opts[0], x), (npu_model, opts[1], x.to("npu"))):
            opt.zero_grad()
            model(inp).square().sum().backward()
            opt.step()
    for p, q in zip(cpu_model.parameters(), npu_model.parameters()):
        torch.testing.assert_close(q.cpu(), p, rtol=1e-5, atol=1e-6)
    stats = torch_fl_npu._C.fallback_stats()
    assert "_foreach_add_.List" not in stats, stats
    assert stats.get("add_.Tensor", {}).get("vendor", 0) >= 3 * 4, stats


def test_zz_every_foreach_op_exercised():
    """Runs last (file order): every op of the family went through one of the tests above."""
    missing = sorted(set(family_ops("foreach")) - EXERCISED)
    assert not missing, f"foreach ops not exercised: {missing}"
