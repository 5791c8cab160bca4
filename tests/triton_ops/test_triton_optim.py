"""torch_fl.triton_ops, optim family: the fused optimizers' steps (`_fused_adam_`,
`_fused_adamw_`, `_fused_sgd_`, plain and `tensor_lr`) against aten's CPU kernels, and
torch.optim's `fused=True` on the simulated npu against the CPU.

The table launch (one for a whole call) runs under Triton's interpreter on CPU tensors here,
compiled on a GPU with TORCH_FL_TRITON_TEST_DEVICE=cuda. A chip whose Triton is interpreted
(the simulated `npu`) does not route the family (COMPILED_ONLY): its fused steps run on the
host (see the npu tests at the end); on nvgpu, tests/triton_ops/test_triton_fast_foreach.py.
"""
from triton_device import DEVICE  # noqa: I001  (sets TRITON_INTERPRET before triton is imported)

import pytest
import torch

import torch_fl.triton_ops as tops
from torch_fl.triton_ops import family_ops, kernel_for

pytestmark = pytest.mark.skipif(not tops.available(), reason="triton not installed")

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
# A rounding or two (half types: one ulp, where the float32 results sit near a rounding boundary).
TOL = {F32: (1e-6, 1e-6), F64: (1e-12, 1e-12), F16: (1e-3, 1e-3), BF16: (8e-3, 8e-3)}
# One tensor spans several table rows (16384 elements each).
SHAPES = [(3, 5), (40000,), (1,), (2, 3, 4)]
EXERCISED: set = set()


def _lists(dtype, count, shapes=SHAPES, seed=0, positive=()):
    g = torch.Generator().manual_seed(seed)
    lists = []
    for k in range(count):
        values = [torch.randn(s, generator=g, dtype=F64) for s in shapes]
        lists.append([(v.abs() + 0.1 if k in positive else v).to(dtype).to(DEVICE) for v in values])
    return lists


def _assert_lists_close(got, expected, dtype):
    rtol, atol = TOL[dtype]
    for a, b in zip(got, expected):
        for x, y in zip(a, b):
            torch.testing.assert_close(x.cpu(), y, rtol=rtol, atol=atol)


def _cpu(lists):
    return [[t.cpu().clone() for t in ts] for ts in lists]


def _run(op, lists, steps, kwargs):
    """op on DEVICE copies of `lists` (a Triton kernel) and aten's on CPU copies; both results.
    Half types are referenced as CUDA computes them, in float32 rounded once at the end (aten's
    CPU kernels round otherwise: its bfloat16 `_fused_sgd_` without momentum is off by whole
    units in torch 2.13)."""
    EXERCISED.add(op)
    name, _, overload = op.partition(".")
    aten = getattr(getattr(torch.ops.aten, name), overload or "default")
    dtype = lists[0][0].dtype
    wide = F32 if dtype in (F16, BF16) else dtype
    expected = [[t.cpu().to(wide) for t in ts] for ts in lists]
    cpu_kwargs = {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
    aten(*expected, *([[s.cpu() for s in steps]] if steps is not None else []), **cpu_kwargs)
    kernel_for(op)(*lists, *([steps] if steps is not None else []), **kwargs)
    return lists, [[t.to(dtype) for t in ts] for ts in expected]


ADAM_CASES = {"plain": {}, "maximize": {"maximize": True}, "no_decay": {"weight_decay": 0.0},
              "grad_scale": {"grad_scale": 4.0}, "found_inf": {"grad_scale": 4.0, "found_inf": 1.0},
              "finite": {"grad_scale": 2.0, "found_inf": 0.0}}


# Every case in float32; the other dtypes (their loads, stores and compute type) in two.
ADAM_DTYPE_CASES = [pytest.param(dtype, ADAM_CASES[name], id=f"{str(dtype)[6:]}-{name}")
                    for dtype, names in ((F32, ADAM_CASES), (F64, ("plain", "grad_scale")),
                                         (F16, ("plain", "grad_scale")), (BF16, ("plain", "grad_scale")))
                    for name in names]


@pytest.mark.parametrize("dtype,case", ADAM_DTYPE_CASES)
@pytest.mark.parametrize("op", ["_fused_adam_", "_fused_adamw_"])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_and_adamw_match_the_cpu_kernels(op, dtype, amsgrad, case):
    """Every list the step writes (parameters, states, and the gradients when unscaled) equals
    aten's CPU kernel's within one rounding; found_inf == 1 leaves every tensor as it was."""
    params, grads, exp_avgs, exp_avg_sqs, maxima = _lists(dtype, 5, positive=(2, 3, 4))
    steps = [torch.tensor(float(k + 3)).to(DEVICE) for k in range(len(SHAPES))]
    kwargs = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8, amsgrad=amsgrad, maximize=False)
    kwargs.update({k: v for k, v in case.items() if k not in ("grad_scale", "found_inf")})
    for key in ("grad_scale", "found_inf"):
        if key in case:
            kwargs[key] = torch.tensor(case[key]).to(DEVICE)
    lists = [params, grads, exp_avgs, exp_avg_sqs, maxima if amsgrad else []]
    before = _cpu(lists)
    got, expected = _run(op, lists, steps, kwargs)
    _assert_lists_close(got, expected, dtype)
    if case.get("found_inf") == 1.0:
        for a, b in zip(got, before):
            assert all(torch.equal(x.cpu(), y) for x, y in zip(a, b))
    else:
        assert not torch.equal(got[0][1].cpu(), before[0][1])  # the step did update


@pytest.mark.parametrize("op", ["_fused_adam_.tensor_lr", "_fused_adamw_.tensor_lr"])
@pytest.mark.parametrize("lr_on_host", [False, True])
def test_adam_with_a_tensor_lr(op, lr_on_host):
    """The tensor_lr overloads: an lr on the device is read by the kernel, a host one before."""
    lists = _lists(F32, 4, positive=(2, 3))
    steps = [torch.tensor(2.0).to(DEVICE) for _ in SHAPES]
    lr = torch.tensor(0.02) if lr_on_host else torch.tensor(0.02).to(DEVICE)
    kwargs = dict(lr=lr, beta1=0.8, beta2=0.99, weight_decay=0.05, eps=1e-6, amsgrad=False, maximize=False)
    got, expected = _run(op, [*lists, []], steps, kwargs)
    _assert_lists_close(got, expected, F32)


SGD_CASES = [{}, {"maximize": True, "weight_decay": 0.0}, {"grad_scale": 8.0}, {"grad_scale": 8.0, "found_inf": 1.0}]


@pytest.mark.parametrize("dtype,case", [(F32, case) for case in SGD_CASES] + [(F64, {}), (BF16, {}), (BF16, SGD_CASES[2])])
@pytest.mark.parametrize("momentum,first,nesterov", [(0.0, False, False), (0.9, True, False), (0.9, False, False),
                                                     (0.9, False, True)])
def test_sgd_matches_the_cpu_kernel(dtype, momentum, first, nesterov, case):
    params, grads, buffers = _lists(dtype, 3)
    kwargs = dict(weight_decay=0.01, momentum=momentum, lr=0.1, dampening=0.1 if not nesterov else 0.0,
                  nesterov=nesterov, maximize=False, is_first_step=first)
    kwargs.update({k: v for k, v in case.items() if k not in ("grad_scale", "found_inf")})
    for key in ("grad_scale", "found_inf"):
        if key in case:
            kwargs[key] = torch.tensor(case[key]).to(DEVICE)
    got, expected = _run("_fused_sgd_", [params, grads, buffers if momentum else []], None, kwargs)
    _assert_lists_close(got, expected, dtype)


def test_sgd_with_a_tensor_lr():
    params, grads, buffers = _lists(F32, 3)
    kwargs = dict(weight_decay=0.0, momentum=0.5, lr=torch.tensor(0.3).to(DEVICE), dampening=0.0, nesterov=False,
                  maximize=False, is_first_step=False)
    got, expected = _run("_fused_sgd_.tensor_lr", [params, grads, buffers], None, kwargs)
    _assert_lists_close(got, expected, F32)


def test_channels_last_parameters_are_updated_in_their_layout():
    """A dense tensor that is not contiguous (a channels-last convolution weight): its gradient
    and states share its strides, and the kernel updates it element for element."""
    shape = (4, 3, 5, 5)
    lists = [[t.contiguous(memory_format=torch.channels_last) for t in ts] for ts in _lists(F32, 4, [shape], positive=(2, 3))]
    steps = [torch.tensor(1.0).to(DEVICE)]
    kwargs = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)
    got, expected = _run("_fused_adamw_", [*lists, []], steps, kwargs)
    assert not got[0][0].is_contiguous()
    _assert_lists_close(got, expected, F32)


def test_lists_that_do_not_match_are_refused_with_their_names():
    params, grads, exp_avgs, exp_avg_sqs = _lists(F32, 4)
    steps = [torch.tensor(1.0).to(DEVICE) for _ in SHAPES]
    kwargs = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match="self has 4, exp_avgs 3"):
        kernel_for("_fused_adam_")(params, grads, exp_avgs[:3], exp_avg_sqs, [], steps, **kwargs)
    grads[1] = grads[1].double()
    with pytest.raises(RuntimeError, match=r"grads\[1\].*must match self\[1\]"):
        kernel_for("_fused_adam_")(params, grads, exp_avgs, exp_avg_sqs, [], steps, **kwargs)


def _npu_ok() -> bool:
    try:
        import torch_fl_npu  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(DEVICE != "cpu" or not _npu_ok(), reason="npu backend not available")
@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_fused_optimizers_on_npu_take_the_host_under_the_interpreter(optimizer):
    """Under the interpreter the family is not routed (a launch per tensor there is slower
    than the host's step): torch.optim's fused=True on npu takes the spec's next step, the
    CPU, and ends with the parameters the CPU's fused optimizer gives."""
    import torch_fl_npu
    from torch_fl import routes

    assert routes.route(torch_fl_npu.spec, "_fused_adamw_").path != "triton"
    make = {
        "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
        "sgd": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True, fused=True),
    }[optimizer]
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    npu_model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    npu_model.load_state_dict(cpu_model.state_dict())
    npu_model.to("npu")
    x = torch.randn(16, 8)
    opts = [make(m.parameters()) for m in (cpu_model, npu_model)]
    torch_fl_npu._C.reset_fallback_stats()
    for _ in range(3):
        for model, opt, inp in ((cpu_model, opts[0], x), (npu_model, opts[1], x.to("npu"))):
            opt.zero_grad()
            model(inp).square().sum().backward()
            opt.step()
    for p, q in zip(cpu_model.parameters(), npu_model.parameters()):
        torch.testing.assert_close(q.cpu(), p, rtol=1e-5, atol=1e-6)
    fused = {op: paths for op, paths in torch_fl_npu._C.fallback_stats().items() if op.startswith("_fused_")}
    assert fused and all(set(paths) == {"cpu"} for paths in fused.values()), fused


@pytest.mark.skipif(DEVICE != "cpu" or not _npu_ok(), reason="npu backend not available")
def test_grad_scaler_with_a_fused_optimizer_skips_a_step_with_an_inf_on_npu():
    """GradScaler hands a fused optimizer its scale and found_inf (no host sync): a step whose
    gradients hold an inf leaves the parameters alone, a finite one updates them unscaled."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to("npu")
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)
    scaler = torch.amp.GradScaler("npu", init_scale=1024.0)
    before = [p.detach().cpu().clone() for p in model.parameters()]
    loss = model(torch.full((2, 4), float("inf"), device="npu")).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert all(torch.equal(p.detach().cpu(), b) for p, b in zip(model.parameters(), before))
    assert scaler.get_scale() == 512.0
    opt.zero_grad()
    reference = torch.nn.Linear(4, 3)
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=0.1)
    x = torch.randn(2, 4)
    scaler.scale(model(x.to("npu")).sum()).backward()
    scaler.step(opt)
    reference(x).sum().backward()
    ref_opt.step()
    for p, q in zip(reference.parameters(), model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-5, atol=1e-6)


def test_zz_every_optim_op_exercised():
    """Runs last (file order): every op of the family went through one of the tests above."""
    missing = sorted(set(family_ops("optim")) - EXERCISED)
    assert not missing, missing
