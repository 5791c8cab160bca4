"""Drain the chip's autograd device threads before the interpreter finalizes.

PyTorch's `_engine_run_backward` stashes a `contextvars.Context` in the calling thread's TLS
and every backward's GraphTask copies it. The device thread that completes a backward can
drop the GraphTask (and with it the last reference to that Context) just after `backward()`
has returned. If the script ends in that window, the decref needs the GIL of a finalizing
interpreter: CPython ends the thread with a forced unwind through a noexcept destructor and
the process aborts ("terminate called without an active exception", exit -6). Upstream:
pytorch/pytorch PR 180701. It shows on any device with autograd device threads; with the
simulated NPU on a loaded host about one script in fifteen died this way.

The fix here: at exit (atexit runs before finalization starts) run one tiny backward on each
of the chip's devices through the engine directly (no stashed Context). A device thread takes
it only after finishing the iteration that released the user's last GraphTask, so once it
returns no device thread holds a Python object. Its own tensors stay referenced from here and
its gradient is accumulated rather than returned, so nothing of it needs the GIL to be freed.
"""
from __future__ import annotations

import atexit
import logging

import torch

log = logging.getLogger("torch_fl")

_installed: set[str] = set()
_kept: list = []  # the drain's tensors: never released by a device thread


def install(chip: str) -> None:
    """Register the exit drain for `chip` (idempotent)."""
    if chip not in _installed:
        _installed.add(chip)
        atexit.register(drain, chip)


def drain(chip: str) -> int:
    """Run one backward on each initialised device of `chip`; the number of devices drained."""
    module = getattr(torch, chip, None)
    try:
        if module is None or not module.is_initialized():
            return 0  # no tensor ever reached the chip: no backward ran on its threads
        drained = 0
        for index in range(module.device_count()):
            leaf = torch.zeros((), device=torch.device(chip, index), requires_grad=True)
            root = leaf * 1.0
            seed = torch.ones((), device=leaf.device)
            _kept.append((leaf, root, seed))
            # Accumulated into leaf.grad, not captured: a captured gradient would stay in the
            # GraphTask's result future, a tensor with a Python object, freed on the device thread.
            torch.autograd.Variable._execution_engine.run_backward(
                (root,), (seed,), False, False, (), True, True)
            drained += 1
        return drained
    except Exception as error:  # at exit: a broken device must not turn into a traceback
        log.debug("torch_fl: autograd drain on %s at exit failed: %s", chip, error)
        return 0
