"""Checks of the `compile` section the schema cannot express."""
from __future__ import annotations

from ..errors import SpecError
from ..yaml_loader import YamlDocument


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """Inductor's Triton kernels are compiled by Triton's active backend and handed the chip's
    pointers: only a chip whose own Triton step compiles (`fallback.triton: compile`) has a
    Triton backend that addresses its memory."""
    section = data.get("compile")
    fallback = data.get("fallback")
    if not isinstance(section, dict) or section.get("inductor") != "triton":
        return []
    mode = fallback.get("triton", "compile") if isinstance(fallback, dict) else "compile"
    if mode == "compile":
        return []
    return [doc.error(("compile", "inductor"), f"Inductor's Triton code generation needs Triton to compile for the "
                      f"chip, but fallback.triton is '{mode}'",
                      hint="set fallback.triton: compile where Triton targets the chip, or compile.inductor: none")]
