"""Checks of the `distributed` section the schema cannot express."""
from __future__ import annotations

from ..errors import SpecError
from ..yaml_loader import YamlDocument

# torch.distributed's own backend names; a chip's backend may only replace them.
TORCH_DIST_BACKENDS = frozenset({"undefined", "gloo", "nccl", "mpi", "ucc", "xccl", "fake", "threaded", "hccl"})


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """The chip's backend has a name of its own, not one torch.distributed already registers."""
    out: list[SpecError] = []
    dist = data.get("distributed")
    if isinstance(dist, dict):
        backend = dist.get("backend")
        if isinstance(backend, str) and backend in TORCH_DIST_BACKENDS:
            out.append(doc.error(("distributed", "backend"), f"'{backend}' is one of torch.distributed's own "
                                 "backends", hint="name the chip's library (e.g. '<chip>ccl'); list the names "
                                 "it stands in for under 'replaces'"))
    return out
