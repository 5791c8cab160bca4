"""What a spec may hold, and how much validating one may cost: every cap in one place.

A spec is untrusted input. Each cap keeps validation linear in the spec's size and
bounded in time; each is reported as a located error naming the cap. docs/spec.md quotes
them (`torchfl-gen docs` formats its rules from this module).
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Callable, TypeVar

MAX_BYTES = 1 << 20          # the spec file, in bytes (1 MiB)
MAX_DEPTH = 32               # nesting of mappings and lists
MAX_ITEMS = 4096             # items of any one list, keys of any one mapping (torch has ~3,100 aten ops)
MAX_DRIVER_VERSIONS = 64     # overlays under driver.versions
MAX_VERSION_DIGITS = 9       # digits of each component of a MAJOR.MINOR version
MAX_ERRORS = 100             # errors reported for one spec; the rest are counted in one last error
MAX_SUGGESTIONS = 20         # did-you-mean searches (difflib) while validating one spec

C_INT_MAX = 2**31 - 1        # the generated C++ holds versions and status codes in an int

T = TypeVar("T")
_suggestions_left: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "torchfl_gen_suggestions_left", default=None)


@contextmanager
def validation():
    """Scope of one spec's validation: its budget of did-you-mean searches."""
    token = _suggestions_left.set([MAX_SUGGESTIONS])
    try:
        yield
    finally:
        _suggestions_left.reset(token)


def suggestion(search: Callable[..., T], *args) -> T | None:
    """``search(*args)`` while the validation's budget lasts, else None (no suggestion).

    A did-you-mean search is a difflib scan of thousands of names; one per unknown name made
    a spec of 50,000 unknown op names take minutes."""
    left = _suggestions_left.get()
    if left is not None:
        if left[0] <= 0:
            return None
        left[0] -= 1
    return search(*args)
