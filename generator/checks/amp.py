"""Checks of the `amp` section: its dtypes are the chip's, its op lists name functional aten ops once."""
from __future__ import annotations

import re

from ..errors import SpecError
from ..limits import suggestion
from ..yaml_loader import YamlDocument

# The amp section's op lists, one casting policy each.
AMP_OP_LISTS = ("lower_precision_ops", "fp32_ops", "promote_ops")


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """amp.dtypes within dtypes, amp.default within amp.dtypes, and the op lists."""
    out: list[SpecError] = []
    amp = data.get("amp")
    if isinstance(amp, dict):
        dtypes = data.get("dtypes")
        amp_dtypes = amp.get("dtypes")
        if isinstance(dtypes, list) and isinstance(amp_dtypes, list):
            for i, dt in enumerate(amp_dtypes):
                if isinstance(dt, str) and dt not in dtypes:
                    out.append(doc.error(("amp", "dtypes", i), f"amp dtype '{dt}' is not in dtypes"))
        default = amp.get("default")
        if isinstance(default, str) and isinstance(amp_dtypes, list) and default not in amp_dtypes:
            out.append(doc.error(("amp", "default"), f"amp default '{default}' is not one of amp.dtypes"))
        out += _op_errors(doc, amp)
    return out


def _op_errors(doc: YamlDocument, amp: dict) -> list[SpecError]:
    """Every op of the amp lists: a functional aten op, in at most one list."""
    from .. import torch_ops
    from torchgen.model import SchemaKind

    out: list[SpecError] = []
    first: dict[str, str] = {}
    op_re = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?")
    for key in AMP_OP_LISTS:
        ops = amp.get(key)
        if not isinstance(ops, list):
            continue
        for i, op in enumerate(ops):
            if not isinstance(op, str) or not op_re.fullmatch(op):
                continue   # reported by the schema
            path = ("amp", key, i)
            f = torch_ops.lookup(op)
            if f is None:
                s = suggestion(torch_ops.suggest, op)
                out.append(doc.error(path, f"unknown aten op '{op}'" + (f" (did you mean '{s}'?)" if s else "")))
            elif f.func.kind() != SchemaKind.functional:
                out.append(doc.error(path, f"aten op '{op}' writes to its arguments ({f.func.kind().name}): "
                                     "autocast casts only functional ops",
                                     hint="name the functional overload"))
            elif op in first:
                out.append(doc.error(path, f"aten op '{op}' is already in amp.{first[op]}",
                                     hint="an op has one casting policy"))
            else:
                first[op] = key
    return out
