"""Generate a backend package and compile/install it, cached.

The output folder is replaced atomically (a sibling temp folder, then a swap),
and files whose text did not change keep their timestamps, so ninja's
incremental build in the cache folder sees only real changes.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import __version__
from .model import ChipSpec, NativeSpec
from .render import MARKER, digest, render
from .runtime_files import csrc_dir
from . import env


class BuildError(Exception):
    """A build step failed; the message says which and where its log is."""


@dataclass(frozen=True)
class GenerateResult:
    output_dir: Path
    changed: tuple[str, ...]   # files written or removed
    digest: str


def same_file(path: Path, text: str) -> bool:
    """Whether `path` holds exactly `text` (bytes, UTF-8: no newline translation)."""
    try:
        return path.is_file() and path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False



@contextlib.contextmanager
def output_lock(output_dir: Path, waiting: Callable[[str], None] | None = None):
    """Holds the lock of one output folder: two torchfl-gen runs on it never interleave (the
    second waits). The lock file lives in the cache folder, keyed on the output path."""
    output_dir = output_dir.resolve()
    key = hashlib.sha256(str(output_dir).encode()).hexdigest()[:16]
    path = cache_root() / "locks" / f"{output_dir.name}-{key}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting(f"waiting for another torchfl-gen run on {output_dir} to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_stale_staging(output_dir: Path) -> None:
    """Staging folders a killed run left beside the output (the caller holds its lock, so no
    other run is writing one)."""
    if not output_dir.parent.is_dir():
        return
    for leftover in output_dir.parent.glob(f".{output_dir.name}.*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)


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


def _generate(spec: ChipSpec, output_dir: Path) -> GenerateResult:
    _remove_stale_staging(output_dir)
    files = render(spec, output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise BuildError(f"{output_dir} exists and is not a folder: choose another --output")
    if output_dir.exists() and not (output_dir / MARKER).exists() and any(output_dir.iterdir()):
        raise BuildError(f"{output_dir} exists and was not written by torchfl-gen (no {MARKER}); "
                         "refusing to replace it: choose another --output or remove it")
    old = ({p.relative_to(output_dir).as_posix(): p for p in output_dir.rglob("*") if p.is_file()}
           if output_dir.exists() else {})
    changed = [path for path, text in sorted(files.items()) if not same_file(output_dir / path, text)]
    kept = {rel: p for rel, p in old.items() if rel not in files and is_build_product(rel, spec)}
    stale = [rel for rel in sorted(old) if rel not in files and rel not in kept]
    if not changed and not stale:
        return GenerateResult(output_dir, (), digest(files))

    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.", dir=output_dir.parent))
    staging.chmod(0o755)  # mkdtemp makes it private
    # Unique like the staging folder: a fixed name (e.g. with the pid, which containers reuse)
    # could collide with one a killed run left behind.
    retired = staging.with_name(staging.name + ".old")
    moved = False
    try:
        for path, text in files.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if path in changed:
                target.write_bytes(text.encode("utf-8"))
            else:
                shutil.copy2(output_dir / path, target)  # keeps mtime: ninja sees no change
        # Build products in the folder (an in-place build) survive regeneration.
        for rel, source in kept.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, staging / rel)
        if output_dir.exists():
            output_dir.rename(retired)
            moved = True
        staging.rename(output_dir)
    except BaseException:
        if moved and not output_dir.exists():
            retired.rename(output_dir)  # put the previous package back
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if moved:
        shutil.rmtree(retired, ignore_errors=True)
    return GenerateResult(output_dir, tuple(changed + stale), digest(files))


def is_build_product(rel: str, spec: ChipSpec) -> bool:
    """Whether `rel` (a posix path inside the output folder) is made by building or running the
    package (not by generating it): kept by `generate`, not reported by `check`."""
    parts = rel.split("/")
    if "__pycache__" in parts or ".pytest_cache" in parts:
        return True
    return any(rel.startswith(p) for p in _ignored_build_products(spec))


def _ignored_build_products(spec: ChipSpec) -> tuple[str, ...]:
    pkg = spec.chip.package
    return ("build/", f"{pkg}/_build.json", f"{pkg}/_C", f"{spec.chip.distribution.replace('-', '_')}.egg-info/")


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
    for source in sorted(csrc_dir().rglob("*")):
        if source.is_file():
            h.update(str(source).encode() + source.read_bytes())
    if spec.kernels:
        # Sources compiled into the backend, and the kernel headers it includes.
        headers = [folder / h for folder in spec.kernels.include_dirs for h in spec.kernels.headers]
        for path in [*spec.kernels.sources, *headers]:
            if path.is_file():
                h.update(str(path).encode() + b"\0" + path.read_bytes())
        for folder in spec.kernels.library_dirs:
            for lib in spec.kernels.libraries:
                candidate = folder / f"lib{lib}.so"
                if candidate.exists():
                    st = candidate.stat()
                    h.update(f"{candidate}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()


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
