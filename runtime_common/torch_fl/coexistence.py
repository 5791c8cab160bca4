"""A generated chip beside a native accelerator in one process: do no harm.

Since torch 2.8 (still so in 2.14) a registered PrivateUse1 backend becomes the process's one
"accelerator" (`torch.accelerator`, `at::getAccelerator`), and the autograd engine then finds no
stream for the nodes of a native accelerator's tensors: every backward over CUDA tensors fails
with "opt_ready_stream && opt_parent_stream INTERNAL ASSERT FAILED" (torch/csrc/autograd/
engine.cpp; pytorch/pytorch#161129, whose fix, PR #161130, was closed unmerged). So:

- At `import torch` (the chip's `torch.backends` entry point) a chip registers only where torch
  drives no native accelerator (CUDA or ROCm, XPU, MPS with a device present). Beside one it
  waits to be asked, and `torch.device("cuda")` work runs as if the chip were not installed.
- Asked means: `torch_fl.init(chips=["nvgpu"])`, `torch_fl.set_default_device("nvgpu")`, or
  `TORCH_FL_CHIPS=nvgpu` (a comma list, or `all`; `none` keeps every chip out, also where there
  is no native accelerator) in the environment before `import torch`.
- A chip registered beside a native accelerator: a backward whose graph reaches the native
  device (its outputs, or any node's gradient, as a copy from a native leaf to the chip makes)
  is refused with `NativeBackwardError` before the engine asserts, saying why and the ways out;
  `python -m torch_fl doctor` reports the condition.
"""
from __future__ import annotations

import functools
import os
import sys
import warnings

__all__ = ["ENV", "NativeBackwardError", "autoload_decision", "install_backward_guard", "native_accelerators",
           "remove_backward_guard", "requested_chips"]

ENV = "TORCH_FL_CHIPS"
UPSTREAM_ISSUE = "https://github.com/pytorch/pytorch/issues/161129"


class NativeBackwardError(RuntimeError):
    """A backward over a native accelerator's tensors in a process where a generated chip holds
    torch's accelerator slot: torch's autograd engine would fail an internal assert."""


@functools.cache
def native_accelerators() -> tuple[str, ...]:
    """The native device types torch drives in this process and that have a device: "cuda"
    (also ROCm), "xpu", "mps". CUDA is counted through NVML, as torch.cuda.is_available() does
    under PYTORCH_NVML_BASED_CUDA_CHECK: the check must neither initialise CUDA nor poison fork,
    since it runs inside `import torch`. Asked once a process (the import, init(), each
    registration and doctor all ask)."""
    import torch

    found = []
    if torch.version.cuda or torch.version.hip:
        counter = torch.cuda._device_count_amdsmi if torch.version.hip else torch.cuda._device_count_nvml
        try:
            count = counter()
        except Exception:  # noqa: BLE001 - no management library: ask the runtime (a CUDA build only)
            count = -1
        if count < 0:
            count = torch.cuda.device_count()
        if count > 0:
            found.append("cuda")
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and getattr(torch._C, "_has_xpu", False) and xpu.device_count() > 0:
        found.append("xpu")
    if torch.backends.mps.is_available():
        found.append("mps")
    return tuple(found)


def requested_chips() -> frozenset[str] | None:
    """The chips TORCH_FL_CHIPS names ("all" for every one), or None where it is unset."""
    value = os.environ.get(ENV)
    if value is None or not value.strip():
        return None
    names = frozenset(name.strip() for name in value.split(",") if name.strip())
    if "none" in names and len(names) > 1:
        raise ValueError(f"{ENV}={value!r}: 'none' cannot be combined with chip names")
    return frozenset() if names == {"none"} else names


def autoload_decision(chip: str) -> tuple[bool, str]:
    """Whether `import torch` registers `chip`, and why (the reason is shown when it does not)."""
    requested = requested_chips()
    if requested is not None:
        if "all" in requested or chip in requested:
            return True, f"{ENV} asks for it"
        return False, f"{ENV}={os.environ[ENV]} does not name it"
    native = native_accelerators()
    if native:
        return False, (f"torch drives {', '.join(native)} in this process, and a registered chip would break "
                       f"autograd on it ({UPSTREAM_ISSUE}); ask for the chip: torch_fl.init(chips=[{chip!r}]), "
                       f"torch_fl.set_default_device({chip!r}) or {ENV}={chip}")
    return True, "no native accelerator in this process"


def _graph_roots(outputs) -> list:
    """The autograd nodes a backward starts from (tensors or GradientEdges)."""
    import torch

    items = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    nodes = []
    for item in items:
        node = item.grad_fn if isinstance(item, torch.Tensor) else getattr(item, "node", None)
        if node is not None:
            nodes.append(node)
    return nodes


def _native_device_in_graph(outputs, native: tuple[str, ...], walk=None) -> str | None:
    """The first native device type a backward from `outputs` would compute a gradient on:
    the outputs' own, or any node's input metadata (the device of the gradient it receives).
    A walk over the graph, paid only where a chip is registered beside a native accelerator:
    `walk` (the chip's C++ one, `_C._autograd_graph_reaches`) when the outputs are tensors,
    else here, some 2 microseconds a node."""
    import torch

    items = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    if walk is not None and all(isinstance(item, torch.Tensor) for item in items):
        return walk(items, list(native))
    for item in items:
        if isinstance(item, torch.Tensor) and item.device.type in native:
            return item.device.type
    stack = _graph_roots(outputs)
    seen = set(stack)
    while stack:
        node = stack.pop()
        for metadata in node._input_metadata:
            if metadata.device.type in native:
                return metadata.device.type
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                stack.append(child)
    return None


def install_backward_guard(chip: str, native: tuple[str, ...]) -> bool:
    """Refuse, before the engine runs, a backward whose graph reaches one of `native` (device
    types) while `chip` holds torch's accelerator slot. Wraps torch.autograd's call into the
    engine (`Tensor.backward`, `torch.autograd.backward` and `grad` all go through it).
    Returns whether it is installed (False when this torch has no such entry)."""
    import torch.autograd as autograd

    run = getattr(autograd, "_engine_run_backward", None)
    if run is None:
        return False
    if getattr(run, "_torch_fl_guard", None) is not None:
        return True
    native = tuple(native)

    def walk():  # the chip's C++ walk, once its extension is loaded (it may be loading now)
        backend = sys.modules.get(f"torch_fl_{chip}")
        return getattr(getattr(backend, "_C", None), "_autograd_graph_reaches", None)

    @functools.wraps(run)
    def guarded(t_outputs, *args, **kwargs):
        device = _native_device_in_graph(t_outputs, native, walk())
        if device is not None:
            raise NativeBackwardError(
                f"backward over {device} tensors in a process where the generated chip "
                f"'{chip}' is registered: torch then takes '{chip}' as its one accelerator and its autograd "
                f"engine fails on {device} nodes (\"opt_ready_stream && opt_parent_stream "
                f"INTERNAL ASSERT FAILED\", {UPSTREAM_ISSUE}). Ways out: run the {device} work in "
                f"a process without the chip (`import torch` registers it beside {device} only "
                f"when asked: unset {ENV} and do not call torch_fl.init(chips=[...]) there), copy the "
                f"{device} leaves to the chip or the CPU before the graph is built, or make the "
                f"native GPU a generated chip as well (docs/multichip.md)")
        return run(t_outputs, *args, **kwargs)

    guarded._torch_fl_guard = chip
    guarded._torch_fl_wrapped = run
    autograd._engine_run_backward = guarded
    return True


def remove_backward_guard() -> None:
    """Undo install_backward_guard (for tests)."""
    import torch.autograd as autograd

    run = getattr(autograd, "_engine_run_backward", None)
    if getattr(run, "_torch_fl_guard", None) is not None:
        autograd._engine_run_backward = run._torch_fl_wrapped


def after_register(chip: str) -> None:
    """Called once a chip is registered: beside a native accelerator, guard backward and say so."""
    native = native_accelerators()
    if not native:
        return
    installed = install_backward_guard(chip, native)
    warnings.warn(f"chip '{chip}' registered beside {', '.join(native)}: torch now takes '{chip}' as its accelerator, "
                  f"and backward over {', '.join(native)} tensors "
                  + ("is refused in this process" if installed else "fails in torch's autograd engine")
                  + f" ({UPSTREAM_ISSUE}); `python -m torch_fl doctor` explains", stacklevel=3)
