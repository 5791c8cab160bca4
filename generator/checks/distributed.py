"""Checks of the `distributed` section the schema cannot express."""
from __future__ import annotations

from ..errors import SpecError
from ..yaml_loader import YamlDocument

# torch.distributed's own backend names; a chip's backend may only replace them.
TORCH_DIST_BACKENDS = frozenset({"undefined", "gloo", "nccl", "mpi", "ucc", "xccl", "fake", "threaded", "hccl"})


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """The chip's backend has a name of its own, not one torch.distributed already registers; a
    collective library excludes gloo staging. (The library's dtype table may name dtypes the
    chip lacks: it describes the library, and a chip's tensors never have them.)"""
    out: list[SpecError] = []
    dist = data.get("distributed")
    if isinstance(dist, dict):
        backend = dist.get("backend")
        if isinstance(backend, str) and backend in TORCH_DIST_BACKENDS:
            out.append(doc.error(("distributed", "backend"), f"'{backend}' is one of torch.distributed's own "
                                 "backends", hint="name the chip's library (e.g. '<chip>ccl'); list the names "
                                 "it stands in for under 'replaces'"))
        library = dist.get("library")
        if isinstance(library, dict):
            if "staging" in dist:
                out.append(doc.error(("distributed", "staging"), "'staging' applies to a chip without a collective "
                                     "library; this spec names one (distributed.library)",
                                     hint="remove 'staging': the library runs the collectives"))
    return out
