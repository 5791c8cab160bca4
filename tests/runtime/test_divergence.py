"""torch_fl.divergence: the first aten op whose chip result differs from the CPU's.

A chip kernel made wrong on purpose (a `torch.library` override of the chip's `sin`) must be
named, with the op's index among the compared calls; correct work, forward and backward, must
compare clean; random draws are not compared."""
from __future__ import annotations

import os

import pytest
import torch

import torch_fl.divergence as divergence

CHIP = os.environ.get("TEST_CHIP", "npu")
if "TEST_CHIP" in os.environ:  # a chip beside a native accelerator is registered when asked for
    import torch_fl as _torch_fl

    _torch_fl.init(chips=[CHIP])
if CHIP == "npu":
    pytestmark = pytest.mark.usefixtures("npu_backend")


@pytest.fixture
def wrong_sin():
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("sin", lambda x: torch.ops.aten.cos(x), "PrivateUse1")
    yield
    lib._destroy()
    x = torch.tensor([0.5]).to(CHIP)  # the chip's own sin is back for the tests after this one
    assert torch.allclose(x.sin().cpu(), torch.tensor([0.5]).sin())


def _mlp_step(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4)).to(device)
    x = torch.randn(5, 8).to(device)

    def step():
        model(x).softmax(-1).sum().backward()
    return step


def test_correct_work_forward_and_backward_agrees():
    report = divergence.check(_mlp_step(CHIP))
    assert report.compared > 15, report  # forward and backward ops were compared
    assert report.first is None, report
    assert "all agree" in str(report)


def test_names_the_first_wrong_op(wrong_sin):
    x = torch.linspace(0.1, 2.0, 7).to(CHIP)
    report = divergence.check(lambda: (x.exp() + 1).sin().mul(3).sum())
    first = report.first
    assert first is not None and first.op == "sin" and first.index == 2, report
    # every later op gets the chip's (wrong) inputs on the CPU as well: only sin is named
    assert [d.op for d in report.divergences] == ["sin"], report
    assert "aten::sin" in str(report) and "differ from the CPU" in str(report)


def test_random_draws_are_not_compared():
    x = torch.ones(1000).to(CHIP)
    report = divergence.check(lambda: torch.nn.functional.dropout(x, 0.5).sum())
    assert report.first is None, report


def test_in_place_ops_compare_their_inputs_before_the_change():
    x = torch.arange(6.0).to(CHIP)
    report = divergence.check(lambda: x.mul_(2).add_(1))
    assert report.compared == 2 and report.first is None, report
    assert torch.equal(x.cpu(), torch.arange(6.0) * 2 + 1)
