"""torchfl-gen: validate chip specs, generate and build backend packages.

Exit codes: 0 success, 1 invalid spec, 2 usage error (click), 3 build failed,
4 generated output is stale (check).
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import click

from . import __version__
from .errors import SpecErrors

EXIT_SPEC = 1
EXIT_BUILD = 3
EXIT_STALE = 4

log = logging.getLogger("torchfl_gen")


def _fail(message: str, code: int) -> None:
    click.echo(message, err=True)
    sys.exit(code)


def _load(path: str):
    from .spec import load_spec

    try:
        return load_spec(path, display=path)
    except SpecErrors as errors:
        _fail("\n".join(e.format() for e in errors.errors) + f"\n{path}: {len(errors.errors)} error(s)", EXIT_SPEC)


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
    for path in specs:
        spec = _load(path)
        click.echo(f"{path}: ok ({spec.chip.name}: {len(spec.vendor_ops)} vendor ops, "
                   f"{len(spec.ops) - len(spec.vendor_ops)} routed, default chain {list(spec.fallback.default)})")


def _default_output(spec) -> Path:
    return Path("generated") / spec.chip.name


@main.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), help="Package folder [generated/<chip>].")
def generate(spec_path: str, output: str | None) -> None:
    """Write the backend package for SPEC without compiling it."""
    from .build import BuildError, generate as write_package

    spec = _load(spec_path)
    try:
        result = write_package(spec, Path(output) if output else _default_output(spec))
    except BuildError as error:
        _fail(f"error: {error}", EXIT_BUILD)
    click.echo(f"{result.output_dir}: {len(result.changed)} file(s) changed")


@main.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), help="Package folder [generated/<chip>].")
@click.option("--no-install", is_flag=True, help="Build a wheel instead of installing into this environment.")
@click.pass_context
def build(ctx: click.Context, spec_path: str, output: str | None, no_install: bool) -> None:
    """Validate SPEC, generate its package, compile (cached) and install it."""
    from .build import BuildError, compile_package, generate as write_package

    verbose = ctx.obj["verbose"]
    say = _progress(verbose)
    say(f"validating {spec_path}")
    spec = _load(spec_path)
    out = Path(output) if output else _default_output(spec)
    try:
        result = write_package(spec, out)
        say(f"generated {out} ({len(result.changed)} file(s) changed)")
        wheel = compile_package(spec, result, install=not no_install, verbose=verbose, progress=say)
    except BuildError as error:
        _fail(f"error: {error}", EXIT_BUILD)
    if wheel is not None:
        say(f"built {wheel}")
        click.echo(str(wheel))
    else:
        say(f"installed {spec.chip.distribution}: `import torch` now provides torch.{spec.chip.name}")


@main.command()
@click.option("--specs-dir", default="specs", show_default=True, type=click.Path(file_okay=False))
@click.option("--generated-dir", default="generated", show_default=True, type=click.Path(file_okay=False))
def check(specs_dir: str, generated_dir: str) -> None:
    """Fail if any committed generated/<chip>/ differs from what its spec generates."""
    from .render import MARKER, render

    stale: list[str] = []
    specs = sorted(Path(specs_dir).glob("*.yaml"))
    if not specs:
        _fail(f"no specs in {specs_dir}", EXIT_SPEC)
    for path in specs:
        spec = _load(str(path))
        out = Path(generated_dir) / spec.chip.name
        for rel, text in sorted(render(spec, out).items()):
            target = out / rel
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(str(target))
        if (out / MARKER).exists():
            expected = set(render(spec, out))
            for existing in sorted(p for p in out.rglob("*") if p.is_file()):
                rel = existing.relative_to(out).as_posix()
                if rel not in expected and not _is_build_product(rel, spec):
                    stale.append(f"{existing} (not generated)")
    if stale:
        _fail("stale generated files (run `torchfl-gen generate SPEC` and commit):\n  " + "\n  ".join(stale),
              EXIT_STALE)
    click.echo(f"generated/ is up to date for {len(specs)} spec(s)")


def _is_build_product(rel: str, spec) -> bool:
    from .build import _ignored_build_products

    return any(rel.startswith(p) for p in _ignored_build_products(spec)) or "__pycache__" in rel


@main.command()
@click.option("-o", "--output", default="docs/spec.md", show_default=True, type=click.Path(dir_okay=False))
def docs(output: str) -> None:
    """Write the spec reference (docs/spec.md) from the JSON Schema."""
    from .docs_gen import write_spec_doc

    click.echo(("wrote " if write_spec_doc(output) else "up to date: ") + output)


if __name__ == "__main__":
    main()
