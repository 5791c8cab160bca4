"""The autograd device validator: a custom Function's gradient on the wrong device is caught."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_fl
from torch_fl import autograd_check
from torch_fl.autograd_check import GradientDeviceError

from e2e_helpers import run_python


@pytest.fixture(autouse=True)
def validator():
    assert torch_fl.init()["npu"].available
    assert autograd_check.installed()  # init() installs it
    yield


class ScaleOnHost(torch.autograd.Function):
    """x * w whose backward computes w's gradient on the host and returns it there (the bug)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, (grad.cpu() * x.cpu()).sum_to_size(w.shape)


class Scale(nn.Module):
    def __init__(self, shape=()):
        super().__init__()
        self.gain = nn.Parameter(torch.full(shape, 2.0))

    def forward(self, x):
        return ScaleOnHost.apply(x, self.gain)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), Scale()).to("npu")


def test_scalar_gradient_on_the_host_is_named_before_backward_completes():
    net = model()
    loss = net(torch.randn(3, 4, device="npu")).sum()
    with pytest.raises(GradientDeviceError) as caught:
        loss.backward()
    message = str(caught.value)
    assert "parameter 'gain' of module '1' (Scale)" in message
    assert "on cpu" in message and "is on npu:0" in message
    assert "ScaleOnHost.backward" in message
    # The backward stopped at that node: the Linear before it got no gradient.
    assert net[0].weight.grad is None and net[1].gain.grad is None


def test_pytorch_alone_accepts_that_gradient_silently():
    """The case the validator exists for: the engine copies a 0-dim gradient to the device."""
    net = model()
    loss = net(torch.randn(3, 4, device="npu")).sum()
    with autograd_check.disabled():
        loss.backward()
    assert net[1].gain.grad.device == torch.device("npu", 0)
    assert net[0].weight.grad is not None


def test_tensor_gradient_error_names_the_parameter_not_just_an_index():
    """A gradient with dims: PyTorch would raise too, but naming only "index 1" of the node."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), Scale((4,)))).to("npu")
    loss = net(torch.randn(3, 4, device="npu")).sum()
    with pytest.raises(GradientDeviceError) as caught:
        loss.backward()
    assert "parameter 'gain' of module '1.1' (Scale)" in str(caught.value)


def test_non_leaf_input_and_unnamed_leaf_are_described():
    class HostGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad.cpu()

    x = torch.randn(3, device="npu", requires_grad=True)
    with pytest.raises(GradientDeviceError, match=r"for input 0 of MulBackward0 .*on cpu, .*is on npu:0"):
        HostGrad.apply(x * 3).sum().backward()
    with pytest.raises(GradientDeviceError, match=r"for leaf tensor of shape \(3,\) .*on cpu, .*is on npu:0"):
        HostGrad.apply(x).sum().backward()


def test_correct_gradients_pass():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = torch.arange(3.0, device="npu", requires_grad=True)
    Square.apply(x).sum().backward()
    assert x.grad.cpu().tolist() == [0.0, 2.0, 4.0]


def test_opt_out_by_environment_and_by_argument():
    proc = run_python("""
        import torch, torch_fl
        from torch_fl import autograd_check
        torch_fl.init()
        print(autograd_check.installed())
    """, env={"TORCH_FL_AUTOGRAD_CHECK": "0"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == "False"
    proc = run_python("""
        import torch, torch_fl
        from torch_fl import autograd_check
        torch_fl.init(check_autograd=False)
        print(autograd_check.installed())
        torch_fl.init()
        print(autograd_check.installed())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["False", "True"]


def test_torch_compile_is_unaffected():
    """No global module hook: torch.compile neither traces the validator nor warns about hooks."""
    import warnings

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        compiled = torch.compile(model, backend="aot_eager")
        compiled(torch.randn(2, 4)).sum().backward()
    assert model[0].weight.grad.shape == (4, 4)


def test_a_correct_backward_does_not_search_for_parameter_names(monkeypatch):
    """Naming a parameter searches the live objects (gc.get_objects): only for an error. A
    compiled graph's backward is a custom Function with an edge per parameter (torch 2.11's
    AOTAutograd); searched on every call, it made compiled training on the H100 take seconds a
    step (474-1220x native cuda). The custom Function here has the same edges."""
    import gc

    class Affine(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias):
            ctx.save_for_backward(x, weight)
            return x @ weight.t() + bias

        @staticmethod
        def backward(ctx, grad):
            x, weight = ctx.saved_tensors
            return grad @ weight, grad.t() @ x, grad.sum(0)

    searches = []
    real = gc.get_objects
    monkeypatch.setattr(gc, "get_objects", lambda *a, **k: (searches.append(1), real(*a, **k))[1])
    layer = nn.Linear(4, 8).to("npu")
    for _ in range(2):
        Affine.apply(torch.randn(3, 4, device="npu"), layer.weight, layer.bias).sum().backward()
    compiled = torch.compile(nn.Sequential(layer, nn.ReLU()), backend="aot_eager")
    compiled(torch.randn(3, 4, device="npu")).sum().backward()
    assert layer.weight.grad.device.type == "npu" and layer.bias.grad.shape == (8,)
    assert searches == []
