"""Generate a backend package and compile/install it, cached.

The output folder is replaced atomically (a sibling staging folder, then a swap),
and files whose text did not change keep their timestamps, so ninja's
incremental build in the cache folder sees only real changes. What the folder may
hold, what is never deleted, the lock beside it and how a killed run leaves it:
docs/reliability.md, "Output folders".
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import __version__
from .model import ChipSpec, CompositeSpec, NativeSpec
from .render import MARKER, digest, manifest, render
from .runtime_files import csrc_dir
from . import env


class BuildError(Exception):
    """A build step failed; the message says which and where its log is."""


@dataclass(frozen=True)
class GenerateResult:
    output_dir: Path
    changed: tuple[str, ...]   # files written or removed
    digest: str
    recovered: str | None = None  # what was put back after a run killed mid-swap


def same_file(path: Path, text: str) -> bool:
    """Whether `path` holds exactly `text` (bytes, UTF-8: no newline translation)."""
    try:
        return path.is_file() and path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False



def lock_path(output_dir: Path) -> Path:
    """The lock file of an output folder: beside it, in its parent, so that every run on the
    folder takes the same lock whatever its cache folder (`TORCH_FL_CACHE_DIR`)."""
    return output_dir.parent / f".{output_dir.name}.torchfl-gen.lock"


@contextlib.contextmanager
def output_lock(output_dir: Path, waiting: Callable[[str], None] | None = None):
    """Holds the lock of one output folder: two torchfl-gen runs on it never interleave (the
    second waits). An `flock` on `lock_path` (created in the output's parent); the file is
    removed on release, and a run that waited on a file removed meanwhile takes the lock again on
    the new one."""
    output_dir = output_dir.resolve()
    path = lock_path(output_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BuildError(f"cannot create the folder of {output_dir}: {os_error_text(error)}") from error
    said = False
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as error:
            raise BuildError(f"cannot take the lock of {output_dir} ({path}): {os_error_text(error)}") from error
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if waiting is not None and not said:
                    waiting(f"waiting for another torchfl-gen run on {output_dir} to finish")
                    said = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                current = None
            if current is None or not os.path.samestat(os.fstat(fd), current):
                continue  # the holder removed the file: lock the one at the path now
            try:
                yield
            finally:
                if os.fstat(fd).st_size == 0:  # ours (a lock file stays empty); never a user's file
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            return
        finally:
            os.close(fd)  # releases the flock


def os_error_text(error: OSError) -> str:
    """An OSError in words, without Python's `[Errno N]`."""
    if error.strerror is None:
        return str(error)
    where = ""
    if error.filename is not None:
        where = f" ({error.filename}" + (f" -> {error.filename2}" if error.filename2 is not None else "") + ")"
    return error.strerror + where


# --- staging folders ------------------------------------------------------------------------------
#
# A package is written to `<parent>/.<name>.staging-XXXXXXXX` (mkdtemp: the name is new, so the
# folder is this run's), whose first file is the marker; it is swapped in for the output folder.
# With the two-rename swap, the previous package waits in `<staging>.old` between the renames.
# Leftovers of a killed run are removed only where provably the generator's: the name has that
# form and the folder is empty or holds the generator's marker (written first, removed last).

STAGING = "staging-"


def _staging_name(output_dir: Path) -> re.Pattern:
    return re.compile(rf"\.{re.escape(output_dir.name)}\.{STAGING}[a-z0-9_]{{8}}(\.old)?")


def _is_marker(path: Path) -> bool:
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        with open(path, "rb") as handle:
            return handle.read(len(MARKER_START)) == MARKER_START
    except OSError:
        return False


MARKER_START = b"Written by torchfl-gen "


def _leftovers(output_dir: Path) -> list[Path]:
    """Staging folders of killed runs on `output_dir` (the caller holds its lock, so no other run
    is writing one): the name's form, a real folder, empty or with the generator's marker."""
    if not output_dir.parent.is_dir():
        return []
    pattern = _staging_name(output_dir)
    found = []
    for entry in sorted(os.scandir(output_dir.parent), key=lambda e: e.name):
        if not pattern.fullmatch(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        folder = Path(entry.path)
        if _is_marker(folder / MARKER) or not any(folder.iterdir()):
            found.append(folder)
    return found


def _remove_tree(folder: Path) -> None:
    """Remove a package folder of the generator's, its marker last (an interrupted removal leaves
    a folder the next run still knows as its own)."""
    for entry in os.scandir(folder):
        if entry.name == MARKER:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    with contextlib.suppress(OSError):
        os.unlink(folder / MARKER)
    with contextlib.suppress(OSError):
        folder.rmdir()


def _recover_interrupted_swap(output_dir: Path) -> str | None:
    """A run killed between the two renames of a swap leaves no output folder and the previous
    package in `<staging>.old`: put that back (the new package it was replacing is discarded,
    this run writes its own)."""
    if os.path.lexists(output_dir):
        return None
    retired = [p for p in _leftovers(output_dir) if p.name.endswith(".old") and _is_marker(p / MARKER)]
    if not retired:
        return None
    if len(retired) > 1:
        raise BuildError(f"{output_dir} is missing and {len(retired)} previous packages wait beside it "
                         f"({', '.join(p.name for p in retired)}): rename the one to keep to {output_dir.name}")
    retired[0].rename(output_dir)
    return (f"restored {output_dir} from {retired[0].name} (a run was killed while swapping the package in; "
            "this is the package before it)")


def _remove_stale_staging(output_dir: Path) -> None:
    for leftover in _leftovers(output_dir):
        _remove_tree(leftover)


# --- the atomic swap ------------------------------------------------------------------------------

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def _load_renameat2():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_renameat2 = _load_renameat2() if sys.platform.startswith("linux") else None


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux `renameat2(RENAME_EXCHANGE)`): a kill finds one or the
    other, never neither. False where the C library, kernel or filesystem cannot."""
    if _renameat2 is None:
        return False
    if _renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def _swap_in(staging: Path, output_dir: Path) -> None:
    """Put the complete package `staging` in place of `output_dir`. Atomic with `exchange`;
    otherwise two renames (the previous package to `<staging>.old`, the new one in place), the
    previous package restored if the second fails, and by the next run if this one is killed
    between them (`_recover_interrupted_swap`)."""
    if not os.path.lexists(output_dir):
        staging.rename(output_dir)
        return
    if exchange(staging, output_dir):
        _remove_tree(staging)  # now the previous package
        return
    retired = staging.with_name(staging.name + ".old")
    output_dir.rename(retired)
    try:
        staging.rename(output_dir)
    except BaseException:
        if not os.path.lexists(output_dir):
            retired.rename(output_dir)  # put the previous package back
        raise
    _remove_tree(retired)


# --- generating -----------------------------------------------------------------------------------

def generate(spec: ChipSpec, output_dir: Path) -> GenerateResult:
    """Write the package for `spec` into `output_dir`, replacing it atomically (the previous
    package stays whole until the new one is complete). Takes the folder's lock unless the
    caller holds it (`output_lock`)."""
    output_dir = output_dir.resolve()
    if _held_locks.get(output_dir):
        return _generate(spec, output_dir)
    with output_lock(output_dir):
        return _generate(spec, output_dir)


_held_locks: dict[Path, bool] = {}


@contextlib.contextmanager
def building(output_dir: Path, waiting: Callable[[str], None] | None = None):
    """The lock for a whole build (generate, compile, install) of `output_dir`."""
    output_dir = output_dir.resolve()
    with output_lock(output_dir, waiting):
        _held_locks[output_dir] = True
        try:
            yield
        finally:
            _held_locks.pop(output_dir, None)


@dataclass(frozen=True)
class FolderContents:
    owned: dict[str, Path]      # files the generator wrote (its manifest)
    products: dict[str, Path]   # what building or testing the package made
    foreign: list[str]          # anything else (a folder named once, with a trailing /)


def scan_output(output_dir: Path, owned: frozenset[str], spec: ChipSpec) -> FolderContents:
    """Every entry of `output_dir` (symbolic links are entries, never followed), classified."""
    folders = {"/".join(path.split("/")[:i]) for path in owned for i in range(1, path.count("/") + 1)}
    mine: dict[str, Path] = {}
    products: dict[str, Path] = {}
    foreign: list[str] = []

    def walk(folder: str, prefix: str, product: bool) -> None:
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if product or is_build_product(rel + "/", spec):
                    walk(entry.path, rel + "/", True)
                elif rel in folders:
                    walk(entry.path, rel + "/", False)
                else:
                    foreign.append(rel + "/")
            elif product or is_build_product(rel, spec):
                products[rel] = Path(entry.path)
            elif rel in owned:
                mine[rel] = Path(entry.path)
            else:
                foreign.append(rel)

    walk(str(output_dir), "", False)
    return FolderContents(mine, products, foreign)


def _owned_by_marker(output_dir: Path, files: dict[str, str]) -> frozenset[str]:
    """The files the folder's marker lists; for a marker without a list (torchfl-gen before it
    kept one), the files this run writes."""
    try:
        listed = manifest((output_dir / MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        listed = None
    return frozenset(files) if listed is None else listed


def _generate(spec: ChipSpec, output_dir: Path) -> GenerateResult:
    recovered = _recover_interrupted_swap(output_dir)
    _remove_stale_staging(output_dir)
    files = render(spec, output_dir)
    if os.path.lexists(output_dir) and not output_dir.is_dir():
        raise BuildError(f"{output_dir} exists and is not a folder: choose another --output")
    old = FolderContents({}, {}, [])
    if output_dir.exists():
        if not _is_marker(output_dir / MARKER):
            if any(output_dir.iterdir()):
                raise BuildError(f"{output_dir} exists and was not written by torchfl-gen (no {MARKER}); "
                                 "refusing to replace it: choose another --output or remove it")
        else:
            old = scan_output(output_dir, _owned_by_marker(output_dir, files), spec)
            if old.foreign:
                shown = ", ".join(old.foreign[:10]) + (f" and {len(old.foreign) - 10} more" if len(old.foreign) > 10 else "")
                raise BuildError(f"{output_dir} holds what torchfl-gen did not write: {shown}; refusing to replace "
                                 "the folder (they would be lost): move them out of it, or choose another --output")
    changed = [path for path, text in sorted(files.items()) if not same_file(output_dir / path, text)]
    stale = [rel for rel in sorted(old.owned) if rel not in files]
    if not changed and not stale:
        return GenerateResult(output_dir, (), digest(files), recovered)

    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.{STAGING}", dir=output_dir.parent))
    swapped = False
    try:
        staging.chmod(0o755)  # mkdtemp makes it private
        # The marker first: a killed run's staging folder is known by it (`_leftovers`).
        for path in sorted(files, key=lambda p: p != MARKER):
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if path in changed:
                target.write_bytes(files[path].encode("utf-8"))
            else:
                shutil.copy2(output_dir / path, target)  # keeps mtime: ninja sees no change
        # Build products in the folder (an in-place build) survive regeneration.
        for rel, source in old.products.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, staging / rel, follow_symlinks=False)
        _swap_in(staging, output_dir)
        swapped = True
    finally:
        if not swapped and staging.exists():
            _remove_tree(staging)
    return GenerateResult(output_dir, tuple(changed + stale), digest(files), recovered)


def is_build_product(rel: str, spec: ChipSpec) -> bool:
    """Whether `rel` (a posix path inside the output folder; a folder with a trailing /) is made by
    building or testing the package, not by generating it: the generator's own, carried over by
    `generate` (never deleted), not reported by `check`. The package's .gitignore lists the
    build's; a run of its suite adds caches and its records (`.torchfl/`)."""
    parts = rel.split("/")
    if "__pycache__" in parts or ".pytest_cache" in parts:
        return True
    if len(parts) > 1 and (parts[0] in ("build", ".torchfl") or parts[0].endswith(".egg-info")):
        return True
    return (len(parts) == 2 and parts[0] == spec.chip.package
            and (parts[1] == "_build.json" or parts[1].startswith("_C.") or parts[1].endswith(".so")))


def cache_root() -> Path:
    return Path(env.get("CACHE_DIR", Path.home() / ".cache" / "torchfl-gen"))


def build_dir_for(spec: ChipSpec, output_dir: Path) -> Path:
    """Object files of one output folder: keyed on the chip and where its sources live."""
    key = hashlib.sha256(str(output_dir.resolve()).encode()).hexdigest()[:12]
    return cache_root() / "build" / f"{spec.chip.name}-{key}"


def _inputs_fingerprint(spec: ChipSpec, package_digest: str) -> str:
    """Everything a compiled backend depends on besides the generated text."""
    import torch

    h = hashlib.sha256()
    h.update(f"{__version__}\0{package_digest}\0{torch.__version__}\0{sys.executable}\0".encode())
    h.update(f"debug info {env.get('DEBUG_INFO') == '1'}\0".encode())   # setup.py's -g or -g0
    for source in sorted(csrc_dir().rglob("*")):
        if source.is_file():
            h.update(str(source).encode() + source.read_bytes())
    for kernels in _kernels_of(spec):
        # Sources compiled into the backend, and the kernel headers it includes.
        headers = [folder / h for folder in kernels.include_dirs for h in kernels.headers]
        for path in [*kernels.sources, *headers]:
            if path.is_file():
                h.update(str(path).encode() + b"\0" + path.read_bytes())
        for folder in kernels.library_dirs:
            for lib in kernels.libraries:
                candidate = folder / f"lib{lib}.so"
                if candidate.exists():
                    st = candidate.stat()
                    h.update(f"{candidate}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()


def _kernels_of(spec: ChipSpec | CompositeSpec) -> list:
    """The vendor kernel sections compiled into the backend: the chip's, or each member's."""
    chips = spec.members if isinstance(spec, CompositeSpec) else (spec,)
    return [chip.kernels for chip in chips if chip.kernels]


def _native_installed(spec: NativeSpec, result: GenerateResult) -> bool:
    """Whether the installed package of a native chip has exactly the generated modules."""
    from importlib import metadata

    try:
        dist = metadata.distribution(spec.chip.distribution)
    except metadata.PackageNotFoundError:
        return False
    modules = sorted((result.output_dir / spec.chip.package).glob("*.py"))
    return bool(modules) and all(
        same_file(Path(dist.locate_file(f"{spec.chip.package}/{m.name}")), m.read_text(encoding="utf-8"))
        for m in modules)


def _installed_fingerprint(spec: ChipSpec) -> str | None:
    from importlib import metadata

    try:
        dist = metadata.distribution(spec.chip.distribution)
    except metadata.PackageNotFoundError:
        return None
    stamp = dist.locate_file(f"{spec.chip.package}/_build.json")
    try:
        return json.loads(Path(stamp).read_text()).get("inputs")
    except (OSError, ValueError):
        return None


def _run(cmd: list[str], env: dict, log_path: Path, verbose: bool, what: str) -> None:
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if verbose:
                sys.stderr.write(line)
        code = proc.wait()
    if code != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-40:])
        raise BuildError(f"{what} failed (exit {code}); full log: {log_path}\n{tail}")


# --- compiling ------------------------------------------------------------------------------------

def _release(version: str) -> tuple[int, ...]:
    """"2.13.0+cpu" -> (2, 13, 0): the release numbers a requirement compares."""
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0].split("-")[0])[:3])


_COMPARE = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b,
            "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def missing_build_requirements(pyproject: Path) -> list[str]:
    """The package's build requirements (its pyproject's `requires`) that this environment does
    not meet. The build runs without isolation, against the torch installed here, so pip
    installs none of them: they must be present."""
    from importlib import metadata

    match = re.search(r"^requires = (\[.*\])$", pyproject.read_text(), re.MULTILINE)
    requirements = json.loads(match.group(1)) if match else []
    missing = []
    for requirement in requirements:
        name, specs = re.fullmatch(r"([A-Za-z0-9_.-]+)(.*)", requirement).groups()
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(f"{requirement} (not installed)")
            continue
        for op, wanted in re.findall(r"(>=|<=|==|!=|<|>)\s*([\w.+]+)", specs):
            if not _COMPARE[op](_release(installed), _release(wanted)):
                missing.append(f"{requirement} (installed: {installed})")
                break
    return missing


def compile_package(spec: ChipSpec, result: GenerateResult, *, install: bool, verbose: bool,
                    progress: Callable[[str], None]) -> Path | None:
    """Compile the generated package; install it (pip) or leave a wheel. Returns the wheel path.
    A native chip's package is pure Python: installed as is."""
    build_dir = build_dir_for(spec, result.output_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    native = isinstance(spec, NativeSpec)
    fingerprint = result.digest if native else _inputs_fingerprint(spec, result.digest)
    if install and (_native_installed(spec, result) if native else _installed_fingerprint(spec) == fingerprint):
        progress(f"{spec.chip.distribution} is up to date (installed, same inputs): nothing to "
                 + ("install" if native else "compile"))
        return None
    # TORCH_FL_RUNTIME_OBJECTS: the shared runtime's objects, compiled once for every build.
    build_env = dict(os.environ, TORCH_FL_BUILD_DIR=str(build_dir), TORCH_FL_BUILD_INPUTS=fingerprint,
               TORCH_FL_RUNTIME_OBJECTS=str(cache_root() / "runtime"),
               MAX_JOBS=os.environ.get("MAX_JOBS", str(os.cpu_count() or 1)))
    missing = missing_build_requirements(result.output_dir / "pyproject.toml")
    if missing:
        raise BuildError(f"cannot build {spec.chip.distribution} with {sys.executable}: the build runs "
                         "against the packages installed here and needs " + "; ".join(missing)
                         + ". Install them (pip install 'setuptools>=68' wheel) and build again")
    pip = [sys.executable, "-m", "pip"]
    flags = ["--no-build-isolation", "--no-deps", "--disable-pip-version-check"]
    if install:
        progress(f"{'installing' if native else 'compiling and installing'} {spec.chip.distribution} "
                 f"(log: {build_dir / 'build.log'})")
        _run(pip + ["install", *flags, str(result.output_dir)], build_env, build_dir / "build.log", verbose, "pip install")
        progress(f"installed {spec.chip.distribution}: " + (
            f"torch_fl now knows the {spec.chip.name} chip (torch.{spec.device_type} on a {spec.torch_build} build)"
            if native else f"`import torch` now provides torch.{spec.chip.name}"))
        return None
    wheels = build_dir / "dist"
    shutil.rmtree(wheels, ignore_errors=True)
    progress(f"compiling {spec.chip.distribution} into a wheel (log: {build_dir / 'build.log'})")
    _run(pip + ["wheel", *flags, "-w", str(wheels), str(result.output_dir)], build_env, build_dir / "build.log",
         verbose, "pip wheel")
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise BuildError(f"pip wheel produced no wheel in {wheels}")
    return found[0]


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start
