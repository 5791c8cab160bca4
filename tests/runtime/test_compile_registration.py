"""torch_fl.compile: a registered chip is told to Dynamo and Inductor when torch imports them,
never at `import torch` (importing Dynamo costs most of a second), and at once where they were
imported before the chip registered. What torch.compile then does on the chip is each chip
suite's test_compile.py."""
from __future__ import annotations

import textwrap

from e2e_helpers import last_json_line, run_python

PROBE = """
    import json, sys, torch
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import get_device_op_overrides, get_scheduling_for_device
    interface = get_interface_for_device("npu")
    torch.ones(1, device="npu")
    print(json.dumps({"dynamo_at_import": DYNAMO_AT_IMPORT, "interface": interface.__name__,
                      "devices": interface.device_count(), "capability": interface.get_compute_capability(),
                      "float32": interface.is_dtype_supported(torch.float32),
                      "stream": interface.get_raw_stream(0) == torch.npu.current_stream(0).native_handle,
                      "sync": get_device_op_overrides("npu").synchronize(),
                      "scheduling": get_scheduling_for_device("npu").__name__}))
"""


def check(data: dict) -> None:
    assert data["interface"] == "NpuInterface" and data["devices"] >= 1
    assert data["capability"] == 10          # the spec's chip.capability "1.0", CUDA's encoding
    assert data["float32"] and data["stream"]
    assert data["sync"] == "torch.npu.synchronize()"
    assert data["scheduling"] == "NpuInductorCodegen"


def test_registered_when_torch_imports_dynamo_not_before():
    proc = run_python(textwrap.dedent("""
        import sys, torch
        DYNAMO_AT_IMPORT = "torch._dynamo" in sys.modules
    """) + textwrap.dedent(PROBE), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = last_json_line(proc.stdout)
    assert data["dynamo_at_import"] is False
    check(data)


def test_registered_at_once_where_dynamo_was_imported_first():
    proc = run_python(textwrap.dedent("""
        import torch, torch._dynamo, torch._inductor.codegen.common
        DYNAMO_AT_IMPORT = True
        import torch_fl_npu
        torch_fl_npu._register()
    """) + textwrap.dedent(PROBE), env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check(last_json_line(proc.stdout))
