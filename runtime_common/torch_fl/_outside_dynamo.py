"""The chips' Python kernels run with Dynamo's frame hook off.

Between graph breaks a compiled function runs eagerly with Dynamo's frame hook on, so every
Python frame an op enters would be compiled as if it were the user's code: the chip's Triton
route, Triton's launcher, its interpreter under a chip whose Triton step is interpreted. That
is slow (each frame traced, then guarded), and wrong where Dynamo cannot follow the code (fake
tensors through the interpreter's numpy pointer arithmetic). A kernel is an op's
implementation, not user code: torch's own C++ kernels are never traced either.

The wrapper's own frame is one code object (WRAPPER_CODE) for every kernel: torch_fl.compile
tells Dynamo to skip it when Dynamo is imported.
"""
from __future__ import annotations

import functools
from typing import Callable


def _wrap(kernel: Callable, set_eval_frame: Callable) -> Callable:
    @functools.wraps(kernel)
    def run(*args, **kwargs):
        prior = set_eval_frame(None)
        try:
            return kernel(*args, **kwargs)
        finally:
            set_eval_frame(prior)

    return run


WRAPPER_CODE = _wrap(print, print).__code__


def outside_dynamo(kernel: Callable) -> Callable:
    """`kernel`, run with no Dynamo frame hook (it and all it calls), the caller's restored after.
    The hook is set through torch's C extension: no Dynamo import (a second of `import torch`)."""
    try:
        from torch._C._dynamo.eval_frame import set_eval_frame
    except ImportError:  # a torch without Dynamo
        return kernel
    return _wrap(kernel, set_eval_frame)
