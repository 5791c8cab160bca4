"""PyTorch's CUDA autocast op lists, read from the installed torch's ``ATen/autocast_mode.h``.

CUDA's autocast registration expands the header's ``AT_FORALL_*`` macros; a spec's
``amp`` section defaults to the same lists, so a generated chip casts exactly the
ops CUDA casts in the torch it is built against. Op names come back as spec keys
are written (``conv_transpose2d.input``, ``pow.Tensor_Scalar``).
"""
from __future__ import annotations

import functools
import os
import re

# Casting policy of each list: the KERNEL_PRIVATEUSEONE policy tokens of autocast_mode.h.
LOWER_PRECISION = "lower_precision_fp"
FP32 = "fp32"
FP32_SET_OPT_DTYPE = "fp32_set_opt_dtype"
FP32_APPEND_DTYPE = "fp32_append_dtype"
PROMOTE = "promote"

_MACROS = {
    "AT_FORALL_LOWER_PRECISION_FP": LOWER_PRECISION,
    "AT_FORALL_FP32": FP32,
    "AT_FORALL_FP32_SET_OPT_DTYPE": FP32_SET_OPT_DTYPE,
    "AT_FORALL_PROMOTE": PROMOTE,
}
# `norm` overloads redispatch to a different overload (with a dtype argument appended);
# the header spells their C++ signatures out, which the generated code repeats.
# torch 2.11 also lists the Dimname overload; later versions dropped it.
_APPEND_DTYPE_OPS = ("norm.Scalar", "norm.ScalarOpt_dim", "norm.names_ScalarOpt_dim")


def header_path() -> str:
    import torch
    return os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "autocast_mode.h")


def _macro_body(text: str, name: str) -> str:
    m = re.search(rf"#define {name}\(_\)((?:[^\n]*\\\n)*[^\n]*)", text)
    if m is None:
        raise RuntimeError(f"{header_path()}: no '#define {name}(_)' (torch changed its autocast lists?)")
    return m[1].replace("\\\n", " ")


@functools.lru_cache(maxsize=1)
def cuda_lists() -> dict[str, tuple[str, ...]]:
    """policy -> op names, in the header's order."""
    with open(header_path(), encoding="utf-8") as fh:
        text = fh.read()
    lists: dict[str, tuple[str, ...]] = {}
    for macro, policy in _MACROS.items():
        ops = []
        for args in re.findall(r"_\(\s*([A-Za-z0-9_]+(?:\s*,\s*[A-Za-z0-9_]+)?)\s*\)", _macro_body(text, macro)):
            name, _, overload = (a.strip() for a in args.partition(","))
            ops.append(f"{name}.{overload}" if overload else name)
        lists[policy] = tuple(ops)
    body = _macro_body(text, "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE")
    found = tuple(re.findall(r'"([A-Za-z0-9_.]+)"', body))
    unknown = [op for op in found if op not in _APPEND_DTYPE_OPS]
    if unknown:
        raise RuntimeError(f"{header_path()}: AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE lists {unknown}, "
                           f"which torchfl-gen does not know (it knows {_APPEND_DTYPE_OPS})")
    lists[FP32_APPEND_DTYPE] = found
    return lists


def default_lower_precision_ops() -> tuple[str, ...]:
    return cuda_lists()[LOWER_PRECISION]


def default_fp32_ops() -> tuple[str, ...]:
    lists = cuda_lists()
    return lists[FP32] + lists[FP32_SET_OPT_DTYPE] + lists[FP32_APPEND_DTYPE]


def default_promote_ops() -> tuple[str, ...]:
    return cuda_lists()[PROMOTE]


def fp32_policy(op: str) -> str:
    """How an fp32 op is cast: as CUDA casts it (dtype argument set or appended), else plain fp32."""
    lists = cuda_lists()
    if op in lists[FP32_SET_OPT_DTYPE]:
        return FP32_SET_OPT_DTYPE
    if op in lists[FP32_APPEND_DTYPE]:
        return FP32_APPEND_DTYPE
    return FP32
