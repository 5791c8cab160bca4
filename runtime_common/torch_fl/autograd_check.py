"""The autograd device validator: a gradient must come back on its forward input's device.

    torch_fl.init()                        # installs it (opt out: init(check_autograd=False)
                                           #   or TORCH_FL_AUTOGRAD_CHECK=0)
    with torch_fl.autograd_check.disabled(): ...

Where a wrong-device gradient can come from: built-in ops derive their backward from
derivatives.yaml and compute it where the forward ran (a CPU fallback copies its result back),
so the source is user code that hands gradients straight to the engine: the `backward` of a
custom `torch.autograd.Function`. What PyTorch does with such a gradient (`validate_outputs`
in the engine, right after the node returns):

- a 0-dim gradient on the wrong device is copied to the expected device without a word, so a
  gradient computed on the CPU (e.g. a scalar parameter's) goes unnoticed;
- any other one raises "Function XBackward returned an invalid gradient at index 1", which names
  neither the module nor the parameter.

Hooks cannot see either case: tensor hooks and `Node.register_hook` post-hooks run after
`validate_outputs`, on the already-copied gradient. So the validator wraps the Python entry the
engine calls for every custom Function's backward (`BackwardCFunction.apply`) and compares each
returned gradient with the input metadata the engine itself will check it against (the device
its forward input had), raising `GradientDeviceError` inside that node: before the gradient is
accumulated and before the rest of the backward runs. Parameters are named by module path,
looked up among the live modules when the error is raised.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os

import torch
from torch.autograd.function import BackwardCFunction

log = logging.getLogger("torch_fl")

ENV_VAR = "TORCH_FL_AUTOGRAD_CHECK"


class GradientDeviceError(RuntimeError):
    """A backward produced a gradient on another device than its forward input."""


def describe_parameter(tensor: torch.Tensor) -> str | None:
    """"parameter 'weight' of module 'encoder.0' (Linear)", or None if no module holds `tensor`.

    Looked up when an error is raised, not recorded while training: no per-forward hook (a global
    module hook would cost every forward and get in torch.compile's way). The path is taken from
    the outermost module that contains the owner (a compiled wrapper's inner module, not the
    wrapper: its names carry "_orig_mod.").
    """
    # type(), not isinstance(): the latter reads __class__, which some live objects warn about
    modules = [o for o in gc.get_objects() if issubclass(type(o), torch.nn.Module)]
    owners = [(m, n) for m in modules for n, p in m._parameters.items() if p is tensor]
    if not owners:
        return None
    owner, name = owners[0]
    roots = [m for m in modules if type(m).__name__ != "OptimizedModule" and any(s is owner for s in m.modules())]
    root = max(roots, key=lambda m: sum(1 for _ in m.modules()))
    path = next(p for p, s in root.named_modules() if s is owner)
    return f"parameter '{name}' of module '{path or '<root>'}' ({type(owner).__name__})"


_original_apply = BackwardCFunction.apply
_disabled_depth = 0  # global, not per thread: device backwards run in the engine's own threads


def _enabled() -> bool:
    return _disabled_depth == 0


def _describe_input(node, input_nr: int) -> str:
    """What the gradient at this edge is for. Only when raising: naming a parameter searches
    the live objects (a compiled graph's backward is a custom Function whose every edge is a
    parameter's: described on each call, it cost seconds a step)."""
    variable = getattr(node, "variable", None)  # AccumulateGrad: the leaf itself
    if variable is not None:
        return describe_parameter(variable) or f"leaf tensor of shape {tuple(variable.shape)}"
    return f"input {input_nr} of {node.name()}"


def _checked_apply(self, *grad_outputs):
    grads = _original_apply(self, *grad_outputs)
    if not _enabled():
        return grads
    as_tuple = grads if isinstance(grads, tuple) else (grads,)
    for index, ((node, input_nr), grad) in enumerate(zip(self.next_functions, as_tuple)):
        if node is None or not isinstance(grad, torch.Tensor):
            continue
        expected = node._input_metadata[input_nr].device
        if grad.device != expected:
            what = _describe_input(node, input_nr)
            function = type(self).__name__.removesuffix("Backward")
            raise GradientDeviceError(
                f"autograd device check: {function}.backward returned the gradient for {what} "
                f"(forward input {index}) on {grad.device}, but that input is on {expected}; "
                f"return it on {expected} (torch_fl.autograd_check; opt out with {ENV_VAR}=0)")
    return grads


def install() -> bool:
    """Install the validator (idempotent). False when opted out through TORCH_FL_AUTOGRAD_CHECK=0."""
    if os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "off", "no"):
        log.debug("torch_fl: autograd device check disabled by %s", ENV_VAR)
        return False
    if BackwardCFunction.apply is not _checked_apply:
        BackwardCFunction.apply = _checked_apply
        log.debug("torch_fl: autograd device check installed (custom Function backwards)")
    return True


def uninstall() -> None:
    if BackwardCFunction.apply is _checked_apply:
        BackwardCFunction.apply = _original_apply


def installed() -> bool:
    return BackwardCFunction.apply is _checked_apply


@contextlib.contextmanager
def disabled():
    """No device check for backwards run within the block (in any thread)."""
    global _disabled_depth
    _disabled_depth += 1
    try:
        yield
    finally:
        _disabled_depth -= 1
