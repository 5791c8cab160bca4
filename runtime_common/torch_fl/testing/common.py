"""Helpers the chip suites' test modules share (torch_fl.testing.upstream, torch_api, device):
the prelude of the scripts they run in a fresh interpreter, and the second device some tests need.
They read the chip conftest.py configured (torch_fl.testing.suite)."""
import pytest
import torch

from torch_fl import env
from torch_fl.testing import suite


def script_prelude() -> str:
    """What a script run in a fresh interpreter starts with. Where `import torch` left the chip
    unregistered (autoload off, or a native accelerator beside it: torch_fl.coexistence), the
    script asks for it, as the suite itself does (suite.pytest_configure)."""
    chip = suite.chip()
    package = chip.package().__name__
    return f"""
import os, torch
if not hasattr(torch, {chip.spec.CHIP!r}):
    import {package}
    {package}._register()
"""


def second_device() -> int:
    """The index of a second device. A machine with one device says so explicitly
    (TORCH_FL_TEST_ONE_DEVICE=1); anywhere else a missing second device is a failure."""
    name = suite.chip().spec.CHIP
    if getattr(torch, name).device_count() < 2:
        if env.get("TEST_ONE_DEVICE") == "1":
            pytest.skip(f"one {name} device on this machine (TORCH_FL_TEST_ONE_DEVICE=1)")
        pytest.fail(f"this test needs two {name} devices (set the SDK's device count, "
                    "or TORCH_FL_TEST_ONE_DEVICE=1 on a machine with one)")
    return 1
