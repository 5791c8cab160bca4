"""Caching allocator: alloc+free pairs per second.

The generated backend's allocator (through `torch.empty` on the chip, freed at once)
against torch.cuda's caching allocator (the same through `torch.empty` on `cuda`) and
against raw driver allocation (the spec's malloc/free hooks called through ctypes:
cudaMalloc/cudaFree for nvgpu, simnpuMalloc/simnpuFree for npu).

  python bench/allocator.py --chip nvgpu --native cuda --out bench/results/allocator.json
"""
from __future__ import annotations

import ctypes
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

SIZES = {"1 KiB": 1 << 10, "1 MiB": 1 << 20, "64 MiB": 64 << 20}


def pairs_per_s(alloc_free, count: int, repeats: int = 5) -> float:
    for _ in range(min(count, 100)):
        alloc_free()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(count):
            alloc_free()
        rates.append(count / (time.perf_counter() - start))
    return _common.median(rates)


def torch_pair(device: str, nbytes: int):
    import torch

    def pair():
        x = torch.empty(nbytes, dtype=torch.uint8, device=device)
        del x

    return pair


def raw_pair(chip: str, nbytes: int):
    """The chip's own malloc/free hooks, by the symbols its spec names."""
    import importlib

    spec = importlib.import_module(f"torch_fl_{chip}.spec")
    backend = importlib.import_module(f"torch_fl_{chip}._C")
    library = ctypes.CDLL(backend._driver_libraries()[0])
    malloc = getattr(library, spec.DRIVER_HOOKS["malloc"])
    free = getattr(library, spec.DRIVER_HOOKS["free"])
    malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    free.argtypes = [ctypes.c_void_p]
    ptr = ctypes.c_void_p()

    def pair():
        assert malloc(ctypes.byref(ptr), nbytes) == 0
        free(ptr)

    return pair


def main(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("--chip", default="nvgpu")
    p.add_argument("--native", default="cuda")
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--raw-count", type=int, default=500)
    args = p.parse_args(argv)
    import torch

    if not _common.chip_available(args.chip):
        sys.exit(f"bench/allocator.py: torch.{args.chip} is not available")
    getattr(torch, args.chip).init()
    results, rows = {}, []
    for label, nbytes in SIZES.items():
        chip = pairs_per_s(torch_pair(args.chip, nbytes), args.count)
        native = pairs_per_s(torch_pair(args.native, nbytes), args.count)
        raw = pairs_per_s(raw_pair(args.chip, nbytes), args.raw_count)
        results[label] = {"chip_pairs_per_s": chip, "native_pairs_per_s": native, "raw_pairs_per_s": raw,
                          "native_over_chip": native / chip, "chip_over_raw": chip / raw}
        rows.append([label, chip, native, raw, native / chip, chip / raw])
    _common.emit("allocator", {"chip": args.chip, "native": args.native, "results": results,
                               "targets": {"native_over_chip_at_most": 1.2, "chip_over_raw_at_least": 10}},
                 rows, ["size", f"{args.chip} pairs/s", f"{args.native} pairs/s", "raw driver pairs/s",
                        f"{args.native}/{args.chip}", f"{args.chip}/raw"], args.out)


if __name__ == "__main__":
    main()
