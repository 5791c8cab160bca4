"""Ops of the `foreach` family (torch._foreach_*: the optimizers' multi-tensor updates); kernels in `_foreach.py`.

Kept free of imports: `torch_fl.triton_ops.SUPPORTED_OPS` is read without triton."""

# (foreach name, overloads): each has a functional and an in-place variant.
_BINARY = (
    ("add", ("List", "Scalar", "ScalarList", "Tensor")),
    ("sub", ("List", "Scalar", "ScalarList")),
    ("mul", ("List", "Scalar", "ScalarList", "Tensor")),
    ("div", ("List", "Scalar", "ScalarList", "Tensor")),
    ("maximum", ("List", "Scalar", "ScalarList")),
    ("minimum", ("List", "Scalar", "ScalarList")),
    ("clamp_min", ("List", "Scalar", "ScalarList")),
    ("clamp_max", ("List", "Scalar", "ScalarList")),
    ("pow", ("List", "Scalar", "ScalarList")),
    ("lerp", ("List", "Scalar", "ScalarList")),
    ("addcmul", ("Scalar", "ScalarList", "Tensor")),
    ("addcdiv", ("Scalar", "ScalarList", "Tensor")),
)
_UNARY = ("neg", "abs", "sqrt", "rsqrt", "reciprocal", "sign", "exp", "log")

OPS: tuple[str, ...] = tuple(
    [f"_foreach_{name}{suffix}.{overload}" for name, overloads in _BINARY for overload in overloads
     for suffix in ("", "_")]
    + [f"_foreach_{name}{suffix}" for name in _UNARY for suffix in ("", "_")]
    + ["_foreach_pow.ScalarAndTensor", "_foreach_zero_", "_foreach_copy_"]
)
