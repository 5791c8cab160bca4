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


# What differs between the supported releases, for a chip's backend and its users: the notes
# docs/compat.md ends with (found building and testing the npu backend on each release).
RELEASE_NOTES: dict[str, str] = {
    "2.11": "The oldest release admitted; verified on the H200 (nvgpu).",
    "2.12": "`UntypedStorage.pin_memory()` and `is_pinned()` default to `device=\"cuda\"`: on a chip, pass "
            "the chip (`storage.pin_memory(\"npu\")`); `Tensor.pin_memory()` is unaffected. The generated "
            "suite names the chip there.",
    "2.13": "`UntypedStorage.pin_memory()` and `is_pinned()` use the current accelerator (the chip). CI's "
            "release (the CPU wheel).",
    "2.14": "torch's headers need C++20: the generated `setup.py` compiles with `-std=c++20` from 2.14 on "
            "(C++17 before).",
    "2.15": "Nothing a backend sees changed: the generated C++ builds unchanged and the npu suite passes. "
            "Triton 3.9 (torch's pin) runs the interpreted Triton step unchanged.",
}
assert set(RELEASE_NOTES) == set(SUPPORTED_TORCH), "a note per supported release"
