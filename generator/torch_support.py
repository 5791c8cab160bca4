"""The torch releases torch-fl supports, stated once: the generated packages' requirements and
the compatibility matrix's columns read it. pyproject.toml states the same range for torch-fl
itself (tests/generator/test_compat.py keeps the two equal)."""
from __future__ import annotations

import re

TORCH_REQUIREMENT = "torch>=2.11,<2.16"


def supported_minors(requirement: str = TORCH_REQUIREMENT) -> tuple[str, ...]:
    """"torch>=2.11,<2.16" -> ("2.11", ..., "2.15"): every minor release the range admits."""
    match = re.fullmatch(r"torch>=(\d+)\.(\d+),<(\d+)\.(\d+)", requirement)
    if not match:
        raise ValueError(f"torch requirement {requirement!r} is not of the form torch>=X.Y,<X.Z")
    major, low, upper_major, high = (int(g) for g in match.groups())
    if upper_major != major or high <= low:
        raise ValueError(f"torch requirement {requirement!r} must span minors of one major release")
    return tuple(f"{major}.{minor}" for minor in range(low, high))


SUPPORTED_TORCH = supported_minors()
