"""A generated chip's routing table: the `ROUTES` of its spec.py, read here for the Triton
router, the test harness and the doctor.

The generator decides every route once (generator/model.py, `ChipSpec.route`) and writes the
table; nothing at run time recomputes a route. Each entry: the vendor kernel (or None), the
fallback chain, whether the Triton step serves the op, the spec line naming it (None for ops
on `fallback.default`), and the path the spec declares (vendor | triton | cpu | error).
"""
from __future__ import annotations

from types import ModuleType
from typing import NamedTuple


class Route(NamedTuple):
    kernel: str | None
    chain: tuple[str, ...]
    triton: bool
    line: int | None
    path: str


def route(spec: ModuleType, op: str) -> Route:
    """The route of aten op `op` ("name.overload") on the chip whose spec module is `spec`."""
    return Route(*spec.ROUTES.get(op, spec.DEFAULT_ROUTE))


def triton_ops(spec: ModuleType, missing_kernels=()) -> set[str]:
    """Ops the Triton step serves at load time: those without a vendor kernel, plus vendor ops
    whose kernel the library lacks (`missing_kernels`) when their own chain starts with Triton."""
    missing = set(missing_kernels)
    return {op for op, (kernel, _, triton, *_rest) in spec.ROUTES.items()
            if triton and (kernel is None or op in missing)}


def declined_ops(spec: ModuleType) -> set[str]:
    """Vendor ops whose kernel computes in some dtypes only (`ops.<op>.dtypes`) and whose chain
    starts with a Triton step that serves them: their Triton kernel takes the other dtypes."""
    return {op for op in getattr(spec, "KERNEL_DTYPES", {}) if route(spec, op).triton}


def allowed_paths(spec: ModuleType, op: str) -> set[str]:
    """The paths an op may take on the chip: its vendor kernel, or any step of its chain (a
    vendor op: only when its kernel's `dtypes` leave some dtypes to the chain)."""
    r = route(spec, op)
    if r.kernel is None:
        return set(r.chain)
    return {"vendor"} | (set(r.chain) if op in getattr(spec, "KERNEL_DTYPES", {}) else set())


def composite_triton(spec: ModuleType, missing_kernels=()) -> tuple[set[str], set[str], list[set[str]]]:
    """A composite chip's Triton step: (ops registered at the chip's key: some member's Triton ops
    that no member has a vendor kernel for; ops whose Triton kernels register as declined mirrors,
    which a member's router calls: the rest of those, and the members' declined ops; per member,
    the ops its Triton step serves)."""
    served = [triton_ops(member, missing_kernels) for member in spec.MEMBERS]
    vendor = {op for member in spec.MEMBERS for op, entry in member.ROUTES.items() if entry[0] is not None}
    every = set().union(*served)
    declined = (every & vendor).union(*(declined_ops(member) for member in spec.MEMBERS))
    return every - vendor, declined, [s | declined_ops(member) for s, member in zip(served, spec.MEMBERS)]
