"""The runtime's files the generator reads (its C++ sources, the Triton op catalog), found
through the import system without importing `torch_fl`: the generator never runs the runtime
(importing it pulls in torch's device machinery and, for the kernels, triton)."""
from __future__ import annotations

import importlib.util
from pathlib import Path


class RuntimeNotFound(Exception):
    """The torch_fl runtime package is not installed (an installation problem)."""


def runtime_dir() -> Path:
    """The folder of the installed `torch_fl` package."""
    found = importlib.util.find_spec("torch_fl")
    if found is None or not found.submodule_search_locations:
        raise RuntimeNotFound("the torch_fl runtime package is not installed (pip install -e . in the checkout)")
    return Path(next(iter(found.submodule_search_locations)))


def csrc_dir() -> Path:
    """The shared C++ runtime (include/ and src/) every generated backend compiles in."""
    return runtime_dir() / "csrc"
