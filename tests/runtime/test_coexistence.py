"""torch_fl.coexistence: a generated chip beside a native accelerator does no harm.

The CPU machine has no native accelerator, so the policy's "beside CUDA" branch is driven by
replacing `native_accelerators` in a process whose autoload is off, then running the chip's own
entry point (`torch_fl_npu._autoload`, what `import torch` calls) and the public calls after it.
TORCH_FL_CHIPS and the registration on request run for real. On a GPU machine the same policy
keeps `cuda` training intact (scripts/nvgpu_device_run.sh, stage `coexist`).
"""
from __future__ import annotations

import pytest
import torch

from e2e_helpers import last_json_line, run_python

pytestmark = pytest.mark.usefixtures("npu_backend")

BESIDE_CUDA = """
    import json, warnings, torch, torch_fl, torch_fl_npu
    from torch_fl import coexistence
    coexistence.native_accelerators = lambda: ("cuda",)   # what a CUDA machine reports
    torch_fl_npu._autoload()                                # the entry point `import torch` runs
    out = {"after_import": hasattr(torch, "npu"), "load_error": torch_fl_npu.load_error()}
    info = torch_fl.init()["npu"]
    out["init"] = [info.available, info.error, hasattr(torch, "npu")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch_fl.set_default_device("npu")                  # asking for the chip registers it
    out["asked"] = [str(torch.ones(2).device), torch.accelerator.current_accelerator().type]
    out["warning"] = [str(w.message) for w in caught if "registered beside" in str(w.message)]
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()                                # the chip's own backward is untouched
    out["grad"] = x.grad.cpu().tolist()
    print(json.dumps(out))
"""


def test_beside_a_native_accelerator_the_chip_waits_to_be_asked():
    proc = run_python(BESIDE_CUDA, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["after_import"] is False
    assert out["load_error"].startswith("not registered: torch drives cuda in this process")
    assert "torch_fl.init(chips=['npu'])" in out["load_error"] and "TORCH_FL_CHIPS=npu" in out["load_error"]
    available, error, registered = out["init"]
    assert not available and not registered and "torch drives cuda" in error
    assert out["asked"] == ["npu:0", "npu"]
    assert len(out["warning"]) == 1 and "backward over cuda tensors is refused" in out["warning"][0]
    assert out["grad"] == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("value,registered", [("npu", True), ("all", True), ("none", False), ("edge", False)])
def test_torch_fl_chips_decides_at_import(value, registered):
    proc = run_python("import torch; print(hasattr(torch, 'npu'))", env={"TORCH_FL_CHIPS": value})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(registered)


def test_a_chip_left_out_says_why_and_registers_when_named():
    code = """
        import json, torch, torch_fl
        left = torch_fl.init()["npu"]
        named = torch_fl.init(chips=["npu"])["npu"]
        print(json.dumps({"x": [left.available, left.error, named.available, torch.ones(2, device="npu").sum().item()]}))
    """
    proc = run_python(code, env={"TORCH_FL_CHIPS": "none"})
    assert proc.returncode == 0, proc.stderr
    assert last_json_line(proc.stdout)["x"] == [False, "not registered: TORCH_FL_CHIPS=none does not name it",
                                                True, 2.0]


def test_a_malformed_torch_fl_chips_keeps_torch_importable():
    proc = run_python("import torch; print(hasattr(torch, 'npu'))", env={"TORCH_FL_CHIPS": "none,npu"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
    assert "'none' cannot be combined with chip names" in proc.stderr


def test_backward_over_a_native_devices_tensors_is_refused_before_the_engine():
    """The guard wired as for CUDA, on `meta` (the one non-CPU device type a CPU torch has):
    Tensor.backward and autograd.grad both refuse, naming the cause; other devices run."""
    from torch_fl import coexistence

    assert coexistence.install_backward_guard("npu", ("meta",))
    try:
        x = torch.ones(3, device="meta", requires_grad=True)
        with pytest.raises(coexistence.NativeBackwardError, match="pytorch/pytorch/issues/161129"):
            (x * 2).sum().backward()
        with pytest.raises(coexistence.NativeBackwardError, match="backward over meta tensors"):
            torch.autograd.grad((x * 2).sum(), x)
        y = torch.ones(3, requires_grad=True)
        (y * 3).sum().backward()
        assert y.grad.tolist() == [3.0, 3.0, 3.0]
    finally:
        coexistence.remove_backward_guard()
    (torch.ones(3, device="meta", requires_grad=True) * 2).sum().backward()  # removed: the engine runs it


def test_a_native_device_inside_the_graph_is_refused_too():
    """A backward that starts on the chip can still reach the native device through a copy (a
    native leaf moved to the chip): the engine would assert on that leaf's node, so the guard
    walks the graph. Driven with `cpu` in the native role, beside the real npu chip."""
    from torch_fl import coexistence

    assert coexistence.install_backward_guard("npu", ("cpu",))
    try:
        w = torch.ones(4, 2, requires_grad=True)
        loss = (torch.ones(3, 4, device="npu") @ (w.to("npu") * 2)).sum()
        with pytest.raises(coexistence.NativeBackwardError, match="backward over cpu tensors"):
            loss.backward()
        with pytest.raises(coexistence.NativeBackwardError, match="copy the cpu leaves to the chip"):
            torch.autograd.grad((w.to("npu") * 3).sum(), w)
        chip_leaf = torch.ones(4, 2, device="npu", requires_grad=True)
        (chip_leaf * 5).sum().backward()                  # the graph stays on the chip: it runs
        assert chip_leaf.grad.cpu().tolist() == [[5.0, 5.0]] * 4
    finally:
        coexistence.remove_backward_guard()
    loss.backward()
    assert w.grad.tolist() == [[6.0, 6.0]] * 4


def test_doctor_reports_the_chip_beside_a_native_accelerator(monkeypatch):
    from torch_fl import coexistence, doctor

    monkeypatch.setattr(coexistence, "native_accelerators", lambda: ("cuda",))
    for holder, status, words in (("npu", "warn", "backward over cuda tensors is refused"),
                                  ("privateuseone", "info", "leaves the chip(s) unregistered")):
        monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda holder=holder: holder)
        found = doctor._coexistence_findings(["npu"])
        assert [(f.check, f.status) for f in found] == [("coexistence", status)] and words in found[0].message
    monkeypatch.setattr(coexistence, "native_accelerators", lambda: ())
    assert doctor._coexistence_findings(["npu"]) == []


def test_the_chips_graph_walk_agrees_with_the_python_walk():
    """The guard's walk in the chip's C++ (`_C._autograd_graph_reaches`, a millisecond less per
    step of a small LLM) finds what the Python walk finds: a native leaf deep in the graph, a
    native root, and nothing in a graph on the chip alone."""
    import torch_fl_npu
    from torch_fl import coexistence

    walk = torch_fl_npu._C._autograd_graph_reaches
    w = torch.ones(4, 2, requires_grad=True)
    h = torch.ones(3, 4, device="npu")
    for _ in range(20):  # a deep graph: the cpu leaf lies 60 nodes down
        h = torch.tanh(h @ torch.ones(4, 4, device="npu")) * 0.5
    deep = (h @ (w.to("npu") * 2)).sum()
    chip_only = (torch.ones(4, device="npu", requires_grad=True) * 3).sum()
    cases = {"deep": ([deep], ("cpu",), "cpu"), "root": ([w * 2], ("cpu",), "cpu"),
             "chip only": ([chip_only], ("cpu",), None), "other type": ([deep], ("meta",), None)}
    for name, (roots, native, expected) in cases.items():
        assert walk(roots, list(native)) == expected, name
        assert coexistence._native_device_in_graph(roots, native) == expected, name
        assert coexistence._native_device_in_graph(roots, native, walk) == expected, name
