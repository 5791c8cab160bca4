"""Checks of op entries (the spec's `ops`, and a driver overlay's) against the running torch."""
from __future__ import annotations

import re

from .. import triton_catalog
from ..errors import SpecError
from ..limits import suggestion
from ..schema_errors import did_you_mean
from ..yaml_loader import YamlDocument


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """The spec's own `ops`."""
    ops = data.get("ops")
    if not isinstance(ops, dict):
        return []
    return entry_errors(doc, ops, ("ops",))


def entry_errors(doc: YamlDocument, ops: dict, prefix: tuple) -> list[SpecError]:
    """Checks of the op entries ``ops``, written at ``prefix`` (`ops`, or an overlay's)."""
    from .. import torch_ops

    out: list[SpecError] = []
    op_re = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?")
    for op, entry in ops.items():
        if not op_re.fullmatch(op):
            continue   # reported by the schema
        if torch_ops.lookup(op) is None:
            s = suggestion(torch_ops.suggest, op)
            out.append(doc.error((*prefix, op), f"unknown aten op '{op}'"
                                 + (f" (did you mean '{s}'?)" if s else ""), at="key", shown_path=prefix))
        elif not torch_ops.in_running_torch(op):
            out.append(doc.error((*prefix, op), f"aten op '{op}' is in torchgen's native_functions.yaml "
                                 "but not in the running torch", at="key", shown_path=prefix,
                                 hint="torch and torchgen disagree; reinstall torch"))
        elif torch_ops.is_composite_implicit(op):
            out.append(doc.error((*prefix, op), f"aten op '{op}' is CompositeImplicitAutograd: it decomposes "
                                 "before it reaches a backend; map the ops it decomposes into",
                                 at="key", shown_path=prefix))
        if not isinstance(entry, dict):
            continue  # null in a driver overlay: the op is removed
        if entry.get("require") == "vendor":
            if "kernel" not in entry:
                out.append(doc.error((*prefix, op, "require"), "'require: vendor' needs a 'kernel'",
                                     at="key", hint="name the vendor kernel, or drop 'require'"))
            elif isinstance(entry.get("fallback"), list) and entry["fallback"]:
                out.append(doc.error((*prefix, op, "fallback"), "'require: vendor' forbids a fallback",
                                     at="key"))
        if isinstance(entry.get("dtypes"), list) and "kernel" not in entry:
            # (A dtype the chip lacks is harmless there: the kernel never sees it, and a driver
            # overlay may change the chip's dtypes without restating each kernel's.)
            out.append(doc.error((*prefix, op, "dtypes"), "'dtypes' says which dtypes the vendor kernel "
                                 "computes in, and this op has no 'kernel'", at="key",
                                 hint="name the vendor kernel, or drop 'dtypes'"))
        chain = entry.get("fallback")
        if isinstance(chain, list) and "triton" in chain and torch_ops.lookup(op) is not None:
            supported = _triton_supported_ops()
            if op not in supported:
                i = chain.index("triton")
                out.append(doc.error((*prefix, op, "fallback", i),
                                     f"the shared Triton library has no kernel for '{op}'"
                                     + did_you_mean(op, supported),
                                     hint="drop 'triton' from this chain, or give the op a vendor kernel"))
    return out


def _triton_supported_ops():
    """The ops the shared Triton library has a kernel for (its catalog, read as data)."""
    return triton_catalog.load().ops
