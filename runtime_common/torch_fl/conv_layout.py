"""The memory format of a chip's convolutions, as fake tensors predict it.

When torch traces (fake tensors: torch.compile, torch.export) it predicts a convolution's
output strides from the backend it would pick for the operands' device; a PrivateUse1 device's
is `Overrideable`, predicted contiguous whatever the operands. Inductor asserts the strides it
was told (`assert_size_stride`), and its layout optimisation hands convolutions channels-last
operands: a chip kernel that returns channels-last, as cuDNN (nvgpu's) does, failed the
compiled graph (compiled ResNet-18 on nvgpu; any conv net on npu once layout optimisation ran).

The contract for a chip's convolution kernels is torch's own for 2-d convolutions on cuDNN and
oneDNN: the outputs of a 4-d convolution are channels-last when the input or the weight is,
else contiguous; for `convolution_backward`, grad_input and grad_weight alike (grad_bias is
1-d). Other convolutions (1-d, 3-d) return contiguous outputs: torch's host 3-d convolution
does so, or does not, by its own heuristics, and a chip's chain may end there (Inductor's
layout optimisation changes 2-d convolutions only).
`install()` makes fake tensors on a chip's devices say so; the generated suites check that the
chip's kernels keep it (torch_fl.testing.compile, real strides against fake ones).
"""
from __future__ import annotations

import functools

import torch

__all__ = ["install", "memory_format"]


def memory_format(input: torch.Tensor, weight: torch.Tensor) -> torch.memory_format:
    """The layout a chip's convolution of `input` by `weight` returns (cuDNN's rule, 2-d)."""
    from torch._prims_common import suggest_memory_format

    if input.dim() == 4 and torch.channels_last in (suggest_memory_format(input), suggest_memory_format(weight)):
        return torch.channels_last
    return torch.contiguous_format


_chips: set[str] = set()


def install(chip: str) -> None:
    """Fake tensors on `chip`'s devices get the contract's strides; other devices keep torch's
    prediction."""
    from torch._subclasses import fake_impls

    _chips.add(chip)
    aten = torch.ops.aten
    for op in (aten.convolution.default, aten.convolution_backward.default):
        torch_rule = fake_impls.op_implementations_dict.get(op)
        if torch_rule is not None and not getattr(torch_rule, "_torch_fl_chips", False):
            fake_impls.op_implementations_dict[op] = _chip_rule(torch_rule)


def _chip_rule(torch_rule):
    @functools.wraps(torch_rule)
    def rule(fake_mode, func, *args, **kwargs):
        out = torch_rule(fake_mode, func, *args, **kwargs)
        input, weight = _operands(func, args, kwargs)
        if input.fake_device.type not in _chips or not _static(input, weight):
            return out
        fmt = memory_format(input, weight)
        if fmt is torch.contiguous_format:   # torch's prediction for the chip already
            return out
        with fake_mode:
            if func is torch.ops.aten.convolution.default:
                return out.contiguous(memory_format=fmt)
            grad_input, grad_weight, grad_bias = out
            return (None if grad_input is None else grad_input.contiguous(memory_format=fmt),
                    None if grad_weight is None else grad_weight.contiguous(memory_format=fmt),
                    grad_bias)

    rule._torch_fl_chips = True
    return rule


def _operands(func, args, kwargs):
    """(input, weight) of convolution(input, weight, ...) or convolution_backward(grad, input, weight, ...)."""
    first = 1 if func is torch.ops.aten.convolution_backward.default else 0
    names = ("input", "weight")
    return tuple(args[first + i] if len(args) > first + i else kwargs[name] for i, name in enumerate(names))


def _static(*tensors: torch.Tensor) -> bool:
    # Symbolic sizes keep torch's prediction (as torch's own rule does): asking their layout
    # would guard on them. Inductor's layout optimisation is off for dynamic shapes.
    return all(isinstance(s, int) for t in tensors for s in (*t.shape, *t.stride()))
