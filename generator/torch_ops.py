"""The aten operators of the installed torch, with their dispatcher C++ signatures.

Parsed from torch's own ``native_functions.yaml`` as shipped in the installed
``torchgen`` package, so the signatures a generated backend implements are exactly
those of the torch it is built against. Parsing takes ~2 s and is cached per process.
Op names are "name.overload" strings as spec keys are written: ``add.Tensor``,
``relu``, ``random_.from``, ``randperm.generator_out``.
"""
from __future__ import annotations

import difflib
import functools
import os
from typing import TYPE_CHECKING

from .model import Argument, OpSignature

if TYPE_CHECKING:  # pragma: no cover
    from torchgen.model import NativeFunction


def _yaml_paths() -> tuple[str, str]:
    import torchgen
    base = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")
    return os.path.join(base, "native_functions.yaml"), os.path.join(base, "tags.yaml")


@functools.lru_cache(maxsize=1)
def _functions() -> dict[str, "NativeFunction"]:
    from torchgen.gen import parse_native_yaml
    nf_yaml, tags_yaml = _yaml_paths()
    parsed = parse_native_yaml(nf_yaml, tags_yaml)
    return {str(f.func.name): f for f in parsed.native_functions}


def lookup(name: str) -> "NativeFunction | None":
    """The torchgen NativeFunction of ``name`` ("add.Tensor"), or None if there is none."""
    return _functions().get(name)


def all_names() -> list[str]:
    """Every aten op name ("name.overload") in the installed torch, sorted."""
    return sorted(_functions())


@functools.lru_cache(maxsize=1)
def _base_index() -> dict[str, list[str]]:
    idx: dict[str, list[str]] = {}
    for n in _functions():
        idx.setdefault(n.partition(".")[0], []).append(n)
    return idx


def suggest(name: str) -> str | None:
    """The nearest existing op name (difflib), or None if nothing is close."""
    names = _functions()
    base, _, overload = name.partition(".")
    # Same base name, wrong overload: prefer the overloads of that op.
    same_base = _base_index().get(base)   # in native_functions.yaml order
    if same_base:
        if not overload:
            return same_base[0]
        m = difflib.get_close_matches(name, same_base, n=1, cutoff=0.7)
        if m:
            return m[0]
        return base if base in names else same_base[0]
    m = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
    return m[0] if m else None


def is_composite_implicit(name: str) -> bool:
    """True if the op decomposes before it reaches a backend (CompositeImplicitAutograd
    without an explicit kernel), so a backend cannot usefully register it."""
    f = lookup(name)
    if f is None:
        return False
    return bool(f.has_composite_implicit_autograd_kernel
                and not f.has_composite_explicit_autograd_kernel
                and not f.has_composite_explicit_autograd_non_functional_kernel)


def in_running_torch(name: str) -> bool:
    """Whether the running torch (not only torchgen's yaml) has the op ``aten::name``."""
    import torch
    base, _, overload = name.partition(".")
    try:
        torch._C._get_schema(f"aten::{base}", overload)
    except RuntimeError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def signature(name: str) -> OpSignature:
    """The dispatcher C++ signature of op ``name``; KeyError if there is no such op."""
    f = lookup(name)
    if f is None:
        raise KeyError(name)
    import torchgen.local
    from torchgen.api.types import DispatcherSignature
    with torchgen.local.parametrize(
        use_const_ref_for_mutable_tensors=f.use_const_ref_for_mutable_tensors,
        use_ilistref_for_tensor_lists=f.part_of_structured_group,
    ):
        sig = DispatcherSignature.from_schema(f.func, symint=False)
        returns = sig.returns_type().cpp_type()
        args = tuple(Argument(name=a.name, cpp_type=a.type) for a in sig.arguments())
    return OpSignature(schema=str(f.func), returns=returns, arguments=args)
