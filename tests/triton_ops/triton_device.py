"""Where the Triton kernel tests run their kernels.

By default under Triton's interpreter on CPU tensors (TRITON_INTERPRET=1, set here before
triton is imported). With TORCH_FL_TRITON_TEST_DEVICE=cuda the same tests compile the kernels
for the GPU and run them on cuda tensors (scripts/nvgpu_device_run.sh, stage `triton`);
references stay aten's CPU ops either way. Import this module before torch_fl.triton_ops.
"""
import os

DEVICE = os.environ.get("TORCH_FL_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402


def same_layout(v, device):
    """A copy of v on `device` with v's strides (non-contiguous layouts stay non-contiguous)."""
    if 0 in v.stride() and v.numel() > 1:
        return v.contiguous().to(device)
    d = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=device)
    d.copy_(v)
    return d


def on_device(fn):
    """fn run on DEVICE copies of its CPU tensor arguments, looking from outside as if it ran on
    the CPU tensors: arguments it wrote (out=, in-place) are copied back into the originals, a
    returned argument is returned as its original, any other result comes back to the CPU after
    checking that it was produced on DEVICE. The identity on the CPU: fn itself."""
    if DEVICE == "cpu":
        return fn

    def run(*args, **kwargs):
        moved = {}

        def move(v):
            if isinstance(v, torch.Tensor) and v.device.type == "cpu":
                d = same_layout(v, DEVICE)
                moved[id(d)] = (v, d)
                return d
            if isinstance(v, (list, tuple)):
                return type(v)(move(x) for x in v)
            return v

        result = fn(*move(args), **{k: move(v) for k, v in kwargs.items()})
        if not moved:  # called with device tensors already: nothing to mirror
            return result
        for original, d in moved.values():
            if d.shape != original.shape or not torch.equal(d.cpu(), original):
                original.resize_(d.shape)
                original.copy_(d.cpu())

        def back(v):
            if isinstance(v, torch.Tensor):
                if id(v) in moved:
                    return moved[id(v)][0]
                assert v.device.type == DEVICE, (v.device, DEVICE)
                return v.cpu()
            if isinstance(v, (list, tuple)):
                return type(v)(back(x) for x in v)
            return v

        return back(result)

    return run


def npu_available() -> bool:
    """Whether the simulated NPU's backend is installed here (its tests run in CI, not on a GPU)."""
    try:
        import torch_fl_npu  # noqa: F401
        torch.empty(1, device="npu")
        return True
    except Exception:  # noqa: BLE001
        return False
