"""The driver x torch compatibility matrix (torchfl-gen compat): records from builds and from
generated suites, merged into docs/compat/records.jsonl and rendered into docs/compat.md."""
from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from e2e_helpers import ROOT
from spec_helpers import NPU
from torchfl_gen import compat
from torchfl_gen.torch_support import TORCH_REQUIREMENT
from torchfl_gen.cli import main as cli_main


def invoke(*args):
    return CliRunner().invoke(cli_main, list(args))


def record(**fields):
    base = {"kind": "build", "chip": "npu", "driver": "2.1", "torch": "2.13.0+cpu", "machine": "x86_64 CPU host",
            "date": "2026-12-01T00:00:00+00:00"}
    return {**base, **fields}


def write_records(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_matrix_cells_come_from_the_records(tmp_path):
    added = write_records(tmp_path / "new.jsonl", [
        record(kind="suite", passed=600, failed=0, errors=0),
        record(driver="2.0", date="2026-12-02T00:00:00+00:00"),
        record(driver="2.0", torch="2.11.0+cu130", machine="NVIDIA H200", kind="suite", passed=40, failed=2),
        record(chip="npuvariant"),  # a test variant, not a spec: left out
    ])
    records, out = tmp_path / "records.jsonl", tmp_path / "compat.md"
    result = invoke("compat", str(NPU), "--records", str(records), "--add", str(added), "--out", str(out))
    assert result.exit_code == 0, result.output
    kept = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(kept) == 3 and all(r["chip"] == "npu" for r in kept)
    text = out.read_text()
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| 2.")}
    cells = rows["| 2.1"].split(" | ")
    assert cells[3] == "suite 600 passed (x86_64 CPU host, torch 2.13.0+cpu, 2026-12-01)"  # the torch 2.13 column
    assert cells[1] == cells[2] == "—" and cells[4].startswith("—")
    old = rows["| 2.0"].split(" | ")
    assert old[1] == "suite 40 passed, **2 failed** (NVIDIA H200, torch 2.11.0+cu130, 2026-12-01)"
    assert old[3].startswith("built (x86_64 CPU host, torch 2.13.0+cpu, 2026-12-02)")
    # The ops that differ between 2.1 and 2.0, from the spec.
    assert "| `cat` | vendor kernel cat | fallback.default |" in text
    assert "| `mean.dim` | vendor kernel mean | chain [triton, cpu] |" in text
    # Up to date now; stale once a record is added.
    assert invoke("compat", str(NPU), "--records", str(records), "--out", str(out), "--check").exit_code == 0
    more = write_records(tmp_path / "more.jsonl", [record(torch="2.14.0+cpu")])
    stale = invoke("compat", str(NPU), "--records", str(records), "--add", str(more), "--out", str(out), "--check")
    assert stale.exit_code == 4 and "is stale" in stale.output


def test_merge_keeps_the_latest_record_per_cell():
    merged = compat.merge([record(date="2026-12-01T00:00:00+00:00", torch="2.13.0+cpu"),
                           record(date="2026-12-02T00:00:00+00:00", torch="2.13.1+cpu")])
    assert [r["torch"] for r in merged] == ["2.13.1+cpu"]


def test_a_bad_record_is_located(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(record()) + "\n" + json.dumps({"kind": "build", "chip": "npu"}) + "\n")
    result = invoke("compat", str(NPU), "--records", str(tmp_path / "r.jsonl"), "--add", str(bad),
                    "--out", str(tmp_path / "c.md"))
    assert result.exit_code == 5
    assert f"{bad}:2: a compatibility record needs kind (build|suite), chip, driver, torch, machine and date" in result.output


def test_supported_torch_range_matches_the_package_requirement():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"{TORCH_REQUIREMENT}"' in text
    assert compat.SUPPORTED_TORCH == ("2.11", "2.12", "2.13", "2.14", "2.15")


def test_committed_matrix_is_current():
    result = subprocess.run([sys.executable, "-m", "torchfl_gen", "compat", "--check"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_generated_suite_records_its_run(npu_backend, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(ROOT / "generated" / "npu" / "tests" / "test_device.py") + "::test_device_type_and_count"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = (tmp_path / ".torchfl" / "suite-npu.jsonl").read_text().splitlines()
    r = json.loads(lines[-1])
    assert (r["kind"], r["chip"], r["driver"], r["passed"], r["failed"]) == ("suite", "npu", "2.1", 1, 0)
    assert r["torch"].startswith("2.") and r["machine"]
