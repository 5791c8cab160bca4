"""Checks of the `distributed` section the schema cannot express."""
from __future__ import annotations

from ..errors import SpecError
from ..yaml_loader import YamlDocument

# torch.distributed's own backend names; a chip's backend may only replace them.
TORCH_DIST_BACKENDS = frozenset({"undefined", "gloo", "nccl", "mpi", "ucc", "xccl", "fake", "threaded", "hccl"})

# Variables `library.environment` may not set: they steer the loader, the shell, Python or torch
# for the whole process and every program it starts, not the collective library.
PROCESS_VARIABLES = frozenset({"PATH", "HOME", "SHELL", "ENV", "BASH_ENV", "IFS", "CDPATH", "TMPDIR"})
PROCESS_PREFIXES = ("LD_", "DYLD_", "PYTHON", "TORCH", "PYTORCH_", "CUDA_", "HIP_", "ROCR_", "MALLOC_", "GLIBC_")


def errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """The chip's backend has a name of its own, not one torch.distributed already registers; a
    collective library excludes gloo staging and sets only variables of its own. (The library's
    dtype table may name dtypes the chip lacks: it describes the library, and a chip's tensors
    never have them.)"""
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
            environment = library.get("environment")
            for variable in environment if isinstance(environment, dict) else ():
                if isinstance(variable, str) and (variable in PROCESS_VARIABLES or
                                                  variable.startswith(PROCESS_PREFIXES)):
                    out.append(doc.error(("distributed", "library", "environment", variable),
                                         f"'{variable}' steers the whole process (the loader, the shell, Python, "
                                         "torch or the driver), not the collective library",
                                         hint="set only the library's own variables here (NCCL_*, HCCL_*, ...); "
                                         "leave the process's environment to the user", at="key"))
    return out
