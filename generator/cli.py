"""torchfl-gen: validate chip specs, generate and build backend packages.

Exit codes: 0 success, 1 invalid spec, 2 usage error (click), 3 build failed,
4 generated output is stale (check), 5 OpInfo results missing or unreadable (matrix),
6 the traced script failed or no chip backend is installed (coverage),
7 the doctor found a problem (doctor).
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import click

from . import __version__
from .errors import SpecErrors

EXIT_SPEC = 1
EXIT_BUILD = 3
EXIT_STALE = 4
EXIT_RESULTS = 5
EXIT_COVERAGE = 6
EXIT_DOCTOR = 7  # = torch_fl.doctor.EXIT_PROBLEMS, so both doctors exit alike

log = logging.getLogger("torchfl_gen")


def _fail(message: str, code: int) -> None:
    click.echo(message, err=True)
    sys.exit(code)


def _load(path: str, *, exit_on_error: bool = True, driver_version: str | None = None):
    """The spec at `path` (for `driver_version`, default its driver.version); on errors print
    them (located) to stderr and exit 1, or return None."""
    from .spec import load_spec

    try:
        return load_spec(path, display=path, driver_version=driver_version)
    except SpecErrors as errors:
        message = "\n".join(e.format() for e in errors.errors) + f"\n{path}: {len(errors.errors)} error(s)"
        if not exit_on_error:
            click.echo(message, err=True)
            return None
        _fail(message, EXIT_SPEC)


def _is_native(spec) -> bool:
    return spec.chip.integration == "native"


def _has_driver(spec) -> bool:
    """A privateuse1 chip: a driver of its own (a native chip's is torch's, a composite's its members')."""
    return spec.chip.integration == "privateuse1"


def _driver_versions(spec) -> tuple:
    """The driver versions a spec builds (a native or composite chip: one build, no driver of its own)."""
    return spec.driver.versions if _has_driver(spec) else (None,)


def _not_for_native(spec, path: str, what: str) -> None:
    if not _has_driver(spec):
        _fail(f"{path}: {spec.chip.name} is a {spec.chip.integration} chip (integration: {spec.chip.integration}): "
              f"it has no {what}", EXIT_SPEC)


def _progress(verbose: bool):
    start = time.perf_counter()

    def say(message: str) -> None:
        click.echo(f"[{time.perf_counter() - start:6.1f}s] {message}", err=True)

    return say


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="torchfl-gen")
@click.option("-v", "--verbose", is_flag=True, help="Show every step and the compiler's output.")
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """Turn a YAML chip spec into a PyTorch device backend."""
    ctx.obj = {"verbose": verbose}
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(name)s: %(message)s")


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
def validate(specs: tuple[str, ...]) -> None:
    """Check SPECS against the schema and the installed torch's operators."""
    failed = 0
    for path in specs:  # every spec is checked, even after one fails
        spec = _load(path, exit_on_error=False)
        if spec is None:
            failed += 1
            continue
        if _is_native(spec):
            click.echo(f"{path}: ok ({spec.chip.name}: native, torch.{spec.device_type} on a {spec.torch_build} build "
                       f"of torch, collective {spec.collective.backend} ({spec.collective.library}))")
            continue
        if not _has_driver(spec):
            click.echo(f"{path}: ok ({spec.chip.name}: composite of "
                       + ", ".join(f"{m.chip.name} ({len(m.vendor_ops)} vendor ops)" for m in spec.members) + ")")
            continue
        overlays = [_load(path, exit_on_error=False, driver_version=v) for v in spec.driver.versions[1:]]
        if any(o is None for o in overlays):
            failed += 1
            continue
        versions = f", driver versions {', '.join(spec.driver.versions)}" if overlays else ""
        click.echo(f"{path}: ok ({spec.chip.name}: {len(spec.vendor_ops)} vendor ops, "
                   f"{len(spec.ops) - len(spec.vendor_ops)} routed, default chain {list(spec.fallback.default)}"
                   f"{versions})")
    if failed:
        sys.exit(EXIT_SPEC)


def _package_folder(spec) -> str:
    """generated/<chip> for the spec's driver.version, generated/<chip>-driver<V> for the others."""
    if not _has_driver(spec) or spec.driver.version == spec.driver.default_version:
        return spec.chip.name
    return f"{spec.chip.name}-driver{spec.driver.version}"


def _default_output(spec) -> Path:
    return Path("generated") / _package_folder(spec)


DRIVER_VERSION_HELP = "Build for this driver version (driver.version, or one of driver.versions) [driver.version]."


@main.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), help="Package folder [generated/<chip>].")
@click.option("--driver-version", help=DRIVER_VERSION_HELP)
def generate(spec_path: str, output: str | None, driver_version: str | None) -> None:
    """Write the backend package for SPEC without compiling it."""
    from .build import BuildError, building, generate as write_package, os_error_text

    spec = _load(spec_path, driver_version=driver_version)
    out = Path(output) if output else _default_output(spec)
    try:
        with building(out, waiting=lambda message: click.echo(message, err=True)):
            result = write_package(spec, out)
    except BuildError as error:
        _fail(f"error: {error}", EXIT_BUILD)
    except OSError as error:
        _fail(f"error: writing {out.resolve()} failed: {os_error_text(error)}", EXIT_BUILD)
    if result.recovered:
        click.echo(f"note: {result.recovered}", err=True)
    click.echo(f"{result.output_dir}: {len(result.changed)} file(s) changed")


@main.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), help="Package folder [generated/<chip>].")
@click.option("--no-install", is_flag=True, help="Build a wheel instead of installing into this environment.")
@click.option("--driver-version", help=DRIVER_VERSION_HELP)
@click.pass_context
def build(ctx: click.Context, spec_path: str, output: str | None, no_install: bool,
          driver_version: str | None) -> None:
    """Validate SPEC, generate its package, compile (cached) and install it."""
    from .build import BuildError, building, compile_package, generate as write_package, os_error_text

    verbose = ctx.obj["verbose"]
    say = _progress(verbose)
    say(f"validating {spec_path}" + (f" for driver {driver_version}" if driver_version else ""))
    spec = _load(spec_path, driver_version=driver_version)
    out = Path(output) if output else _default_output(spec)
    try:
        with building(out, waiting=say):  # one build of a folder at a time
            result = write_package(spec, out)
            if result.recovered:
                say(f"note: {result.recovered}")
            say(f"generated {out} ({len(result.changed)} file(s) changed)")
            wheel = compile_package(spec, result, install=not no_install, verbose=verbose, progress=say)
    except BuildError as error:
        _fail(f"error: {error}", EXIT_BUILD)
    except OSError as error:
        _fail(f"error: building {out.resolve()} failed: {os_error_text(error)}", EXIT_BUILD)
    _record_build(spec, say)
    if wheel is not None:
        say(f"built {wheel}")
        click.echo(str(wheel))


def _record_build(spec, say) -> None:
    """A line for the compatibility matrix (torchfl-gen compat); never fails the build."""
    from .compat import BUILDS_FILE, append_record, build_record

    if not _has_driver(spec):
        return  # the matrix is of a chip's driver and torch versions (a composite's are its members')

    try:
        append_record(build_record(spec))
    except OSError as error:
        say(f"note: could not record the build in {BUILDS_FILE}: {error}")


@main.command()
@click.argument("spec_paths", metavar="[SPEC]...", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--records", default="docs/compat/records.jsonl", show_default=True, type=click.Path(dir_okay=False),
              help="The committed records the matrix is rendered from.")
@click.option("--add", "added", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="Merge these record files first (.torchfl/builds.jsonl, .torchfl/suite-<chip>.jsonl).")
@click.option("--out", default="docs/compat.md", show_default=True, type=click.Path(dir_okay=False))
@click.option("--check", is_flag=True, help="Fail if --out is not what the records and specs give.")
def compat(spec_paths: tuple[str, ...], records: str, added: tuple[str, ...], out: str, check: bool) -> None:
    """Render the driver x torch compatibility matrix of SPECs (default: specs/*.yaml)."""
    from . import compat as compat_mod

    paths = list(spec_paths) or sorted(str(p) for p in Path("specs").glob("*.yaml"))
    specs = {}
    for path in paths:
        base = _load(path)
        if not _has_driver(base):
            continue  # torch's own build, or a composite (its members' rows): no driver x torch matrix of its own
        specs[path] = [base] + [_load(path, driver_version=v) for v in base.driver.versions[1:]]
    records_path = Path(records)
    try:
        existing = compat_mod.load_records([records_path] if records_path.exists() else [])
        chips = {builds[0].chip.name for builds in specs.values()}  # records of test variants are left out
        fresh = [r for r in compat_mod.load_records([Path(a) for a in added]) if r["chip"] in chips]
        merged = compat_mod.merge(existing + fresh)
    except (ValueError, OSError) as error:
        _fail(f"error: {error}", EXIT_RESULTS)
    text = compat_mod.render(specs, merged, records_path.as_posix())
    if check:
        if not Path(out).is_file() or Path(out).read_text(encoding="utf-8") != text or merged != existing:
            _fail(f"{out} is stale: run `torchfl-gen compat` and commit it", EXIT_STALE)
        click.echo(f"{out} is up to date ({len(merged)} records)")
        return
    if added:
        records_path.parent.mkdir(parents=True, exist_ok=True)
        records_path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in merged), encoding="utf-8")
        click.echo(f"wrote {records_path} ({len(merged)} records)")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text, encoding="utf-8")
    click.echo(f"wrote {out}")


@main.command("diff")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("--from", "old", required=True, help="Driver version to compare from.")
@click.option("--to", "new", required=True, help="Driver version to compare to.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def diff_versions(spec_path: str, old: str, new: str, as_json: bool) -> None:
    """What changes between two driver versions of SPEC: ops gained, lost, re-routed; dtypes."""
    from .versions import diff, format_diff

    _not_for_native(_load(spec_path), spec_path, "driver versions to compare")
    a = _load(spec_path, driver_version=old)
    b = _load(spec_path, driver_version=new)
    changes = diff(a, b)
    click.echo(json.dumps(changes, indent=2, sort_keys=True) if as_json else format_diff(changes))


@main.command()
@click.option("--specs-dir", default="specs", show_default=True, type=click.Path(file_okay=False))
@click.option("--generated-dir", default="generated", show_default=True, type=click.Path(file_okay=False))
def check(specs_dir: str, generated_dir: str) -> None:
    """Fail if any committed generated/<chip>/ (one per declared driver version) differs from what its spec generates."""
    from .render import MARKER

    stale: list[str] = []
    specs = sorted(Path(specs_dir).glob("*.yaml"))
    if not specs:
        _fail(f"no specs in {specs_dir}", EXIT_SPEC)
    folders: set[str] = set()
    builds = 0
    for path in specs:
        base = _load(str(path))
        for version in _driver_versions(base):
            spec = base if version is None or version == base.driver.version else _load(str(path), driver_version=version)
            builds += 1
            stale += _stale_files(spec, Path(generated_dir) / _package_folder(spec))
            folders.add(_package_folder(spec))
    # A generated package whose spec (or driver version) is gone.
    for marker in sorted(Path(generated_dir).glob(f"*/{MARKER}")):
        if marker.parent.name not in folders:
            stale.append(f"{marker.parent} (no spec in {specs_dir} generates it)")
    if stale:
        _fail("stale generated files (run `torchfl-gen generate SPEC [--driver-version V]` and commit):\n  "
              + "\n  ".join(stale), EXIT_STALE)
    click.echo(f"generated/ is up to date for {len(specs)} spec(s)"
               + (f" ({builds} driver versions)" if builds != len(specs) else ""))


def _stale_files(spec, out: Path) -> list[str]:
    """Files of `out` that differ from what `spec` generates, are missing, or are not generated."""
    from .build import is_build_product, same_file
    from .render import MARKER, render

    stale: list[str] = []
    expected = render(spec, out)
    for rel, text in sorted(expected.items()):
        target = out / rel
        if not same_file(target, text):
            stale.append(str(target) if target.exists() else f"{target} (missing)")
    if (out / MARKER).exists():
        for existing in sorted(p for p in out.rglob("*") if p.is_file()):
            rel = existing.relative_to(out).as_posix()
            if rel not in expected and not is_build_product(rel, spec):
                stale.append(f"{existing} (not generated)")
    return stale


@main.command()
@click.option("-o", "--output", default="docs/spec.md", show_default=True, type=click.Path(dir_okay=False))
def docs(output: str) -> None:
    """Write the spec reference (docs/spec.md) from the JSON Schema."""
    from .docs_gen import write_spec_doc

    click.echo(("wrote " if write_spec_doc(output) else "up to date: ") + output)


@main.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("--results", type=click.Path(dir_okay=False),
              help="JSON Lines from generated/<chip>/tests/test_opinfo.py [.torchfl/opinfo-<chip>.jsonl].")
@click.option("--out-dir", default="docs/ops", show_default=True, type=click.Path(file_okay=False))
def matrix(spec_path: str, results: str | None, out_dir: str) -> None:
    """Write docs/ops/<chip>.md/.html/.json: the OpInfo sweep joined with SPEC's declared paths."""
    from .matrix import ResultsError, build_matrix, default_results, load_results, write_matrix

    spec = _load(spec_path)
    _not_for_native(spec, spec_path, "op matrix (torch's own kernels run every op)")
    results_path = Path(results) if results else default_results(spec)
    try:
        records = load_results(results_path)
    except ResultsError as error:
        _fail(f"error: {error}", EXIT_RESULTS)
    m = build_matrix(spec, records, results_path.as_posix())
    for path in write_matrix(m, Path(out_dir)):
        click.echo(f"wrote {path}")
    h = m.headline()
    click.echo(f"{spec.chip.name}: {h['opinfos']} OpInfo entries, {h['tested']} tested: "
               f"basic {h['basic']}, strict {h['strict']} (failing {h['failing']}, "
               f"not comparable {h['not_comparable']}, untested {h['untested']})")


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("--script", required=True, type=click.Path(dir_okay=False, exists=True),
              help="Python script to run (in this process) with the chip's backend.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--compile", "compile_", is_flag=True,
              help="Report the graph breaks of what SCRIPT compiles (torch.compile), the chip's first.")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def coverage(spec_path: str, script: str, as_json: bool, compile_: bool, script_args: tuple[str, ...]) -> None:
    """Run SCRIPT under a dispatch trace: every aten op it called and its path on SPEC's chip.

    Arguments after `--` go to the script. Sorted for a vendor engineer: CPU fallbacks first.
    With --compile, SCRIPT runs untraced and the report is its torch.compile graph breaks, each
    with its count and whether the chip caused it.
    """
    from .coverage import run

    spec = _load(spec_path)
    status = run(spec, script, list(script_args), as_json, compile_)
    if status != 0:
        sys.exit(EXIT_COVERAGE)


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--backend", help="Check only this backend (device type).")
@click.option("--script", type=click.Path(dir_okay=False, exists=True),
              help="Training script to run (in this process, until its second optimizer step) and check.")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def doctor(as_json: bool, backend: str | None, script: str | None, script_args: tuple[str, ...]) -> None:
    """Diagnose the installed backends and, with --script, a training script (as python -m torch_fl doctor).

    Backends: why one fails to load (the loader's text), driver against backend version, devices.
    Script: parameters on another device than their module's input, CPU fallbacks in one step,
    torch.cuda.amp on a non-CUDA device, cudnn settings without effect. Arguments after `--` go
    to the script.
    """
    if script_args and script is None:
        raise click.UsageError("script arguments given without --script")
    # In a process of its own: the generator imports no part of the runtime. Not loading every
    # installed backend at `import torch` keeps the doctor alive where two generated backends
    # are installed (the second aborts the process); it registers one itself.
    env = {**os.environ}
    env.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    command = [sys.executable, "-m", "torch_fl", "doctor", *(["--json"] if as_json else []),
               *(["--backend", backend] if backend else []), *(["--script", script, "--"] if script else []),
               *script_args]
    status = subprocess.run(command, env=env, check=False).returncode
    if status != 0:
        sys.exit(EXIT_DOCTOR if status == EXIT_DOCTOR else status)


if __name__ == "__main__":
    main()
