"""The schema's regular expressions with the meaning JSON Schema gives them.

JSON Schema's patterns are ECMA-262 regexes: there, `$` matches at the end of the text only.
Python's `$` also matches before a final newline, so with `re.search` a pattern such as
`^[a-z]+$` accepted "npu\\n", and a trailing newline passed every pattern-only check. Every
pattern the validator applies goes through `python_regex` (each `$` becomes `\\Z`); the
checks written in Python use `re.fullmatch`.
"""
from __future__ import annotations

import functools
import re


@functools.lru_cache(maxsize=None)
def python_regex(pattern: str) -> re.Pattern:
    """``pattern`` (ECMA-262, as the schema writes it) compiled for Python: each unescaped `$`
    outside a character class anchors at the very end of the text."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":   # `[]...]`: a literal ] first
                out.append("[]")
                i += 2
                continue
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return re.compile("".join(out))


def matches(pattern: str, text: str) -> bool:
    """Whether ``text`` matches the schema ``pattern`` as JSON Schema means it."""
    return python_regex(pattern).search(text) is not None
