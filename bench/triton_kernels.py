"""The shared Triton kernels (the `triton` fallback step), compiled for the GPU.

Large sizes: achieved bandwidth (bytes read + written / time) against the measured
device-to-device copy bandwidth (torch's copy_ of the same bytes). Small sizes: time
per call against the native torch op. The kernels are called as the backend calls
them (`torch_fl.triton_ops.kernel_for(op)`), here on CUDA tensors.

  python bench/triton_kernels.py --out bench/results/triton_kernels.json
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402


def cases(size: int):
    """name -> (make inputs, triton call, native call, bytes moved)."""
    import torch

    from torch_fl import triton_ops

    k = triton_ops.kernel_for
    add, sum_, softmax, layer_norm = k("add.Tensor"), k("sum.dim_IntList"), k("_softmax"), k("native_layer_norm")
    cols = 4096 if size >= 4096 * 4 else 256
    rows = max(1, size // cols)

    def vec():
        return (torch.randn(size, device="cuda"), torch.randn(size, device="cuda"))

    def mat():
        x = torch.randn(rows, cols, device="cuda")
        return (x, torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda"))

    f = 4  # bytes per float32
    return {
        "elementwise add": (vec, lambda a: add(a[0], a[1]), lambda a: torch.add(a[0], a[1]), 3 * size * f),
        "reduction (row sum)": (mat, lambda a: sum_(a[0], [1]), lambda a: a[0].sum(1), rows * cols * f + rows * f),
        "softmax (rows)": (mat, lambda a: softmax(a[0], 1, False), lambda a: torch.softmax(a[0], 1),
                           2 * rows * cols * f),
        "layer_norm (rows)": (mat, lambda a: layer_norm(a[0], [cols], a[1], a[2], 1e-5),
                              lambda a: torch.native_layer_norm(a[0], [cols], a[1], a[2], 1e-5),
                              2 * rows * cols * f),
    }


def main(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("--large", type=int, default=1 << 28, help="elements at the large size (float32)")
    p.add_argument("--small", type=int, default=1 << 12, help="elements at the small size")
    args = p.parse_args(argv)
    import torch
    from triton.testing import do_bench

    if not torch.cuda.is_available():
        sys.exit("bench/triton_kernels.py: needs a CUDA GPU (the kernels compile for it)")
    # The ceiling: a device-to-device copy of the large size.
    src = torch.randn(args.large, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200)
    copy_gbs = 2 * src.numel() * 4 / copy_ms / 1e6
    del src, dst
    results, rows = {"copy_bandwidth_GBps": copy_gbs}, []
    for name, (make, triton_call, native_call, nbytes) in cases(args.large).items():
        inputs = make()
        expected, got = native_call(inputs), triton_call(inputs)
        expected = expected[0] if isinstance(expected, tuple) else expected
        got = got[0] if isinstance(got, tuple) else got
        torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-2)  # the right answer, or no figure
        ms = do_bench(lambda: triton_call(inputs), warmup=25, rep=200)
        native_ms = do_bench(lambda: native_call(inputs), warmup=25, rep=200)
        gbs = nbytes / ms / 1e6
        del inputs
        small = cases(args.small)[name]
        s_inputs = small[0]()
        s_ms = do_bench(lambda: small[1](s_inputs), warmup=25, rep=100)
        s_native = do_bench(lambda: small[2](s_inputs), warmup=25, rep=100)
        results[name] = {"large_ms": ms, "large_native_ms": native_ms, "large_GBps": gbs,
                         "fraction_of_copy": gbs / copy_gbs, "small_us": s_ms * 1e3,
                         "small_native_us": s_native * 1e3, "small_ratio": s_ms / s_native}
        rows.append([name, gbs, gbs / copy_gbs, native_ms / ms, s_ms * 1e3, s_native * 1e3, s_ms / s_native])
    _common.emit("triton_kernels", {"large_elements": args.large, "small_elements": args.small,
                                    "results": results, "targets": {"fraction_of_copy": 0.9, "small_ratio": 2.0}},
                 rows, ["kernel", "GB/s", "of copy", "speed vs native", "small us", "native us", "small ratio"],
                 args.out)
    print(f"device-to-device copy: {copy_gbs:.0f} GB/s (read + write)")


if __name__ == "__main__":
    main()
