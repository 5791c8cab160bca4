"""Torch-FL's environment variables: one prefix, `TORCH_FL_`. The old spelling `TORCHFL_` is
still read, with a FutureWarning naming the new one (once per variable and process).

The generator has the same reader (generator/env.py): it imports no runtime module.
"""
from __future__ import annotations

import os
import warnings

PREFIX = "TORCH_FL_"
OLD_PREFIX = "TORCHFL_"
_warned: set[str] = set()


def get(name: str, default: str | None = None) -> str | None:
    """The value of TORCH_FL_<name>, else of the deprecated TORCHFL_<name>, else `default`."""
    value = os.environ.get(PREFIX + name)
    if value is not None:
        return value
    old = os.environ.get(OLD_PREFIX + name)
    if old is None:
        return default
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"{OLD_PREFIX}{name} is deprecated: set {PREFIX}{name} instead", FutureWarning, stacklevel=2)
    return old
