"""Shared helpers for the spec tests: bad specs are text edits of specs/npu.yaml."""
from __future__ import annotations

from pathlib import Path

import pytest

from torchfl_gen.errors import SpecErrors
from torchfl_gen.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
NPU = ROOT / "specs" / "npu.yaml"
NPU_TEXT = NPU.read_text(encoding="utf-8")


def edit(*pairs: tuple[str, str], text: str = NPU_TEXT) -> str:
    """Apply (old, new) replacements; each old text must occur exactly once."""
    for old, new in pairs:
        assert text.count(old) == 1, f"edit target not unique/absent: {old!r}"
        text = text.replace(old, new)
    return text


def write(tmp_path: Path, content: str | bytes, name: str = "npu.yaml") -> Path:
    # Same folder depth as specs/ so relative paths mean the same thing.
    d = tmp_path / "specs"
    d.mkdir(exist_ok=True)
    p = d / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return p


def errors_of(tmp_path: Path, content: str | bytes) -> list[str]:
    """Load the spec as 'specs/npu.yaml' and return its error lines (must fail)."""
    p = write(tmp_path, content)
    with pytest.raises(SpecErrors) as ei:
        load_spec(p, display="specs/npu.yaml")
    return [str(e) for e in ei.value.errors]


def spec_errors(tmp_path: Path, content: str | bytes) -> SpecErrors:
    p = write(tmp_path, content)
    with pytest.raises(SpecErrors) as ei:
        load_spec(p, display="specs/npu.yaml")
    return ei.value


def line_of(text: str, needle: str, *, whole: bool = False, exact: bool = False) -> int:
    """The 1-based number of the one line of `text` that contains `needle` (is it, stripped, with
    `whole`; is it, indentation included, with `exact`: `  hooks:` is the driver's, not the
    collective library's `    hooks:`).

    Expected error locations are computed from the spec text, so editing specs/npu.yaml
    does not shift every test's line numbers.
    """
    hits = [number for number, line in enumerate(text.splitlines(), 1)
            if (line == needle if exact else line.strip() == needle.strip() if whole else needle in line)]
    assert len(hits) == 1, f"{needle!r} is on lines {hits} of the spec, not on exactly one"
    return hits[0]
