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
    from torch._inductor.codegen.common import get_device_op_overrides, get_scheduling_for_device, init_backend_registration
    init_backend_registration()                   # what Inductor does before it asks
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
    assert data["capability"] == 80          # compile.inductor triton: the Triton target's (the interpreter's)
    assert data["float32"] and data["stream"]
    assert data["sync"] == "torch.npu.synchronize()"
    assert data["scheduling"] == "NpuTritonScheduling"


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


def test_a_triton_chip_gets_inductors_triton_code_generation():
    """compile.inductor: triton, registered for the simulated NPU (its kernels cannot compile on a
    CPU machine: the GPU suite runs them, stage `test` of scripts/nvgpu_device_run.sh): Inductor's
    Triton scheduling and Python wrapper, the chip among its GPU types and its one GPU type, and
    graph replay refused by name when Inductor schedules a graph for the chip."""
    proc = run_python(textwrap.dedent("""
        import json, torch, torch_fl
        from torch_fl import compile as chip_compile
        chip_compile.register("npu", torch.npu, ("float32",), "triton")
        from torch._inductor import config, utils
        from torch._inductor.codegen.common import (get_scheduling_for_device, get_wrapper_codegen_for_device,
                                                    init_backend_registration)
        from torch._inductor.codegen.triton import TritonScheduling
        from torch._dynamo.device_interface import get_interface_for_device
        init_backend_registration()
        scheduling = get_scheduling_for_device("npu")
        out = {"triton": issubclass(scheduling, TritonScheduling),
               "wrapper": get_wrapper_codegen_for_device("npu").__name__,
               "gpu_types": "npu" in utils.GPU_TYPES, "gpu_type": utils.get_gpu_type(),
               "capable": get_interface_for_device("npu").is_triton_capable(),
               "cpu_still": get_scheduling_for_device("cpu") is not None}
        scheduling(None)                              # Inductor's feature query: no graph, no check
        with config.patch({"triton.cudagraphs": True}):
            try:
                scheduling(object())
                out["replay"] = "not refused"
            except torch_fl.ChipCompileError as error:
                out["replay"] = str(error)
        print(json.dumps(out))
    """), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json_line(proc.stdout)
    assert out["triton"] and out["wrapper"] == "PythonWrapperCodegen" and out["capable"]
    assert out["gpu_types"] and out["gpu_type"] == "npu"
    assert out["cpu_still"] is True
    assert 'mode="reduce-overhead"' in out["replay"] and "chip 'npu'" in out["replay"]


def test_compile_inductor_is_checked():
    import pytest
    from torch_fl import compile as chip_compile

    with pytest.raises(ValueError, match="neither 'triton' nor 'none'"):
        chip_compile.register("npu", None, (), "cpp")


def test_inductor_writes_the_triton_chips_code_for_its_triton_target(tmp_path):
    """Inductor's code for a graph on the simulated NPU (compile.inductor: triton, its Triton step
    interpreted): the wrapper allocates the graph's buffers on the chip and launches on the
    chip's stream; each kernel is described by the interpreter's nominal target (an sm_80 GPU,
    torch_fl._triton_interpreter.TARGET), and runs in Triton's interpreter: the model's output
    is eager's. On the GPU the same code is compiled (the nvgpu suite's test_compile.py)."""
    proc = run_python(textwrap.dedent("""
        import json, torch, torch_fl
        from torch._inductor.codecache import PyCodeCache
        loaded, load = [], PyCodeCache.load_by_key_path.__func__
        PyCodeCache.load_by_key_path = classmethod(lambda cls, key, path, *a, **k: (loaded.append(path), load(cls, key, path, *a, **k))[1])
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to("npu")
        x = torch.randn(8, 16, device="npu")
        error = (torch.compile(model)(x) - model(x)).abs().max().item()
        wrapper = next(open(path).read() for path in loaded if "def call(" in open(path).read())
        print(json.dumps({"error": error, "wrapper": wrapper}))
    """), env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}, timeout=300)  # no earlier run's code
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = last_json_line(proc.stdout)
    assert out["error"] < 1e-5
    wrapper = out["wrapper"]
    assert "get_raw_stream = lambda index: torch.npu.current_stream(index).native_handle" in wrapper
    assert "device='npu'" in wrapper and "device='cuda'" not in wrapper
    assert "async_compile.triton(" in wrapper and "@triton.jit" in wrapper
    assert "libdevice.erf(" in wrapper                # GELU's: the interpreter's host libdevice ran it
    assert "DeviceProperties(type='cuda', index=0, multi_processor_count=108, cc=80" in wrapper
    # Inductor asserts it when it scales a compiled reduction's block (found on the H100)
    assert "max_threads_per_multi_processor=2048" in wrapper


def test_a_triton_chip_registered_after_inductor_was_imported():
    """Inductor imported first (its modules then hold init_backend_registration unwrapped): the
    Triton chip's code generation is registered at once."""
    proc = run_python(textwrap.dedent("""
        import json, torch
        import torch._inductor.graph
        from torch._inductor.graph import init_backend_registration as held   # the unwrapped one
        from torch._inductor.codegen.common import get_scheduling_for_device
        from torch._inductor.codegen.triton import TritonScheduling
        from torch._inductor import utils
        import torch_fl_npu
        torch_fl_npu._register()
        from torch_fl import compile as chip_compile
        chip_compile.register("npu", torch.npu, ("float32",), "triton")
        held()
        print(json.dumps({"triton": issubclass(get_scheduling_for_device("npu"), TritonScheduling),
                          "gpu_type": utils.get_gpu_type()}))
    """), env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert last_json_line(proc.stdout) == {"triton": True, "gpu_type": "npu"}
