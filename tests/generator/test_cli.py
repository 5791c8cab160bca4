"""The `torchfl-gen` command line: help, version, validate, exit codes, the entry point.

In-process calls use click's CliRunner (click >= 8.2 keeps stderr apart: `result.stderr`);
a few run the installed `torchfl-gen` executable to prove the entry point and exit codes.
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import torchfl_gen
from torchfl_gen import cli
from spec_helpers import NPU, NPU_TEXT, ROOT, edit, write

CLICK_VERSION = tuple(int(x) for x in importlib.metadata.version("click").split(".")[:2])
EXE = shutil.which("torchfl-gen")


def invoke(*args: str, cwd: Path = ROOT):
    """Run the CLI in-process with stdout and stderr kept apart."""
    runner = CliRunner(**({} if CLICK_VERSION >= (8, 2) else {"mix_stderr": False}))
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(cli.main, list(args), catch_exceptions=True)
    finally:
        os.chdir(old)


def run_exe(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    assert EXE is not None, "the torchfl-gen executable is not on PATH (pip install -e .)"
    return subprocess.run([EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def no_traceback(result) -> None:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


@pytest.fixture(scope="module")
def bad_spec(tmp_path_factory) -> tuple[Path, int, int]:
    """specs/npu.yaml with the op `add.Tensor` misspelled; returns (path, line, column)."""
    text = edit(("  add.Tensor:", "  add.Tensr:"))
    path = write(tmp_path_factory.mktemp("bad"), text)
    for number, line in enumerate(text.splitlines(), 1):
        if "add.Tensr" in line:
            return path, number, line.index("add.Tensr") + 1
    raise AssertionError("edit lost")


def error_line(path: Path, line: int, col: int) -> str:
    return f"{path}:{line}:{col}: ops: unknown aten op 'add.Tensr' (did you mean 'add.Tensor'?)"


# --- help and version -------------------------------------------------------------------------

SUBCOMMANDS = sorted(cli.main.commands)


def test_subcommands_are_the_documented_ones():
    assert set(SUBCOMMANDS) >= {"validate", "generate", "build", "check", "docs"}


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_group_help(flag):
    result = invoke(flag)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: ")
    for name in SUBCOMMANDS:
        assert name in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_subcommand_help(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: main {command}") or result.stdout.startswith(
        f"Usage: torchfl-gen {command}")
    assert (cli.main.commands[command].help or "").split("\n")[0].split()[0] in result.stdout


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"torchfl-gen, version {torchfl_gen.__version__}\n"
    # The package metadata and the module agree on the version.
    assert importlib.metadata.version("torch-fl") == torchfl_gen.__version__


# --- validate ---------------------------------------------------------------------------------

def test_validate_ok():
    result = invoke("validate", "specs/npu.yaml")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("specs/npu.yaml: ok (npu: ")
    assert result.stderr == ""


def test_validate_bad_spec_prints_located_error_on_stderr(bad_spec):
    path, line, col = bad_spec
    result = invoke("validate", str(path))
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == error_line(path, line, col)
    assert lines[-1] == f"{path}: 1 error(s)"
    no_traceback(result)


def test_validate_checks_every_spec_even_after_a_failure(bad_spec):
    path, line, col = bad_spec
    result = invoke("validate", str(path), str(NPU))
    assert result.exit_code == 1
    assert error_line(path, line, col) in result.stderr.splitlines()
    assert result.stdout.startswith(f"{NPU}: ok (npu: ")


def test_validate_missing_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    result = invoke("validate", str(missing))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"{missing}:1:1: ")
    assert "cannot read spec" in result.stderr
    no_traceback(result)


def test_validate_needs_a_spec():
    result = invoke("validate")
    assert result.exit_code == 2
    assert "Missing argument" in result.stderr


def test_validate_a_folder_is_a_usage_error():
    result = invoke("validate", "specs")
    assert result.exit_code == 2
    assert "is a directory" in result.stderr


def test_unknown_subcommand():
    result = invoke("frobnicate")
    assert result.exit_code == 2
    assert "No such command 'frobnicate'" in result.stderr
    assert result.stdout == ""


def test_unknown_option():
    result = invoke("generate", "--frob", "specs/npu.yaml")
    assert result.exit_code == 2
    assert "No such option" in result.stderr


def test_generate_missing_spec(tmp_path):
    result = invoke("generate", str(tmp_path / "nope.yaml"), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert "cannot read spec" in result.stderr
    assert not (tmp_path / "out").exists()
    no_traceback(result)


def test_generate_bad_spec_writes_nothing(tmp_path, bad_spec):
    path, line, col = bad_spec
    result = invoke("generate", str(path), "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == error_line(path, line, col)
    assert not (tmp_path / "out").exists()


def test_generate_into_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    result = invoke("generate", str(NPU), "-o", str(target))
    assert result.exit_code == 2       # click: --output must be a folder
    assert target.read_text() == "x"


def test_check_without_specs(tmp_path):
    result = invoke("check", "--specs-dir", str(tmp_path), "--generated-dir", str(tmp_path))
    assert result.exit_code == 1
    assert "no specs in" in result.stderr


def test_docs_writes_and_is_idempotent(tmp_path):
    out = tmp_path / "spec.md"
    first = invoke("docs", "-o", str(out))
    assert first.exit_code == 0, first.output
    assert first.stdout == f"wrote {out}\n"
    assert out.read_text(encoding="utf-8") == (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    second = invoke("docs", "-o", str(out))
    assert second.stdout == f"up to date: {out}\n"


# --- the installed executable -----------------------------------------------------------------

def test_executable_version_and_usage_errors():
    version = run_exe("--version")
    assert version.returncode == 0
    assert version.stdout == f"torchfl-gen, version {torchfl_gen.__version__}\n"
    unknown = run_exe("frobnicate")
    assert unknown.returncode == 2
    assert "No such command" in unknown.stderr
    assert unknown.stdout == ""


def test_executable_validate_exit_codes(bad_spec):
    # One process (loading torch's operator table costs seconds): the bad spec fails with
    # its located error on stderr, the good one after it is still validated, exit 1.
    path, line, col = bad_spec
    proc = run_exe("validate", str(path), "specs/npu.yaml")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [error_line(path, line, col), f"{path}: 1 error(s)"]
    assert proc.stdout.startswith("specs/npu.yaml: ok (npu: ")
    assert len(proc.stdout.splitlines()) == 1


def test_python_dash_m():
    proc = subprocess.run([sys.executable, "-m", "torchfl_gen", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"torchfl-gen, version {torchfl_gen.__version__}\n"


# --- the import name ----------------------------------------------------------------------------

def test_import_name_is_torchfl_gen():
    # generator/ is installed as the package `torchfl_gen` (setuptools package-dir mapping).
    assert Path(torchfl_gen.__file__).resolve() == ROOT / "generator" / "__init__.py"
    assert cli.__name__ == "torchfl_gen.cli"
    assert isinstance(cli.main, click.Group)
    scripts = importlib.metadata.entry_points(group="console_scripts", name="torchfl-gen")
    assert [ep.value for ep in scripts] == ["torchfl_gen.cli:main"]
    assert next(iter(scripts)).load() is cli.main


def test_only_torchfl_gen_is_importable_outside_the_repo(tmp_path):
    code = ("import importlib.util, torchfl_gen.cli, torchfl_gen.render, torchfl_gen.spec;"
            "from importlib import resources;"
            "assert resources.files('torchfl_gen').joinpath('templates', 'privateuse1').is_dir();"
            "print(importlib.util.find_spec('generator'))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"
