"""torch_fl.coverage and `torchfl-gen coverage`: a workload's aten ops and their path on the npu.

Uses the installed npu backend (torchfl-gen build specs/npu.yaml); each check runs in its own
interpreter, like the other end-to-end tests.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from e2e_helpers import ROOT, last_json_line, run_python

TINY = """
import torch
model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(8, 3)).to("npu")
x = torch.randn(2, 1, 4, 4, device="npu")
"""


def test_trace_model_and_trace():
    proc = run_python(TINY + """
import json, torch_fl.coverage as cov
step = cov.trace_model(model, x)
cum = cov.trace(torch.histc, x, 4)
print(json.dumps({"step": step.as_dict(), "cum": cum.as_dict(), "table": step.table()}))
""", timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = last_json_line(proc.stdout)
    step = {row["op"]: row for row in data["step"]["ops"]}
    for op in ("convolution", "convolution_backward", "addmm", "relu", "threshold_backward"):
        assert step[op]["path"] == "vendor", step[op]
        assert step[op]["calls"] >= 1
    assert step["convolution"]["backend"] == {"convolution": {"vendor": 1}}
    assert data["step"]["chip"] == "npu"
    cum = {row["op"]: row for row in data["cum"]["ops"]}
    assert cum["histc"]["path"] == "cpu" and "cpu" in cum["histc"]["backend"]["histc"]
    order = [row["path"] for row in data["step"]["ops"]]
    rank = {"cpu": 0, "triton": 1, "vendor": 2, "composite": 3}
    assert order == sorted(order, key=rank.__getitem__)  # CPU fallbacks first


def coverage_cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchfl_gen", "coverage", "specs/npu.yaml", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_on_a_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TINY) + textwrap.dedent("""
        import sys
        steps = int(sys.argv[sys.argv.index("--steps") + 1])
        for _ in range(steps):
            model(x).sum().backward()
            torch.histc(x, 4)
        print("trained", steps)
    """), encoding="utf-8")
    table = coverage_cli("--script", str(script), "--", "--steps", "2")
    assert table.returncode == 0, table.stderr
    assert "trained 2" in table.stdout
    lines = [line.split() for line in table.stdout.splitlines()]
    rows = {cols[0]: cols for cols in lines if cols and cols[0] in ("histc", "convolution", "addmm")}
    assert rows["histc"][1:4] == ["2", "cpu", "cpu"]       # op, calls, path, declared
    assert rows["convolution"][1:4] == ["2", "vendor", "vendor"]
    assert rows["addmm"][2] == "vendor"
    header = next(i for i, cols in enumerate(lines) if cols[:2] == ["aten", "op"])
    first = lines[header + 2]
    assert first[0] == "histc"  # sorted CPU first

    as_json = coverage_cli("--script", str(script), "--json", "--", "--steps", "1")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout[as_json.stdout.index("{"):])
    ops = {row["op"]: row for row in data["ops"]}
    assert ops["convolution"]["path"] == "vendor" and ops["convolution"]["declared"] == "vendor"
    assert ops["histc"]["path"] == "cpu" and data["summary"]["cpu"] >= 1


def test_cli_failing_script(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("import torch\ntorch.ones(2, device='npu').relu()\nraise ValueError('nope')\n", encoding="utf-8")
    proc = coverage_cli("--script", str(script))
    assert proc.returncode == 6
    assert "ValueError: nope" in proc.stderr
    assert "relu" in proc.stdout  # what ran before the failure is still reported


def test_cli_reports_the_graph_breaks_of_what_a_script_compiles(tmp_path):
    # Two breaks: the chip's memory statistics (its C++ module: the chip's doing) and a print
    # (the script's). Stream and device queries, generic or the chip's, do not break.
    script = tmp_path / "compiled.py"
    script.write_text(textwrap.dedent("""
        import torch

        def step(x):
            y = x * 2
            torch.accelerator.current_stream()
            torch.npu.current_stream(torch.npu.current_device())
            torch.npu.memory_allocated()
            print("inside")
            return y.sum()

        out = torch.compile(step, backend="aot_eager")(torch.ones(4, device="npu"))
        print("result", out.item())
    """), encoding="utf-8")
    table = coverage_cli("--compile", "--script", str(script))
    assert table.returncode == 0, table.stderr
    assert "result 8.0" in table.stdout
    as_json = coverage_cli("--compile", "--json", "--script", str(script))
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout[as_json.stdout.index("{"):])
    assert data["chip"] == "npu" and data["graphs"] >= 1
    chip = [b for b in data["breaks"] if b["chip"]]
    other = [b for b in data["breaks"] if not b["chip"]]
    assert len(chip) == 1 and "torch_fl_npu" in chip[0]["reason"] and data["chip_graph_breaks"] == chip[0]["count"]
    assert any("print" in b["reason"] for b in other)
    assert data["graph_breaks"] == sum(b["count"] for b in data["breaks"])
    lines = table.stdout.splitlines()
    assert any(line.split()[1:2] == ["chip"] and "torch_fl_npu" in line for line in lines if line.strip())
    assert f"{data['chip_graph_breaks']} caused by the chip" in table.stdout
