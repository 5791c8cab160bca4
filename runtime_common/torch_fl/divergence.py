"""Which aten op first gave a different answer on the chip than on the CPU.

    report = torch_fl.divergence.check(model_step, batch)     # runs it on the chip
    print(report)          # the ops whose chip result differs from the CPU's, first first

A wrong result at the end of a model says nothing about where it came from. Under the check
every aten op that touches a chip tensor runs twice: on the chip as usual, and on CPU copies
of the very arguments the chip op received. Each op is thus compared on equal inputs, so an
error found is that op's own (its vendor kernel, Triton kernel or composite), not one it
inherited from earlier ops, and the first one listed is where a wrong answer began.

Not compared: ops with random or uninitialised results (their values are not defined to
agree), and ops the CPU rejects (the chip's result stands). Tolerances are torch.testing's
for the result's dtype, or the caller's.
"""
from __future__ import annotations

import dataclasses

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

__all__ = ["RANDOM_OPS", "Divergence", "DivergenceReport", "DivergenceMode", "check"]

# aten ops (base names) whose results are random draws: a chip's generator need not reproduce
# the CPU's stream (CUDA's does not), so their values are not defined to agree.
RANDOM_OPS = frozenset([
    "uniform_", "normal", "normal_", "bernoulli", "bernoulli_", "random_",
    "exponential_", "geometric_", "log_normal_", "cauchy_", "multinomial", "randperm", "rand",
    "randn", "randint", "rand_like", "randn_like", "randint_like", "native_dropout", "poisson",
    "binomial", "_standard_gamma", "rrelu_with_noise", "_fused_dropout", "fractional_max_pool2d",
    "fractional_max_pool3d", "_philox_engine_inputs",
])
# Values not defined to agree between two devices: random draws and uninitialised memory.
_UNCOMPARED = RANDOM_OPS | frozenset([
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted",
    "resize_", "set_",
])


@dataclasses.dataclass(frozen=True)
class Divergence:
    index: int       # the op's position among the compared calls (0: the first)
    op: str          # "bmm" or "add.Tensor"
    output: int      # which of its tensor outputs
    detail: str      # torch.testing's message: how many elements, the largest difference

    def __str__(self) -> str:
        return f"#{self.index} aten::{self.op} output {self.output}: {self.detail}"


@dataclasses.dataclass
class DivergenceReport:
    chip: str
    compared: int = 0
    divergences: list[Divergence] = dataclasses.field(default_factory=list)

    @property
    def first(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None

    def __str__(self) -> str:
        if not self.divergences:
            return f"{self.compared} aten ops on {self.chip} compared with the CPU: all agree"
        lines = [f"{len(self.divergences)} of {self.compared} aten ops on {self.chip} differ from the CPU "
                 f"(first: aten::{self.divergences[0].op}):"]
        lines += [f"  {d}" for d in self.divergences]
        return "\n".join(lines)


def _op_name(func) -> str:
    overload = func._overloadname
    return func._schema.name.split("::", 1)[-1] + ("" if overload == "default" else f".{overload}")


class DivergenceMode(TorchDispatchMode):
    """Runs each chip op again on CPU copies of its arguments and compares the results."""

    def __init__(self, chip: str | None = None, rtol: float | None = None, atol: float | None = None,
                 limit: int = 20):
        super().__init__()
        self.chip = chip or torch._C._get_privateuse1_backend_name()
        self.rtol, self.atol, self.limit = rtol, atol, limit
        self.report = DivergenceReport(self.chip)

    def _on_chip(self, value) -> bool:
        return isinstance(value, torch.Tensor) and value.device.type == self.chip

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _op_name(func)
        leaves, _ = tree_flatten((args, kwargs))
        if name.split(".")[0] in _UNCOMPARED or not any(self._on_chip(v) for v in leaves):
            return func(*args, **kwargs)
        # The CPU copies are taken before the chip op runs: an in-place op changes its inputs.
        to_cpu = lambda v: v.detach().cpu().clone() if self._on_chip(v) else v  # noqa: E731
        cpu_args, cpu_kwargs = tree_map(to_cpu, args), tree_map(to_cpu, kwargs)
        cpu_kwargs = {k: (torch.device("cpu") if isinstance(v, torch.device) and v.type == self.chip else v)
                      for k, v in cpu_kwargs.items()}
        result = func(*args, **kwargs)
        try:
            expected = func(*cpu_args, **cpu_kwargs)
        except Exception:  # noqa: BLE001 - the CPU rejects it: nothing to compare against
            return result
        index = self.report.compared
        self.report.compared += 1
        actual_leaves = [v for v in tree_flatten(result)[0] if isinstance(v, torch.Tensor)]
        expected_leaves = [v for v in tree_flatten(expected)[0] if isinstance(v, torch.Tensor)]
        for output, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
            try:
                torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=self.rtol, atol=self.atol,
                                           equal_nan=True, check_device=False,
                                           check_stride=False)
            except AssertionError as error:
                if len(self.report.divergences) < self.limit:
                    detail = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
                    self.report.divergences.append(Divergence(index, name, output, detail))
        return result


def check(fn, *args, chip: str | None = None, rtol: float | None = None, atol: float | None = None,
          **kwargs) -> DivergenceReport:
    """Runs fn(*args, **kwargs) (on chip tensors) under DivergenceMode; the report."""
    with DivergenceMode(chip, rtol=rtol, atol=atol) as mode:
        fn(*args, **kwargs)
    return mode.report
