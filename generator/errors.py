"""Located spec errors: every problem in a spec names its file, line, column and key path."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .limits import MAX_ERRORS


@dataclass(frozen=True)
class SpecError:
    """One problem in a spec file.

    ``str(err)`` is exactly ``FILE:LINE:COL: PATH: MESSAGE``; the hint, if any, is kept
    apart (``err.hint``) so that the first line stays machine-parseable like a compiler's.
    """

    file: str
    line: int            # 1-based
    column: int          # 1-based
    path: str            # dotted key path, e.g. "driver.hooks.malloc"; "" for the document
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        path = self.path or "<document>"
        return f"{self.file}:{self.line}:{self.column}: {path}: {self.message}"

    def format(self) -> str:
        """The error with its hint on a second, indented line (for CLI output)."""
        s = str(self)
        if self.hint:
            s += f"\n    hint: {self.hint}"
        return s

    @property
    def sort_key(self) -> tuple[int, int, str, str]:
        return (self.line, self.column, self.path, self.message)


class SpecErrors(Exception):
    """All problems of one spec file, ordered by position."""

    def __init__(self, errors: Iterable[SpecError]):
        uniq: dict[tuple, SpecError] = {}
        for e in errors:
            uniq.setdefault((e.file, e.line, e.column, e.path, e.message), e)
        ordered = sorted(uniq.values(), key=lambda e: e.sort_key)
        if len(ordered) > MAX_ERRORS:
            # Bounded output: a spec of thousands of mistakes reports the first ones and a count,
            # located at the first error left out.
            rest = ordered[MAX_ERRORS]
            ordered = ordered[:MAX_ERRORS] + [SpecError(
                rest.file, rest.line, rest.column, rest.path,
                f"... and {len(ordered) - MAX_ERRORS} more errors (at most {MAX_ERRORS} are reported: "
                "limits.MAX_ERRORS)", hint="fix the errors above and validate again")]
        self.errors: list[SpecError] = ordered
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def format(self) -> str:
        return "\n".join(e.format() for e in self.errors)

    def __iter__(self):
        return iter(self.errors)

    def __len__(self) -> int:
        return len(self.errors)
