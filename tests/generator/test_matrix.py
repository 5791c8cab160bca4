"""`torchfl-gen matrix`: the OpInfo sweep's results joined with the spec (docs/ops/<chip>.*)."""
from __future__ import annotations

import json
import random

import pytest

from spec_helpers import NPU, ROOT
from test_cli import invoke
from torchfl_gen.matrix import build_matrix, declared_path, load_results, render_html, render_json, render_md
from torchfl_gen.spec import load_spec

RECORDED = "2026-01-02T03:04:05+00:00"


def rec(op, dtype, outcome, paths=None, variant="", message=""):
    return {"chip": "npu", "recorded": RECORDED, "torch": "2.13.0+cpu", "op": op, "variant": variant,
            "dtype": dtype, "outcome": outcome, "message": message, "paths": paths or {}, "samples": 1}


RECORDS = [
    rec("add", "float32", "pass", {"add.Tensor": {"vendor": 3}, "copy_": {"vendor": 1}}),
    rec("add", "int64", "pass", {"add.Tensor": {"vendor": 2}}),
    rec("cumsum", "float32", "pass", {"cumsum.out": {"cpu": 4}}),
    rec("cumsum", "int64", "pass", {"cumsum.out": {"cpu": 4}}),
    rec("div", "float32", "pass", {"div.Tensor": {"vendor": 1}}, variant="floor_rounding"),
    rec("div", "int64", "fail", {"div.Tensor_mode": {"cpu": 1}}, variant="floor_rounding",
        message="AssertionError: sample 0 forward: Tensor-likes are not equal | x"),
    rec("bernoulli", "float32", "not_comparable", {"bernoulli_.float": {"cpu": 1}}),
    rec("mm", "float32", "error", {}, message="NotImplementedError: boom"),
]
KEYS = ["add", "bernoulli", "cumsum", "div.floor_rounding", "mm", "never_run"]


@pytest.fixture(scope="module")
def spec():
    return load_spec(str(NPU), display="specs/npu.yaml")


@pytest.fixture
def results(tmp_path):
    path = tmp_path / "opinfo-npu.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    return path


def matrix_of(spec, records, keys=KEYS):
    return build_matrix(spec, records, "results/opinfo-npu.jsonl", opinfo_keys=keys)


def test_headline_figures(spec, results):
    m = matrix_of(spec, load_results(results))
    assert m.headline() == {"opinfos": 6, "tested": 5, "basic": 2, "strict": 1, "not_comparable": 1,
                            "failing": 2, "untested": 1}
    status = {row.key: row.status for row in m.rows}
    assert status == {"add": "strict", "cumsum": "basic", "div.floor_rounding": "fail", "bernoulli": "not_comparable",
                      "mm": "fail", "never_run": "untested"}


def test_declared_paths_come_from_the_spec(spec):
    assert declared_path(spec, "add.Tensor") == "vendor"
    assert declared_path(spec, "cumsum.out") == "triton"  # the default chain's first step with a kernel
    assert declared_path(spec, "histc") == ("cpu" if "cpu" in spec.fallback.default else "error")  # no Triton kernel
    m = matrix_of(spec, RECORDS)
    mm = next(r for r in m.rows if r.key == "mm")
    assert mm.declared == {"mm": "vendor"}  # a vendor op checked by this OpInfo, even when unseen


def test_markdown(spec):
    md = render_md(matrix_of(spec, RECORDS))
    assert "`results/opinfo-npu.jsonl`" in md and f"recorded {RECORDED}" in md
    assert "**basic**: 2" in md and "**strict**: 1" in md
    assert "Reproduce: `TORCH_FL_OPINFO=full TORCH_FL_OPINFO_DTYPES=float32,int64 python -m pytest " \
           "generated/npu/tests/test_opinfo.py -q -p no:randomly && python -m torchfl_gen matrix specs/npu.yaml`" in md
    add = next(line for line in md.splitlines() if line.startswith("| `add`"))
    assert add == "| `add` | strict | float32, int64 | - | vendor: add.Tensor, copy_ | vendor: add.Tensor, copy_ |"
    assert "| `div.floor_rounding` | fail | float32 | int64 | cpu: div.Tensor_mode; vendor: div.Tensor |" in md
    assert "not comparable" in md
    assert "\\| x" in md  # table cells are escaped
    assert "## Failures" in md and "NotImplementedError: boom" in md


def test_html_is_self_contained_and_colour_coded(spec):
    page = render_html(matrix_of(spec, RECORDS))
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "<link" not in page
    assert '<td class="strict">strict</td>' in page and '<td class="fail">fail</td>' in page
    assert '<span class="p-cpu">cpu</span>' in page
    assert 'title="NotImplementedError: boom"' in page


def test_json(spec):
    data = json.loads(render_json(matrix_of(spec, RECORDS)))
    assert data["headline"]["basic"] == 2 and data["headline"]["strict"] == 1
    assert data["recorded"] == RECORDED and data["results"] == "results/opinfo-npu.jsonl"
    assert data["ops"]["cumsum"]["dtypes"]["int64"]["paths"] == {"cumsum.out": {"cpu": 4}}
    assert data["ops"]["div.floor_rounding"]["dtypes"]["int64"]["outcome"] == "fail"
    assert data["ops"]["never_run"] == {"status": "untested", "dtypes": {}, "paths": {}, "declared": {}}


def test_output_is_deterministic(spec):
    shuffled = RECORDS[:]
    random.Random(7).shuffle(shuffled)
    a, b = matrix_of(spec, RECORDS), matrix_of(spec, shuffled, list(reversed(KEYS)))
    assert render_md(a) == render_md(b) and render_html(a) == render_html(b) and render_json(a) == render_json(b)


def test_cli_writes_the_three_files(results, tmp_path):
    out = tmp_path / "ops"
    result = invoke("matrix", "specs/npu.yaml", "--results", str(results), "--out-dir", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["npu.html", "npu.json", "npu.md"]
    assert "basic 2, strict 1" in result.output
    first = {p.name: p.read_text() for p in out.iterdir()}
    again = invoke("matrix", "specs/npu.yaml", "--results", str(results), "--out-dir", str(out))
    assert again.exit_code == 0 and {p.name: p.read_text() for p in out.iterdir()} == first
    headline = json.loads(first["npu.json"])["headline"]
    assert headline["opinfos"] > 500  # every op_db entry counts, tested or not
    assert headline["untested"] == headline["opinfos"] - 5


def test_cli_exit_codes(tmp_path):
    missing = invoke("matrix", "specs/npu.yaml", "--results", str(tmp_path / "none.jsonl"), "--out-dir", str(tmp_path))
    assert missing.exit_code == 5 and "no such results file" in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op": "add"}\n', encoding="utf-8")
    broken = invoke("matrix", "specs/npu.yaml", "--results", str(bad), "--out-dir", str(tmp_path))
    assert broken.exit_code == 5 and "bad.jsonl:1" in broken.stderr
    nospec = invoke("matrix", str(tmp_path / "nope.yaml"), "--results", str(bad))
    assert nospec.exit_code == 1
    assert invoke("matrix").exit_code == 2


def test_results_passed_by_the_float64_accuracy_rule_are_listed(spec):
    records = [dict(rec("addbmm", "float32", "pass", {"addbmm": {"triton": 1}}),
                    accuracy_rule=["sample 0 forward"]),
               rec("add", "float32", "pass", {"add.Tensor": {"vendor": 1}})]
    m = matrix_of(spec, records, keys=["add", "addbmm"])
    text = render_md(m)
    assert "## Passed by the float64 accuracy rule" in text
    assert "| `addbmm` | float32 | sample 0 forward |" in text
    assert "`add` | float32" not in text.split("## Passed by the float64 accuracy rule")[1]
    data = json.loads(render_json(m))
    assert data["ops"]["addbmm"]["dtypes"]["float32"]["accuracy_rule"] == ["sample 0 forward"]
    assert data["ops"]["add"]["dtypes"]["float32"]["accuracy_rule"] == []


def test_backward_left_uncompared_over_ties_is_listed(spec):
    records = [dict(rec("mode", "float16", "pass", {"mode": {"triton": 1}}),
                    ties_backward_not_compared=["sample 6"])]
    text = render_md(matrix_of(spec, records, keys=["mode"]))
    assert "## Backward not compared: other elements among ties" in text
    assert "| `mode` | float16 | sample 6 |" in text
