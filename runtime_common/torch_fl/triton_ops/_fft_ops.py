"""Ops of the `fft` family (discrete Fourier transforms); kernels in `_fft.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

OPS: tuple[str, ...] = (
    "_fft_c2c", "_fft_c2c.out", "_fft_r2c", "_fft_r2c.out", "_fft_c2r", "_fft_c2r.out",
    # complex conjugation materialised (ihfft and the FFT backwards reach it)
    "conj_physical.out", "conj_physical_",
)
