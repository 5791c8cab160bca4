"""Compiling a generated chip's extension (`<package>._C`): the chip's own sources, plus the
shared C++ runtime (csrc/src), which is compiled once and reused.

The runtime's object files do not depend on the chip: they are compiled once per (runtime
sources, torch, compiler and flags) into a folder of the object cache that torchfl-gen names
(TORCH_FL_RUNTIME_OBJECTS), and every chip and driver-version build links them. Without that
variable (a plain `pip install generated/<chip>`) they are compiled with the chip's sources.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import BuildExtension
from . import env

__all__ = ["ChipBuildExtension", "runtime_sources"]

RUNTIME = Path(__file__).resolve().with_name("csrc")


def runtime_sources() -> list[Path]:
    return sorted((RUNTIME / "src").glob("*.cpp"))


def _runtime_digest() -> str:
    h = hashlib.sha256()
    for path in sorted(RUNTIME.rglob("*")):
        if path.is_file():
            h.update(path.relative_to(RUNTIME).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


class ChipBuildExtension(BuildExtension):
    """torch's BuildExtension (ninja), linking the runtime's cached objects. `kernel_include_dirs`
    (the spec's vendor headers) are left out of the runtime's compile: it includes none of them,
    and leaving them in would key the cache on the chip."""

    kernel_include_dirs: tuple[str, ...] = ()

    @classmethod
    def for_chip(cls, kernel_include_dirs) -> type:
        return type("ChipBuildExtension", (cls,), {"kernel_include_dirs": tuple(kernel_include_dirs)}).with_options(
            use_ninja=True)

    def build_extension(self, ext) -> None:
        cache = env.get("RUNTIME_OBJECTS")
        if cache:
            ext.extra_objects = [*(ext.extra_objects or []), *self._runtime_objects(ext, Path(cache))]
        else:
            ext.sources = [*ext.sources, *(os.path.relpath(p) for p in runtime_sources())]
        super().build_extension(ext)

    def _runtime_objects(self, ext, cache: Path) -> list[str]:
        include_dirs = [d for d in ext.include_dirs if d not in self.kernel_include_dirs]
        macros = [*ext.define_macros, *((name,) for name in ext.undef_macros)]
        key = hashlib.sha256(repr((
            _runtime_digest(), torch.__version__, sys.version, self.compiler.compiler_so, ext.extra_compile_args,
            include_dirs, macros, self.debug)).encode()).hexdigest()[:16]
        folder = cache / f"runtime-{key}"
        folder.mkdir(parents=True, exist_ok=True)
        # One build compiles, concurrent ones wait for it; ninja makes a later call a no-op.
        with open(cache / f"runtime-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self.compiler.compile(
                [str(p) for p in runtime_sources()], output_dir=str(folder), macros=macros,
                include_dirs=include_dirs, debug=self.debug, extra_postargs=ext.extra_compile_args,
                depends=ext.depends)
