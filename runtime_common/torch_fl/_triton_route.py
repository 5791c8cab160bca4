"""Registers the shared Triton kernels for a generated chip's ops (the `triton` chain step)."""
from __future__ import annotations

import logging
import os
from typing import Callable, Iterable

log = logging.getLogger("torch_fl")


def enable(chip: str, ops: Iterable[str], note_path: Callable[[str, str], None], mode: str,
           next_step: Callable | None = None):
    """Route `ops` to Triton at the chip's PrivateUse1 key; returns the torch.library
    handle (keep it alive) or None with the reason logged when Triton is unavailable.

    `next_step(name, overload, *args, **kwargs)` runs a call whose kernel declined its
    inputs (`triton_ops.Unsupported`) through the rest of the op's chain."""
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
        library.impl(op, _counted(op, triton_ops.kernel_for(op), note_path, next_step), "PrivateUse1")
    log.debug("torch_fl: %s: %d op(s) routed to the Triton kernels (%s mode)", chip, len(ops), mode)
    return library, f"{len(ops)} op(s) on Triton ({mode})"


def _counted(op: str, kernel: Callable, note_path: Callable[[str, str], None],
             next_step: Callable | None) -> Callable:
    from .triton_ops import Unsupported

    name, _, overload = op.partition(".")
    qualified = "aten::" + name

    def run(*args, **kwargs):
        try:
            result = kernel(*args, **kwargs)
        except Unsupported as declined:
            if next_step is None:
                raise
            log.debug("torch_fl: the Triton kernel of aten::%s declined: %s", op, declined)
            try:
                return next_step(qualified, overload, *args, **kwargs)
            except NotImplementedError as error:
                raise NotImplementedError(f"{error}\n(its Triton kernel declined these inputs: {declined})") from None
        note_path(op, "triton")
        return result

    run.__name__ = f"triton_{op.replace('.', '_')}"
    return run
