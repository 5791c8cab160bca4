"""The JSON Schema of a chip spec, and its violations as located, readable `SpecError`s.

jsonschema's own messages name schema internals ("'x' does not match '^[a-z]...'"); each
kind of violation is rewritten here into what the spec's author has to change, at the
line and column where it was written.
"""
from __future__ import annotations

import difflib
import functools
import json
from importlib import resources
from typing import Any

from .errors import SpecError
from .limits import suggestion
from .patterns import matches
from .yaml_loader import YamlDocument

SCHEMA_FILE = "chip-spec.schema.json"


@functools.lru_cache(maxsize=1)
def load_schema() -> dict:
    """The chip spec JSON Schema (draft 2020-12) shipped with the generator."""
    text = resources.files(__package__).joinpath("schema", SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _pattern(validator, pattern, instance, schema):
    """The `pattern` keyword with JSON Schema's meaning: `$` only at the end of the text
    (jsonschema's own uses Python's `re.search`, whose `$` also matches before a final newline)."""
    import jsonschema
    if validator.is_type(instance, "string") and not matches(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _unique_items(validator, unique, instance, schema):
    """The `uniqueItems` keyword in linear time (jsonschema's compares every pair of items it
    cannot sort: 4,000 mappings in a list took 10 s)."""
    import jsonschema
    if unique and validator.is_type(instance, "array"):
        seen: set[str] = set()
        for item in instance:
            key = _identity(item)
            if key in seen:
                yield jsonschema.ValidationError(f"{_short(item)} is not unique")
                return
            seen.add(key)


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema
    schema = load_schema()
    base = jsonschema.Draft202012Validator
    base.check_schema(schema)
    cls = jsonschema.validators.extend(base, {"pattern": _pattern, "uniqueItems": _unique_items})
    return cls(schema)


# The schema's patterns, in words: a regex is no message for a spec's author.
_PATTERN_WHAT = {
    r"^[a-z][a-z0-9_]{0,30}$": "a lowercase identifier of at most 31 characters (a-z, 0-9, _; starting with a letter)",
    r"^[a-z][a-z_]{0,30}$": "a lowercase name of letters and '_' of at most 31 characters (torch's device "
                            "strings take no digits)",
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$": "a name of letters, digits, '_', '.', '-' (at most 64 characters)",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "a C identifier",
    r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$": "a C++ namespace (like vendor::ops)",
    r"^(?!.*(^|/)\.\.(/|$))[A-Za-z0-9_./-]+\.(h|hpp|hh)$": "a header path ending in .h, .hpp or .hh, without '..'",
    r"^lib[A-Za-z0-9_.+-]+\.so(\.[0-9]+)*$": "a shared library file name (like libfoo.so or libfoo.so.1)",
    r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$": "a linker name (like foo for -lfoo)",
    r"^[0-9]+\.[0-9]+$": "a \"MAJOR.MINOR\" version",
    r"^[A-Z_][A-Z0-9_]*$": "an environment variable name (A-Z, 0-9, _)",
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?$": "an aten op name (name or name.overload)",
    r"^[^\x00\n\r]+$": "a path on one line",
    r"^[A-Za-z0-9_.,=:+-][A-Za-z0-9_.,=:+/-]{0,199}$": "a command-line argument of letters, digits and _.,=:+-/ "
                                                     "(no spaces, quotes or shell characters)",
    r"^[^\x00\n\r]+\.(cpp|cc|cxx)$": "a C++ source path on one line, ending in .cpp, .cc or .cxx",
}

_TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "a boolean", "null": "null"}


def describe(value: Any) -> str:
    """What a YAML value is, in words ("an integer (3)", "a mapping")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _short(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return describe(value)
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    return repr(value)


def _nearest(word: str, choices) -> str | None:
    """The closest of ``choices`` (difflib), within the validation's budget of searches."""
    return suggestion(_closest, word, choices)


def _closest(word: str, choices) -> str | None:
    m = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return m[0] if m else None


def did_you_mean(word: str, choices) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or "" when none is close."""
    m = _nearest(word, choices)
    return f" (did you mean '{m}'?)" if m else ""


def _identity(value: Any) -> str:
    """A text equal for values JSON Schema calls equal (1 and 1.0; not 1 and true)."""
    def plain(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v
    return json.dumps(plain(value), sort_keys=True, default=repr)


def _unwrap_nullable(e) -> list:
    """`oneOf: [X, null]` (an overlay entry or null): report why the value is not an X."""
    branches = e.validator_value if e.validator == "oneOf" else None
    if isinstance(branches, list) and {"type": "null"} in branches and e.instance is not None:
        index = next(i for i, branch in enumerate(branches) if branch != {"type": "null"})
        inner = [c for c in e.context if c.relative_schema_path and c.relative_schema_path[0] == index]
        if inner:
            return inner
    return [e]


def schema_errors(doc: YamlDocument) -> list[SpecError]:
    """Every violation of the JSON Schema in ``doc``, located and in words."""
    errors = [inner for e in _validator().iter_errors(doc.data) for inner in _unwrap_nullable(e)]
    # A misspelled key also makes its key "missing": report only the misspelling.
    suggested: set[tuple] = set()
    for e in errors:
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            allowed = set(e.schema.get("properties", {}))
            for key in e.instance:
                if key not in allowed and (m := _nearest(key, allowed)) is not None:
                    suggested.add((tuple(e.absolute_path), m))
    out: list[SpecError] = []
    for e in errors:
        path = tuple(e.absolute_path)
        kind = e.validator
        val = e.validator_value
        inst = e.instance
        schema = e.schema if isinstance(e.schema, dict) else {}
        if kind == "additionalProperties" and isinstance(inst, dict):
            allowed = set(schema.get("properties", {}))
            for key in inst:
                if key in allowed:
                    continue
                hint = "allowed keys: " + ", ".join(schema.get("properties", {})) if allowed else None
                out.append(doc.error(path + (key,), f"unknown key '{key}'{did_you_mean(key, allowed)}",
                                     hint=hint, at="key", shown_path=path))
        elif kind == "required" and isinstance(inst, dict):
            for key in val:
                if key not in inst and (path, key) not in suggested:
                    out.append(doc.error(path, f"missing required key '{key}'", at="key"))
        elif "propertyNames" in e.schema_path:
            what = "op name" if path and path[-1] == "ops" else "key"
            out.append(doc.error(path + (inst,), f"invalid {what} '{inst}': must be "
                                 + _PATTERN_WHAT.get(val, f"matching {val}") if kind == "pattern"
                                 else f"invalid key '{inst}'", at="key", shown_path=path))
        elif kind == "type":
            types = val if isinstance(val, list) else [val]
            want = " or ".join(_TYPE_NAMES.get(t, t) for t in types)
            hint = None
            if "string" in types and isinstance(inst, (int, float)) and not isinstance(inst, bool):
                hint = f"quote it: \"{doc.scalars.get(path, inst)}\""
            got = describe(inst)
            if isinstance(inst, (int, float)) and not isinstance(inst, bool) and path in doc.scalars:
                got = f"{got.split(' (')[0]} ({doc.scalars[path]})"   # as written: 2.10, not 2.1
            out.append(doc.error(path, f"expected {want}, got {got}", hint=hint))
        elif kind == "enum":
            allowed = [str(v) for v in val]
            msg = f"invalid value {_short(inst)} (expected one of: {', '.join(allowed)})"
            if isinstance(inst, str):
                m = _nearest(inst, allowed)
                if m:
                    msg = f"invalid value {inst!r} (did you mean '{m}'? expected one of: {', '.join(allowed)})"
            out.append(doc.error(path, msg))
        elif kind == "const":
            if path == ("spec_version",):
                out.append(doc.error(path, f"unsupported spec_version {_short(inst)} (this torchfl-gen "
                                     f"reads spec_version {val})"))
            else:
                out.append(doc.error(path, f"must be {_short(val)}, got {_short(inst)}"))
        elif kind == "pattern":
            what = _PATTERN_WHAT.get(val, f"matching the pattern {val}")
            out.append(doc.error(path, f"{_short(inst)} is not {what}"))
        elif kind == "maxItems":
            out.append(doc.error(path, f"has more than {val} items"))
        elif kind == "minItems":
            out.append(doc.error(path, "must not be empty" if val == 1 else f"needs at least {val} items"))
        elif kind == "minProperties":
            if len(path) == 2 and path[0] == "ops":
                out.append(doc.error(path, "an op entry needs 'kernel' and/or 'fallback'"))
            else:
                out.append(doc.error(path, "must not be empty"))
        elif kind == "uniqueItems" and isinstance(inst, list):
            seen: set[str] = set()   # linear: a list may hold thousands of items
            for i, item in enumerate(inst):
                key = _identity(item)
                if key in seen:
                    out.append(doc.error(path + (i,), f"duplicate item {_short(item)}"))
                else:
                    seen.add(key)
        elif kind == "maxLength":
            out.append(doc.error(path, f"is longer than {val} characters"))
        elif kind == "minLength":
            out.append(doc.error(path, "must not be empty" if val == 1 else f"is shorter than {val} characters"))
        elif kind in ("minimum", "maximum"):
            out.append(doc.error(path, f"{_short(inst)} is out of range (must be {'>=' if kind == 'minimum' else '<='} {val})"))
        else:
            out.append(doc.error(path, e.message))
    return out
