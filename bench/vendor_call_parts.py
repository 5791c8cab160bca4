"""Where the host time of one `nvgpu` vendor call goes, piece by piece, timed in C++.

torch.profiler shows each vendor call a few microseconds over CUDA's own call of the op
(bench/results/*/profile-nvgpu.txt), but the profiler's own cost is of that size too. This
builds bench/csrc/vendor_call_parts.cpp against the installed nvgpu backend and times,
with no profiler and no Python in the loop: the whole call from the top of the dispatcher
and from the backend key, the vendor kernel without the generated wrapper, CUDA's kernel
without the dispatcher, and each piece the wrapper and the kernel add. Needs a CUDA
machine with the nvgpu backend installed (`torchfl-gen build specs/nvgpu.yaml`). A
diagnostic, not a figure of docs/benchmarks.md.

  python bench/vendor_call_parts.py --out bench/results/h100/vendor-call-parts.txt
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build():
    import importlib

    from torch.utils import cpp_extension

    backend = Path(importlib.import_module("torch_fl_nvgpu._C").__file__)
    return cpp_extension.load(
        name="vendor_call_parts",
        sources=[str(ROOT / "bench" / "csrc" / "vendor_call_parts.cpp")],
        extra_include_paths=[str(ROOT / "runtime_common" / "torch_fl" / "csrc" / "include"),
                             str(ROOT / "chips" / "nvgpu" / "include")],
        # the runtime and the vendor kernels are the backend's own, already loaded
        extra_ldflags=[f"-L{backend.parent}", f"-l:{backend.name}", f"-Wl,-rpath,{backend.parent}"],
        with_cuda=True,
        verbose=False,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    import importlib.util

    import torch

    if not torch.cuda.is_available() or importlib.util.find_spec("torch_fl_nvgpu") is None:
        print("vendor_call_parts: needs a CUDA machine with the nvgpu backend", file=sys.stderr)
        return 2
    import torch_fl

    torch_fl.init(chips=["nvgpu"])  # where torch drives CUDA, chips are registered on request
    module = build()
    a, b = torch.rand(16, 16, device="nvgpu"), torch.rand(16, 16, device="nvgpu")
    ca, cb = a.to("cpu").to("cuda"), b.to("cpu").to("cuda")
    rows = module.parts(a, b, ca, cb, args.calls, args.repeats)
    lines = [f"vendor call parts, 16x16 float32, least of {args.repeats} blocks of {args.calls} calls "
             f"(torch {torch.__version__}, {torch.cuda.get_device_name()})",
             f"{'piece':64s} {'ns/call':>9s}"]
    lines += [f"{name:64s} {ns:9.0f}" for name, ns in rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
