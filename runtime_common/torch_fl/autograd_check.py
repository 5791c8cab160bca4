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
accumulated and before the rest of the backward runs. Parameters are named by module: a global
module forward pre-hook records "<module path>.<parameter>" for the parameters of every module
that runs a forward.
"""
from __future__ import annotations

import contextlib
import logging
import os
import weakref

import torch
from torch.autograd.function import BackwardCFunction
from torch.nn.modules.module import register_module_forward_pre_hook

log = logging.getLogger("torch_fl")

ENV_VAR = "TORCH_FL_AUTOGRAD_CHECK"


class GradientDeviceError(RuntimeError):
    """A backward produced a gradient on another device than its forward input."""


def _own(module) -> frozenset:
    return frozenset(id(p) for p in module._parameters.values() if p is not None)


class _ParameterNames:
    """parameter -> (module path, module class, parameter name), learned from forwards."""

    def __init__(self):
        # Keyed by id with a weak reference each (a WeakKeyDictionary would compare tensors with ==).
        self._names: dict[int, tuple[weakref.ref, tuple[str, str, str]]] = {}
        self._scanned: "weakref.WeakKeyDictionary[torch.nn.Module, frozenset]" = weakref.WeakKeyDictionary()
        self._paths: "weakref.WeakKeyDictionary[torch.nn.Module, str]" = weakref.WeakKeyDictionary()

    def pre_forward(self, module, args):
        # The outermost module that runs names everything under it; a submodule run on its own
        # first is renamed by its parent later (the longer path, from the outermost module, wins).
        # A module is rescanned when its own parameters changed (one replaced or added).
        if self._scanned.get(module) == _own(module):
            return
        base = self._paths.get(module, "")
        for path, sub in module.named_modules():
            full = ".".join(p for p in (base, path) if p)
            if len(full) >= len(self._paths.get(sub, "")):
                self._paths[sub] = full
            self._scanned[sub] = _own(sub)
            for name, param in sub.named_parameters(recurse=False):
                known = self._get(param)
                if known is None or len(self._paths[sub]) >= len(known[0]):
                    key = id(param)
                    ref = weakref.ref(param, lambda _, key=key: self._names.pop(key, None))
                    self._names[key] = (ref, (self._paths[sub], type(sub).__name__, name))

    def _get(self, tensor):
        ref, entry = self._names.get(id(tensor), (None, None))
        return entry if ref is not None and ref() is tensor else None

    def describe(self, tensor: torch.Tensor) -> str | None:
        entry = self._get(tensor)
        if entry is None:
            return None
        path, cls, name = entry
        return f"parameter '{name}' of module '{path or '<root>'}' ({cls})"


_names = _ParameterNames()
_disabled_depth = 0  # global, not per thread: device backwards run in the engine's own threads
_original_apply = BackwardCFunction.apply
_forward_hook = None


def _enabled() -> bool:
    return _disabled_depth == 0


def _forward_input(node, input_nr: int):
    """What the gradient at this edge is for: (description, expected device) or None."""
    metadata = node._input_metadata[input_nr]
    variable = getattr(node, "variable", None)  # AccumulateGrad: the leaf itself
    if variable is not None:
        what = _names.describe(variable) or f"leaf tensor of shape {tuple(variable.shape)}"
    else:
        what = f"input {input_nr} of {node.name()}"
    return what, metadata.device


def _checked_apply(self, *grad_outputs):
    grads = _original_apply(self, *grad_outputs)
    if not _enabled():
        return grads
    as_tuple = grads if isinstance(grads, tuple) else (grads,)
    for index, ((node, input_nr), grad) in enumerate(zip(self.next_functions, as_tuple)):
        if node is None or not isinstance(grad, torch.Tensor):
            continue
        what, expected = _forward_input(node, input_nr)
        if grad.device != expected:
            function = type(self).__name__.removesuffix("Backward")
            raise GradientDeviceError(
                f"autograd device check: {function}.backward returned the gradient for {what} "
                f"(forward input {index}) on {grad.device}, but that input is on {expected}; "
                f"return it on {expected} (torch_fl.autograd_check; opt out with {ENV_VAR}=0)")
    return grads


def install() -> bool:
    """Install the validator (idempotent). False when opted out through TORCH_FL_AUTOGRAD_CHECK=0."""
    global _forward_hook
    if os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "off", "no"):
        log.debug("torch_fl: autograd device check disabled by %s", ENV_VAR)
        return False
    if BackwardCFunction.apply is not _checked_apply:
        BackwardCFunction.apply = _checked_apply
        _forward_hook = register_module_forward_pre_hook(_names.pre_forward)
        log.debug("torch_fl: autograd device check installed (custom Function backwards)")
    return True


def uninstall() -> None:
    global _forward_hook
    if BackwardCFunction.apply is _checked_apply:
        BackwardCFunction.apply = _original_apply
    if _forward_hook is not None:
        _forward_hook.remove()
        _forward_hook = None


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
