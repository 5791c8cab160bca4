"""Path containment: a spec's paths are relative to its folder and stay inside its project.

A spec is untrusted input; without this, a spec could point a build at headers, sources or
libraries anywhere on the machine.
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import SpecError
from .yaml_loader import YamlDocument

# Spec fields holding paths, relative to the spec's folder.
PATH_FIELDS = (("driver", "search_paths"), ("kernels", "include_dirs"), ("kernels", "library_dirs"),
               ("kernels", "sources"), ("composite", "members"))
# Spec fields holding paths relative to an include folder (`#include <...>`): relative too.
INCLUDE_FIELDS = (("kernels", "headers"),)


def is_absolute(path: str) -> bool:
    """Whether ``path`` names a place of its own instead of one below a folder: absolute
    (`/etc/x.h`, `//etc/x.h`) or in a home folder (`~/x`, `~user/x`). The one test for
    every path field of a spec."""
    return os.path.isabs(path) or path.startswith("~")


def spec_root(base: Path) -> Path:
    """The folder a spec's paths must stay in: the one above the spec's own (the project: a
    spec lives in its `specs/` folder, the vendor SDK beside it)."""
    return base.resolve().parent


def include_errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    """Headers are relative to the kernels' include folders: `/etc/passwd.h` would reach the
    generated `#include <...>` as any file of the machine."""
    out = []
    for section, key in INCLUDE_FIELDS:
        for where, item in _items(data, section, key):
            if is_absolute(item):
                out.append(doc.error(where, f"header '{item}' must be relative to the kernels' include folders "
                                     "(kernels.include_dirs), not absolute", hint="write it as `#include <...>` "
                                     "names it below an include folder, e.g. vendor/kernels.h"))
    return out


def path_errors(doc: YamlDocument, data: dict, base: Path) -> list[SpecError]:
    """A spec is untrusted input: its paths are relative and stay inside its project, links
    included, so a spec cannot point a build at files elsewhere on the machine."""
    out = []
    root = spec_root(base)
    for section, key in PATH_FIELDS:
        block = data.get(section)
        items = block.get(key) if isinstance(block, dict) else None
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            where = (section, key, i)
            if isinstance(item, dict) and (section, key) == ("composite", "members"):
                item, where = item.get("spec"), where + ("spec",)   # {spec: <file>, triton: skip}
            if not isinstance(item, str) or not item or "\0" in item:
                continue  # the schema reports it
            if is_absolute(item):
                out.append(doc.error(where, f"path '{item}' must be relative to the spec's folder",
                                     hint=f"write it relative to {base}"))
                continue
            lexical = Path(os.path.normpath(base.resolve() / item))
            if not _inside(lexical, root):
                out.append(doc.error(where, f"path '{item}' must stay inside {root} (the folder above the "
                                     "spec's own)", hint="keep the SDK inside the spec's project"))
            # Checked apart from the lexical test: a symbolic link may lead out of a path
            # that reads as inside.
            elif not _inside(lexical.resolve(), root):
                out.append(doc.error(where, f"path '{item}' leaves {root} through a symbolic link "
                                     f"(it resolves to {lexical.resolve()})"))
    return out


def _items(data: dict, section: str, key: str):
    """(path, item) of each string item of ``data[section][key]``."""
    block = data.get(section)
    items = block.get(key) if isinstance(block, dict) else None
    for i, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, str) and item:
            yield (section, key, i), item


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def abs_paths(items, base: Path) -> tuple[Path, ...]:
    """The spec's relative ``items`` as normalized absolute paths under ``base``."""
    return tuple(Path(os.path.normpath(base / p)) for p in items)
