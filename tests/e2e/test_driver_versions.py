"""Driver-version overlays (`driver.versions`): validation, the model of each build, `generate
--driver-version`, `check` over every declared version, `diff`, and a real build for driver 2.0
that refuses the 2.1 driver and runs on a 2.0 one."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from e2e_helpers import ROOT, run_python, torchfl_gen
from spec_helpers import NPU, NPU_TEXT, edit, errors_of, line_of, write
from torchfl_gen.cli import main as cli_main
from torchfl_gen.errors import SpecErrors
from torchfl_gen.spec import load_spec

F = "specs/npu.yaml"
OVERLAY_OPS = '''    "2.0":
      ops:
'''


def invoke(*args):
    return CliRunner().invoke(cli_main, list(args))


# --- the model of each build ------------------------------------------------------------------

def test_each_declared_version_is_a_build_of_its_own():
    base = load_spec(NPU, display=F)
    old = load_spec(NPU, display=F, driver_version="2.0")
    assert base.driver.versions == old.driver.versions == ("2.1", "2.0")
    assert (base.driver.version, old.driver.version) == ("2.1", "2.0")
    assert old.driver.version_code == 2000
    names = {op.name for op in old.ops}
    assert "cat" in {op.name for op in base.ops} and "cat" not in names  # removed: takes fallback.default
    mean = next(op for op in old.ops if op.name == "mean.dim")
    assert mean.kernel is None and mean.fallback == ("triton", "cpu")
    assert mean.line == line_of(NPU_TEXT, "        mean.dim: {fallback: [triton, cpu]}")  # errors point at the overlay
    assert "complex64" in base.dtypes and "complex64" not in old.dtypes


def test_an_undeclared_version_is_a_located_error():
    with pytest.raises(SpecErrors) as ei:
        load_spec(NPU, display=F, driver_version="3.0")
    line = line_of(NPU_TEXT, '  version: "2.1"')
    assert str(ei.value) == (f"{F}:{line}:12: driver.version: driver version "
                             "'3.0' is not declared (this spec builds: 2.1, 2.0); add it under driver.versions")


# --- validation of overlays --------------------------------------------------------------------

@pytest.mark.parametrize("old, new, expected", [
    ("        cat: null\n", "        catt: null\n",
     "driver.versions.\"2.0\".ops: unknown aten op 'catt' (did you mean 'cat'?)"),
    ("        cat: null\n", "        cat: null\n        histc: null\n",
     "driver.versions.\"2.0\".ops.histc: 'histc' is removed for driver 2.0 but `ops` does not name it"),
    ('    "2.0":\n', '    "2.1":\n', "driver.versions.\"2.1\": '2.1' is driver.version itself"),
    ("float16, bfloat16, float32, float64]", "float16, float32, float64]",
     "driver.versions.\"2.0\".dtypes: amp dtype 'bfloat16' is not among driver 2.0's dtypes"),
    ('    "2.0":\n', '    "2.x":\n', "driver.versions: invalid key '2.x': must be a \"MAJOR.MINOR\" version"),
    ("        mean.dim: {fallback: [triton, cpu]}", "        mean.dim: {fallback: [gpu]}",
     "driver.versions.\"2.0\".ops.\"mean.dim\".fallback[0]: invalid value 'gpu' (did you mean 'cpu'?"),
    ("        cat: null\n", "        cat: 3\n", "driver.versions.\"2.0\".ops.cat: expected a mapping, got an integer (3)"),
])
def test_overlay_errors_are_located(tmp_path, old, new, expected):
    text = edit((old, new))
    errors = errors_of(tmp_path, text)
    assert any(expected in e for e in errors), errors
    needle = new.rstrip("\n").splitlines()[-1]
    assert any(e.startswith(f"{F}:{line_of(text, needle)}:") for e in errors), errors


# --- generate, check, diff ----------------------------------------------------------------------

def test_generate_for_a_driver_version_and_check_every_version(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write(tmp_path, NPU_TEXT.replace("../generator/schema", str(ROOT / "generator" / "schema")))
    for version in ("2.1", "2.0"):
        result = invoke("generate", str(spec), "--driver-version", version)
        assert result.exit_code == 0, result.output
    text = (tmp_path / "generated" / "npu-driver2.0" / "torch_fl_npu" / "spec.py").read_text()
    dtypes_line = next(line for line in text.splitlines() if line.startswith("DTYPES = "))
    assert "PACKAGE_VERSION = '0.1.0+driver2.0'" in text and "'complex64'" not in dtypes_line
    assert "--driver-version 2.0`" in text.splitlines()[1]  # the header says how to rebuild it
    result = invoke("check", "--specs-dir", str(tmp_path / "specs"), "--generated-dir", str(tmp_path / "generated"))
    assert result.exit_code == 0, result.output
    assert "up to date for 1 spec(s) (2 driver versions)" in result.output
    # A stale file of the 2.0 build is found; so is the package of a version the spec dropped.
    (tmp_path / "generated" / "npu-driver2.0" / "csrc" / "ops.cpp").write_text("// edited\n")
    (tmp_path / "generated" / "npu-driver1.9").mkdir()
    (tmp_path / "generated" / "npu-driver1.9" / ".torchfl-generated").write_text("old\n")
    result = invoke("check", "--specs-dir", str(tmp_path / "specs"), "--generated-dir", str(tmp_path / "generated"))
    assert result.exit_code == 4
    assert "npu-driver2.0/csrc/ops.cpp" in result.output
    assert "npu-driver1.9 (no spec in" in result.output


def test_diff_lists_ops_gained_lost_rerouted_and_dtypes():
    result = invoke("diff", str(NPU), "--from", "2.0", "--to", "2.1", "--json")
    assert result.exit_code == 0, result.output
    changes = json.loads(result.output)
    assert changes["ops_gained"] == {
        "cat": {"from": "fallback.default [triton, cpu]", "to": "vendor kernel cat"},
        "random_.to": {"from": "fallback.default [triton, cpu]", "to": "vendor kernel random_to"}}
    assert changes["ops_rerouted"] == {"mean.dim": {"from": "chain [triton, cpu]", "to": "vendor kernel mean"}}
    assert changes["ops_lost"] == {} and changes["dtypes_gained"] == ["complex64", "complex128"]
    back = json.loads(invoke("diff", str(NPU), "--from", "2.1", "--to", "2.0", "--json").output)
    assert set(back["ops_lost"]) == {"cat", "random_.to"} and back["dtypes_lost"] == ["complex64", "complex128"]
    text = invoke("diff", str(NPU), "--from", "2.0", "--to", "2.1").output
    assert text.splitlines()[0] == f"npu: driver 2.0 -> 2.1 ({NPU})"
    assert "  cat: fallback.default [triton, cpu] -> vendor kernel cat" in text


# --- a real build for driver 2.0 ---------------------------------------------------------------

@pytest.fixture(scope="module")
def driver_2_0_backend(tmp_path_factory, npu_backend):
    """specs/npu.yaml built for driver 2.0, installed into a private folder."""
    root = tmp_path_factory.mktemp("driver2.0")
    result = torchfl_gen("build", "specs/npu.yaml", "--driver-version", "2.0", "--output", str(root / "pkg"),
                         "--no-install")
    assert result.returncode == 0, result.stderr
    wheel = result.stdout.strip().splitlines()[-1]
    assert "0.1.0+driver2.0" in wheel
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(root / "site"),
                          wheel], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    return root


def run_2_0(root, code: str, driver: str):
    return run_python(f"""
        import torch, torch_fl_npu
        torch_fl_npu._register()
        {code}
    """, env={"PYTHONPATH": str(root / "site"), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
              "SIMNPU_DRIVER_VERSION_OVERRIDE": driver})


def test_the_2_0_build_refuses_the_2_1_driver(driver_2_0_backend):
    proc = run_2_0(driver_2_0_backend, 'torch.ones(1, device="npu")', driver="2.1")
    assert proc.returncode != 0
    error = proc.stderr.strip().splitlines()[-1]
    assert "reports version 2.1" in error and "built for driver 2.0" in error
    assert "torch-fl-npu==0.1.0+driver2.1" in error


def test_the_2_0_build_runs_on_a_2_0_driver_with_its_overlay(driver_2_0_backend):
    proc = run_2_0(driver_2_0_backend, """
        import json, torch_fl
        x = torch.arange(6.0, device="npu")
        y = torch.cat([x, x]).sum().item()
        paths = torch_fl.fallback_stats().get("cat", {})
        try:
            torch.zeros(2, dtype=torch.complex64, device="npu")
            refused = None
        except NotImplementedError as e:
            refused = str(e)
        print(json.dumps({"sum": y, "cat": paths, "refused": refused, "version": torch_fl_npu.spec.PACKAGE_VERSION}))
    """, driver="2.0")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["sum"] == 30.0 and r["version"] == "0.1.0+driver2.0"
    assert "vendor" not in r["cat"] and r["cat"]  # no vendor kernel for cat in 2.0: its chain ran
    assert r["refused"] is not None and "complex64" in r["refused"] and "npu" in r["refused"]
