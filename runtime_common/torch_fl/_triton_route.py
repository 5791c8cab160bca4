"""Registers the shared Triton kernels for a generated chip's ops (the `triton` chain step)."""
from __future__ import annotations

import logging
import os
from typing import Callable, Iterable

log = logging.getLogger("torch_fl")


def enable(chip: str, ops: Iterable[str], note_path: Callable[[str, str], None], mode: str):
    """Route `ops` to Triton at the chip's PrivateUse1 key; returns the torch.library
    handle (keep it alive) or None with the reason logged when Triton is unavailable."""
    if mode == "interpret":
        # The chip is not a Triton target (e.g. a simulated device): run the
        # kernels in Triton's interpreter, which must be chosen before import.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from . import triton_ops

    ops = sorted(set(ops))
    if not ops:
        return None, "no ops routed to triton"
    if not triton_ops.available():
        reason = "Triton is not available (not installed, or no GPU and TRITON_INTERPRET unset)"
        log.debug("torch_fl: %s: %s; %d op(s) take the next step of their chain", chip, reason, len(ops))
        return None, reason
    import torch

    library = torch.library.Library("aten", "IMPL")
    for op in ops:
        library.impl(op, _counted(op, triton_ops.kernel_for(op), note_path), "PrivateUse1")
    log.debug("torch_fl: %s: %d op(s) routed to the Triton kernels (%s mode)", chip, len(ops), mode)
    return library, f"{len(ops)} op(s) on Triton ({mode})"


def _counted(op: str, kernel: Callable, note_path: Callable[[str, str], None]) -> Callable:
    def run(*args, **kwargs):
        note_path(op, "triton")
        return kernel(*args, **kwargs)

    run.__name__ = f"triton_{op.replace('.', '_')}"
    return run
