"""Complex tensors on the Triton path.

Triton has no complex types, so a Triton op declines complex64/complex128 tensors unless
this module has an adapter for it (`adapter_for`). An adapter computes the op from real
ops on the tensors' (real, imaginary) parts, `torch.view_as_real` views of the same memory,
each dispatched again on the chip (its vendor kernel or its Triton kernel): complex work
stays on the device instead of falling back to the CPU. Three kinds:

- per part: ops linear in their complex data with real coefficients (indexing, scatter,
  padding, masking, sums, add/sub): the op itself, once on the real parts and once on the
  imaginary parts (`_per_part`);
- formulas: complex arithmetic and functions written with real ops on the parts (`_Z`),
  following ATen's CPU formulas where they differ from the textbook ones (division,
  reciprocal, log1p, expm1, tanh, pow of a scalar exponent, logaddexp, lerp);
- complex-only ops (`complex.out`, `polar.out`): `KERNELS`, a family of its own.

An adapter raises `Unsupported` before writing anything for what it does not handle
(complex32, a complex coefficient where a real one is needed): the op then takes the next
step of its chain, exactly as when no adapter exists.
"""
from __future__ import annotations

import cmath
import math
import numbers
from typing import Callable

import torch

from . import Unsupported

_PART = {torch.complex64: torch.float32, torch.complex128: torch.float64}
_WHOLE = {part: whole for whole, part in _PART.items()}
# Arguments that select elements rather than carry data: passed unchanged to both parts.
_INDEX_ARGS = frozenset({"index", "indices", "mask", "condition"})

ADAPTERS: dict[str, Callable] = {}


def adapter_for(op: str) -> Callable | None:
    """The complex adapter of Triton op `op`, or None (complex calls are then declined).
    The `linalg` family's complex kernels are its own (`_linalg_complex`)."""
    from . import _FAMILY_OF

    if _FAMILY_OF.get(op) == "linalg":
        from ._linalg_complex import COMPLEX_KERNELS

        if op in COMPLEX_KERNELS:
            return COMPLEX_KERNELS[op]
    return ADAPTERS.get(op)


# ----------------------------------------------------------------- schema ---
class _Op:
    """An aten overload with its schema: binds a call's arguments by name and calls it."""

    def __init__(self, name: str):
        base, _, overload = name.partition(".")
        self.name = name
        self.packet = getattr(getattr(torch.ops.aten, base), overload or "default")
        arguments = self.packet._schema.arguments
        self.names = [a.name for a in arguments]
        self.kwarg_only = frozenset(a.name for a in arguments if a.kwarg_only)
        self.defaults = {a.name: a.default_value for a in arguments if a.has_default_value()}
        self.tensors = frozenset(a.name for a in arguments if str(a.type) == "Tensor")
        written = [a.name for a in arguments if a.alias_info is not None and a.alias_info.is_write]
        self.outs = [n for n in written if n in self.kwarg_only]
        self.in_place = bool(written) and not self.outs

    def bind(self, args, kwargs) -> dict:
        values = dict(zip(self.names, args))
        values.update(kwargs)
        for name in self.names:
            if name not in values:
                values[name] = self.defaults.get(name)
        return values

    def __call__(self, values: dict):
        positional = [values[n] for n in self.names if n not in self.kwarg_only]
        keywords = {n: values[n] for n in self.names if n in self.kwarg_only}
        return self.packet(*positional, **keywords)


def _part_dtype(dtype: torch.dtype) -> torch.dtype:
    part = _PART.get(dtype)
    if part is None:
        raise Unsupported(f"dtype {dtype}: the complex adapters handle complex64 and complex128")
    return part


def _whole_dtype(part: torch.dtype) -> torch.dtype:
    whole = _WHOLE.get(part)
    if whole is None:
        raise Unsupported(f"no complex dtype with {part} parts among complex64/complex128")
    return whole


def _tensor_parts(t: torch.Tensor):
    _part_dtype(t.dtype)
    view = torch.view_as_real(t)
    return view.select(-1, 0), view.select(-1, 1)


def _store(out: torch.Tensor, re, im) -> torch.Tensor:
    """Writes re + i*im (tensors or Python numbers, broadcast to out's shape) into complex `out`."""
    view = torch.view_as_real(out)
    for part, value in ((view.select(-1, 0), re), (view.select(-1, 1), im)):
        if isinstance(value, torch.Tensor):
            part.copy_(value)
        else:
            part.fill_(0 if value is None else value)
    return out


def _pack(re, im, shape, dtype, device) -> torch.Tensor:
    return _store(torch.empty(shape, dtype=dtype, device=device), re, im)


def _into(out: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """`out=` semantics: resize `out` to the result and copy it in (complex parts pairwise)."""
    if not torch.can_cast(result.dtype, out.dtype):
        raise Unsupported(f"result type {result.dtype} can't be cast to the output's {out.dtype}")
    if out.shape != result.shape:
        out.resize_(result.shape)
    if out.is_complex() and result.is_complex():
        torch.view_as_real(out).copy_(torch.view_as_real(result))
    elif out.is_complex():
        _store(out, result, None)
    else:
        out.copy_(result)
    return out


def _assign(self: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """In-place semantics: the result, of self's shape, written into self."""
    if not self.is_complex() or result.shape != self.shape:
        raise Unsupported("an in-place complex result that self cannot hold")
    return _into(self, result)


# ---------------------------------------------------------------- per part ---
def _per_part(name: str, data_scalars: tuple[str, ...] = (), promotes: bool = False):
    """The adapter of a linear op: the op on the real parts, then on the imaginary parts.

    Complex tensors are split into their parts; a real floating or integer data tensor is
    its own real part with a zero imaginary part; index, mask and condition tensors go to
    both calls unchanged. `data_scalars` names the Scalar arguments that are data (a fill
    value: split like a tensor); every other Scalar is a coefficient and must be real.
    `promotes`: the result dtype follows type promotion of the data (add, where) rather
    than self's dtype."""
    op = None

    def run(*args, **kwargs):
        nonlocal op
        op = op or _Op(name)
        values = op.bind(args, kwargs)
        if op.in_place and not values["self"].is_complex():
            raise Unsupported(f"{name}: a complex operand written into a real self")
        re, im, data = dict(values), dict(values), []
        for key in op.names:
            if key in op.outs:
                continue
            value = values[key]
            if isinstance(value, torch.Tensor) and key not in _INDEX_ARGS:
                data.append(value)
                if value.is_complex():
                    re[key], im[key] = _tensor_parts(value)
                else:
                    im[key] = torch.zeros_like(value)
            elif key in data_scalars and isinstance(value, numbers.Number):
                data.append(value)
                re[key], im[key] = (value.real, value.imag) if isinstance(value, complex) else (value, 0)
                if key in op.tensors:  # a wrapped number: a 0-dim tensor of the parts' dtype again
                    part = _part_dtype(_promoted(*[v for v in values.values() if isinstance(v, torch.Tensor)],
                                                 value))
                    re[key], im[key] = torch.tensor(re[key], dtype=part), torch.tensor(im[key], dtype=part)
            elif isinstance(value, complex):
                raise Unsupported(f"{name}: a complex {key}")
            elif isinstance(value, torch.dtype):
                re[key] = im[key] = _part_dtype(value)
        for key in op.outs:
            out = values[key]
            if not out.is_complex():
                raise Unsupported(f"{name}: complex data written into a real {key}")
            re[key] = torch.empty(0, dtype=_part_dtype(out.dtype), device=out.device)
            im[key] = torch.empty(0, dtype=re[key].dtype, device=out.device)
        real, imag = op(re), op(im)
        if op.outs:
            out = values[op.outs[0]]
            return _store(out.resize_(real.shape) if out.shape != real.shape else out, real, imag)
        if op.in_place:
            return values["self"]
        dtype = _whole_dtype(real.dtype)
        if promotes:
            dtype = _promoted(*data)
        return _pack(real, imag, real.shape, dtype, real.device)

    run.__name__ = "complex_" + name.replace(".", "_")
    return run


def _promoted(*operands) -> torch.dtype:
    """torch's result dtype of the operands: tensors (dimensioned or 0-dim) and Python numbers
    rank as torch ranks them, through `torch.result_type` on meta stand-ins."""
    tensors = [v for v in operands if isinstance(v, torch.Tensor)]
    numbers_ = [v for v in operands if not isinstance(v, torch.Tensor)]
    proxy = None
    for value in tensors + numbers_:
        if isinstance(value, torch.Tensor):
            value = torch.empty((1,) if value.dim() else (), dtype=value.dtype, device="meta")
        if proxy is None:
            proxy = value
            continue
        shape = (1,) if proxy.dim() or (isinstance(value, torch.Tensor) and value.dim()) else ()
        proxy = torch.empty(shape, dtype=torch.result_type(proxy, value), device="meta")
    return proxy.dtype


def _per_part_ops(names: str, **options) -> None:
    for name in names.split():
        ADAPTERS[name] = _per_part(name, **options)


_per_part_ops("roll gather gather.out index_select index_select.out index.Tensor take take.out "
              "masked_select masked_select.out tril tril.out tril_ triu triu.out triu_ "
              "index_copy index_copy_ index_copy.out index_add index_add_ index_add.out "
              "scatter.src scatter_.src scatter.src_out scatter_add scatter_add_ scatter_add.out "
              "masked_scatter_ put_ _index_put_impl_ reflection_pad1d reflection_pad1d.out "
              "reflection_pad2d reflection_pad2d.out reflection_pad3d reflection_pad3d.out "
              "replication_pad1d replication_pad1d.out replication_pad2d replication_pad2d.out "
              "replication_pad3d replication_pad3d.out im2col im2col.out col2im col2im.out "
              "unfold_backward channel_shuffle cumsum cumsum.out cumsum_ sum.dim_IntList "
              "sum.IntList_out mean.dim mean.out trace neg neg_ neg.out zero_")
_per_part_ops("masked_fill_.Scalar masked_fill_.Tensor index_fill_.int_Scalar index_fill_.int_Tensor "
              "scatter.value scatter_.value scatter.value_out fill_.Scalar fill_.Tensor", data_scalars=("value",))
_per_part_ops("where.self where.self_out", promotes=True)
_per_part_ops("add.Tensor add_.Tensor add.out sub.Tensor sub_.Tensor sub.out rsub.Tensor",
              data_scalars=("other",), promotes=True)


def _scatter_reduce(name: str):
    linear = _per_part(name)

    def run(*args, **kwargs):
        reduce = kwargs.get("reduce", args[4] if len(args) > 4 else None)
        if reduce not in ("add", "sum"):
            raise Unsupported(f"{name}: reduce={reduce!r} is not linear in complex data")
        return linear(*args, **kwargs)

    return run


for _name in ("scatter.reduce", "scatter_.reduce", "scatter.reduce_out"):
    ADAPTERS[_name] = _scatter_reduce(_name)


# ---------------------------------------------------------------- formulas ---
def _operand(value):
    """(real part, imaginary part) of an operand: tensors (views), Python numbers, or None
    for an imaginary part that is zero. A wrapped number (a CPU 0-dim tensor beside chip
    tensors) becomes a Python number, as torch's promotion treats it."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 and value.device.type == "cpu":
            return _operand(value.item())
        if value.is_complex():
            return _tensor_parts(value)
        return value, None
    if isinstance(value, complex):
        return value.real, value.imag
    return value, None


def _add(a, b):
    return b if a is None else a if b is None else a + b


def _sub(a, b):
    return a if b is None else -b if a is None else a - b


def _mul(a, b):
    return None if a is None or b is None else a * b


class _Z:
    """A complex value as its (real, imaginary) parts, each a real chip tensor, a Python
    number, or None for zero; arithmetic with real ops."""

    __slots__ = ("re", "im")

    def __init__(self, re, im=None):
        self.re, self.im = re, im

    @classmethod
    def of(cls, value) -> "_Z":
        return cls(*_operand(value))

    def __add__(self, other: "_Z") -> "_Z":
        return _Z(_add(self.re, other.re), _add(self.im, other.im))

    def __sub__(self, other: "_Z") -> "_Z":
        return _Z(_sub(self.re, other.re), _sub(self.im, other.im))

    def __mul__(self, other: "_Z") -> "_Z":
        return _Z(_sub(_mul(self.re, other.re), _mul(self.im, other.im)),
                  _add(_mul(self.re, other.im), _mul(self.im, other.re)))

    def __neg__(self) -> "_Z":
        return _Z(_sub(None, self.re), _sub(None, self.im))

    def scale(self, k) -> "_Z":
        return _Z(_mul(self.re, k), _mul(self.im, k))

    def times_i(self) -> "_Z":
        return _Z(_sub(None, self.im), self.re)

    def parts(self):
        """Both parts as tensors (a zero imaginary part made explicit)."""
        re = self.re
        return re, torch.zeros_like(re) if self.im is None else self.im

    def __truediv__(self, other: "_Z") -> "_Z":
        # ATen's vectorized complex division: both operands scaled by max(|c|, |d|) first.
        a, b = self.re, self.im
        c, d = other.parts() if isinstance(other.re, torch.Tensor) else (other.re, other.im or 0.0)
        if not isinstance(c, torch.Tensor):  # a Python-number divisor
            q = complex(c, d)
            return self * _Z(*((1 / q).real, (1 / q).imag)) if q != 0 else \
                _Z(_mul(a, math.inf), _mul(b, math.inf))
        scale = torch.maximum(c.abs(), d.abs()).reciprocal()
        c, d = c * scale, d * scale
        a, b = _mul(a, scale), _mul(b, scale)
        den = c * c + d * d
        return _Z(_add(_mul(a, c), _mul(b, d)) / den, _sub(_mul(b, c), _mul(a, d)) / den)


def _abs(z: _Z):
    re, im = z.parts()
    return torch.hypot(re, im)


def _angle(z: _Z):
    re, im = z.parts()
    return torch.atan2(im, re)


def _exp(z: _Z) -> _Z:
    re, im = z.parts()
    e = torch.exp(re)
    return _Z(e * torch.cos(im), e * torch.sin(im))


def _log(z: _Z) -> _Z:
    return _Z(torch.log(_abs(z)), _angle(z))


def _sqrt(z: _Z) -> _Z:
    # sqrt(x + iy): t = sqrt((|z| + |x|) / 2); x >= 0: (t, y / 2t), else (|y| / 2t, copysign(t, y)).
    x, y = z.parts()
    t = torch.sqrt((_abs(z) + x.abs()) * 0.5)
    half = torch.where(t == 0, torch.zeros_like(t), y / (2 * t))
    re = torch.where(x >= 0, t, half.abs())
    im = torch.where(x >= 0, half, torch.copysign(t, y))
    return _Z(re, torch.where(t == 0, y, im))


def _reciprocal(z: _Z) -> _Z:
    # ATen: (c - di) / (c^2 + d^2), unscaled.
    c, d = z.parts()
    den = c * c + d * d
    return _Z(c / den, -d / den)


def _sin(z: _Z) -> _Z:
    x, y = z.parts()
    return _Z(torch.sin(x) * torch.cosh(y), torch.cos(x) * torch.sinh(y))


def _cos(z: _Z) -> _Z:
    x, y = z.parts()
    return _Z(torch.cos(x) * torch.cosh(y), -(torch.sin(x) * torch.sinh(y)))


def _sinh(z: _Z) -> _Z:
    x, y = z.parts()
    return _Z(torch.sinh(x) * torch.cos(y), torch.cosh(x) * torch.sin(y))


def _cosh(z: _Z) -> _Z:
    x, y = z.parts()
    return _Z(torch.cosh(x) * torch.cos(y), torch.sinh(x) * torch.sin(y))


def _tanh(z: _Z) -> _Z:
    # glibc's ctanh: sinh(x)cosh(x) / (sinh(x)^2 + cos(y)^2), sin(y)cos(y) / (same); far from
    # the imaginary axis (|x| > 20, where both forms agree to the last bit) (sign x, 4 sin y cos y e^-2|x|).
    x, y = z.parts()
    sh, ch, s, c = torch.sinh(x), torch.cosh(x), torch.sin(y), torch.cos(y)
    den = sh * sh + c * c
    far = x.abs() > 20
    re = torch.where(far, torch.sign(x), sh * ch / den)
    im = torch.where(far, 4 * s * c * torch.exp(-2 * x.abs()), s * c / den)
    return _Z(re, im)


def _tan(z: _Z) -> _Z:
    t = _tanh(z.times_i())  # tan z = -i tanh(iz)
    return _Z(t.im, -t.re)


def _log1p(z: _Z) -> _Z:
    # ATen's c10_complex_math::log1p: near 0, 0.5 * log1p(x(2 + x) + y^2); else log|1 + z|.
    x, y = z.parts()
    theta = torch.atan2(y, x + 1)
    r = x * (x + 2) + y * y
    near = _abs(z) < 0.5
    re = torch.where(near, torch.where(r == 0, x, 0.5 * torch.log1p(r)), torch.log(torch.hypot(x + 1, y)))
    return _Z(re, theta)


def _expm1(z: _Z) -> _Z:
    # ATen: expm1(x) cos(y) - 2 sin(y/2)^2 + i e^x sin(y).
    x, y = z.parts()
    s = torch.sin(y * 0.5)
    return _Z(torch.expm1(x) * torch.cos(y) - 2 * s * s, torch.exp(x) * torch.sin(y))


def _asinh(z: _Z) -> _Z:
    # log(z + sqrt(z^2 + 1)) on the right half plane; asinh(-z) = -asinh(z) on the left.
    x, y = z.parts()
    left = x < 0
    w = _Z(torch.where(left, -x, x), torch.where(left, -y, y))
    r = _log(w + _sqrt(w * w + _Z(1.0)))
    return _Z(torch.where(left, -r.re, r.re), torch.where(left, -r.im, r.im))


def _asin(z: _Z) -> _Z:
    r = _asinh(z.times_i())  # asin z = -i asinh(iz)
    return _Z(r.im, -r.re)


def _acos(z: _Z) -> _Z:
    r = _asin(z)
    return _Z(math.pi / 2 - r.re, -r.im)


def _atanh(z: _Z) -> _Z:
    return (_log1p(z) - _log1p(-z)).scale(0.5)


def _atan(z: _Z) -> _Z:
    r = _atanh(z.times_i())  # atan z = -i atanh(iz)
    return _Z(r.im, -r.re)


def _acosh(z: _Z) -> _Z:
    return _log(z + _sqrt(z + _Z(1.0)) * _sqrt(z - _Z(1.0)))


def _sigmoid(z: _Z) -> _Z:
    return _reciprocal(_Z(1.0) + _exp(-z))


def _pow(base: _Z, exponent) -> _Z:
    """base ** exponent as ATen computes it: the exponents it special-cases for a scalar
    exponent, else exp(exponent * log(base))."""
    if isinstance(exponent, numbers.Number):
        e = complex(exponent)
        if e == 2:
            return base * base
        if e == 3:
            return base * base * base
        if e == 0.5:
            return _sqrt(base)
        if e == -0.5:
            return _reciprocal(_sqrt(base))
        if e == -1:
            return _reciprocal(base)
        if e == -2:
            return _reciprocal(base * base)
        exponent = _Z(e.real, e.imag if e.imag else None)
    elif not isinstance(exponent, _Z):
        exponent = _Z.of(exponent)
    return _exp(exponent * _log(base))


# ------------------------------------------------------- formula adapters ---
def _device_of(values) -> torch.device:
    for value in values:
        if isinstance(value, torch.Tensor) and not (value.dim() == 0 and value.device.type == "cpu"):
            return value.device
    for value in values:
        if isinstance(value, torch.Tensor):
            return value.device
    raise Unsupported("no tensor operand")


def _shape_of(values):
    return torch.broadcast_shapes(*[tuple(v.shape) for v in values if isinstance(v, torch.Tensor)])


def _complex_result(z: _Z, operands, dtype=None) -> torch.Tensor:
    """The complex tensor re + i*im of the operands' broadcast shape and result dtype."""
    dtype = dtype or _promoted(*operands)
    if not dtype.is_complex:
        dtype = _whole_dtype(dtype)
    _part_dtype(dtype)
    return _pack(z.re, z.im, _shape_of(operands), dtype, _device_of(operands))


def _variants(names: str, compute: Callable) -> None:
    """Registers the functional, in-place and `out=` forms (listed in `names`) of an op
    whose functional result `compute(**arguments)` returns."""
    for name in names.split():
        ADAPTERS[name] = _formula(name, compute)


def _formula(name: str, compute: Callable) -> Callable:
    op = None

    def run(*args, **kwargs):
        nonlocal op
        op = op or _Op(name)
        values = op.bind(args, kwargs)
        arguments = {k: v for k, v in values.items() if k not in op.outs}
        if op.in_place and not values["self"].is_complex():
            raise Unsupported(f"{name}: a complex result written into a real self")
        result = compute(**arguments)
        if op.outs:
            return _into(values[op.outs[0]], result)
        if op.in_place:
            return _assign(values["self"], result)
        return result

    run.__name__ = "complex_" + name.replace(".", "_")
    return run


def _unary(function: Callable[[_Z], _Z]) -> Callable:
    def compute(self, **_):
        return _complex_result(function(_Z.of(self)), [self], self.dtype)

    return compute


def _unary_ops(table: dict) -> None:
    for base, function in table.items():
        _variants(f"{base} {base}_ {base}.out", _unary(function))


_unary_ops({"exp": _exp, "log": _log, "sqrt": _sqrt, "rsqrt": lambda z: _reciprocal(_sqrt(z)),
            "reciprocal": _reciprocal, "sin": _sin, "cos": _cos, "tan": _tan, "sinh": _sinh,
            "cosh": _cosh, "tanh": _tanh, "asin": _asin, "acos": _acos, "atan": _atan,
            "asinh": _asinh, "acosh": _acosh, "atanh": _atanh, "sigmoid": _sigmoid,
            "log1p": _log1p, "expm1": _expm1,
            "log2": lambda z: _log(z).scale(1 / math.log(2)),
            "log10": lambda z: _log(z).scale(1 / math.log(10)),
            "exp2": lambda z: _exp(z.scale(math.log(2))),
            "sgn": lambda z: (lambda a: _Z(torch.where(a == 0, 0.0, z.re / a),
                                           torch.where(a == 0, 0.0, z.im / a)))(_abs(z)),
            "silu": lambda z: z / (_Z(1.0) + _exp(-z)),
            "sinc": lambda z: _sinc(z)})


def _sinc(z: _Z) -> _Z:
    # ATen: 1 at 0, else sin(pi z) / (pi z).
    p = z.scale(math.pi)
    q = _sin(p) / p
    zero = (z.re == 0) & (z.im == 0)
    return _Z(torch.where(zero, 1.0, q.re), torch.where(zero, 0.0, q.im))


def _real_unary(function: Callable[[_Z], torch.Tensor]) -> Callable:
    def compute(self, **_):
        return function(_Z.of(self))

    return compute


_variants("abs abs.out", _real_unary(_abs))
_variants("angle angle.out", _real_unary(_angle))
_variants("isnan", _real_unary(lambda z: torch.isnan(z.re) | torch.isnan(z.im)))


def _binary(function: Callable[[_Z, _Z], _Z], first: str = "self", second: str = "other") -> Callable:
    def compute(**arguments):
        a, b = arguments[first], arguments[second]
        return _complex_result(function(_Z.of(a), _Z.of(b)), [a, b])

    return compute


_variants("mul.Tensor mul_.Tensor mul.out", _binary(lambda a, b: a * b))
_variants("div.Tensor div_.Tensor div.out", _binary(lambda a, b: a / b))


def _logaddexp(x: _Z, y: _Z) -> _Z:
    # ATen's _log_add_exp_helper (finite operands): max + log1p(exp(min - max)), ordered by real part.
    xr, xi = x.parts()
    yr, yi = y.parts()
    x_max = yr < xr
    mx = _Z(torch.where(x_max, xr, yr), torch.where(x_max, xi, yi))
    mn = _Z(torch.where(x_max, yr, xr), torch.where(x_max, yi, xi))
    return mx + _log1p(_exp(mn - mx))


_variants("logaddexp logaddexp.out", _binary(_logaddexp))


def _pow_tensor_tensor(self, exponent, **_):
    return _complex_result(_pow(_Z.of(self), _Z.of(exponent)), [self, exponent])


def _pow_tensor_scalar(self, exponent, **_):
    if complex(exponent) == 0:
        return _complex_result(_Z(1.0), [self, exponent])
    if complex(exponent) == 1:
        return _complex_result(_Z.of(self), [self, exponent])
    return _complex_result(_pow(_Z.of(self), exponent), [self, exponent])


def _pow_scalar(self, exponent, **_):
    # A number base: its logarithm in Python, then exp(exponent * log(base)); 1 ** w is 1.
    base = complex(self)
    if base == 0:
        raise Unsupported("pow of a zero base: left to the CPU's conventions")
    if base == 1:
        return _complex_result(_Z(1.0), [exponent, self])
    log_base = cmath.log(base)
    return _complex_result(_exp(_Z.of(exponent) * _Z(log_base.real, log_base.imag)), [exponent, self])


_variants("pow.Tensor_Tensor pow_.Tensor pow.Tensor_Tensor_out", _pow_tensor_tensor)
_variants("pow.Tensor_Scalar pow_.Scalar pow.Tensor_Scalar_out", _pow_tensor_scalar)
_variants("pow.Scalar pow.Scalar_out", _pow_scalar)


def _nonzero_mask(value) -> torch.Tensor:
    z = _Z.of(value)
    if z.im is None:
        return z.re != 0
    return (z.re != 0) | (z.im != 0)


def _equal_parts(self, other, **_):
    a, b = _Z.of(self), _Z.of(other)
    ar, ai = a.parts() if isinstance(a.re, torch.Tensor) else (a.re, a.im or 0.0)
    br, bi = b.parts() if isinstance(b.re, torch.Tensor) else (b.re, b.im or 0.0)
    return (ar == br) & (ai == bi)


_variants("eq.Tensor eq.Tensor_out eq.Scalar eq.Scalar_out", _equal_parts)
_variants("ne.Tensor ne.Tensor_out ne.Scalar ne.Scalar_out",
          lambda **arguments: ~_equal_parts(**arguments))
_variants("logical_and.out", lambda self, other: _nonzero_mask(self) & _nonzero_mask(other))
_variants("logical_or.out", lambda self, other: _nonzero_mask(self) | _nonzero_mask(other))
_variants("logical_xor.out", lambda self, other: _nonzero_mask(self) ^ _nonzero_mask(other))
_variants("logical_not.out", lambda self: ~_nonzero_mask(self))
_variants("nonzero nonzero.out", lambda self: torch.nonzero(_nonzero_mask(self)))
_variants("nonzero_static nonzero_static.out",
          lambda self, size, fill_value: torch.nonzero_static(_nonzero_mask(self), size=size, fill_value=fill_value))
_variants("count_nonzero.dim_IntList count_nonzero.dim_IntList_out",
          lambda self, dim: torch.count_nonzero(_nonzero_mask(self), dim))
_variants("all all.all_out", lambda self: torch.all(_nonzero_mask(self)))
_variants("any any.all_out", lambda self: torch.any(_nonzero_mask(self)))
_variants("all.dim all.out", lambda self, dim, keepdim: torch.all(_nonzero_mask(self), dim, keepdim))
_variants("any.dim any.out", lambda self, dim, keepdim: torch.any(_nonzero_mask(self), dim, keepdim))


def _equal(self, other):
    if not (self.is_complex() and other.is_complex()) or self.dtype != other.dtype:
        raise Unsupported("equal of a complex and a tensor of another dtype")
    return torch.equal(torch.view_as_real(self), torch.view_as_real(other))


ADAPTERS["equal"] = _equal


def _addcmul(self, tensor1, tensor2, value):
    z = _Z.of(self) + _Z.of(value) * _Z.of(tensor1) * _Z.of(tensor2)
    return _complex_result(z, [self, tensor1, tensor2])


def _addcdiv(self, tensor1, tensor2, value):
    z = _Z.of(self) + _Z.of(value) * (_Z.of(tensor1) / _Z(*_Z.of(tensor2).parts()))
    return _complex_result(z, [self, tensor1, tensor2])


_variants("addcmul addcmul_ addcmul.out", _addcmul)
_variants("addcdiv addcdiv_ addcdiv.out", _addcdiv)


def _lerp(self, end, weight):
    # ATen: |w| < 0.5 ? self + w (end - self) : end - (end - self)(1 - w).
    a, b, w = _Z.of(self), _Z.of(end), _Z.of(weight)
    low = a + w * (b - a)
    high = b - (b - a) * (_Z(1.0) - w)
    if isinstance(weight, numbers.Number) or (isinstance(weight, torch.Tensor) and weight.device.type == "cpu"
                                              and weight.dim() == 0):
        z = low if abs(complex(weight.item() if isinstance(weight, torch.Tensor) else weight)) < 0.5 else high
    else:
        small = _abs(w) < 0.5 if w.im is not None else w.re.abs() < 0.5
        lr, li = low.parts()
        hr, hi = high.parts()
        z = _Z(torch.where(small, lr, hr), torch.where(small, li, hi))
    return _complex_result(z, [self, end] + ([weight] if isinstance(weight, torch.Tensor) else []))


_variants("lerp.Scalar lerp_.Scalar lerp.Scalar_out lerp.Tensor lerp_.Tensor lerp.Tensor_out", _lerp)


# ---------------------------------------------------------------- reductions ---
def _vector_norm(self, ord=2, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        dtype = _part_dtype(dtype) if dtype.is_complex else dtype
    return torch.linalg.vector_norm(_abs(_Z.of(self)), ord, dim, keepdim, dtype=dtype)


_variants("linalg_vector_norm linalg_vector_norm.out", _vector_norm)
_variants("norm.ScalarOpt_dim norm.out",
          lambda self, p, dim, keepdim: torch.norm(_abs(_Z.of(self)), 2 if p is None else p, dim, keepdim))


def _var(self, dim=None, correction=None, keepdim=False):
    # var of a complex = var of its real part + var of its imaginary part.
    re, im = _tensor_parts(self)
    return torch.var(re, dim, correction=correction, keepdim=keepdim) + \
        torch.var(im, dim, correction=correction, keepdim=keepdim)


def _mean(self, dim, keepdim):
    re, im = _tensor_parts(self)
    real = torch.mean(re, dim, keepdim)
    return _pack(real, torch.mean(im, dim, keepdim), real.shape, self.dtype, self.device)


_variants("var.correction var.correction_out", _var)
_variants("std.correction std.correction_out", lambda **arguments: torch.sqrt(_var(**arguments)))


def _moments(name: str, spread: Callable):
    op = None

    def run(*args, **kwargs):
        nonlocal op
        op = op or _Op(name)
        values = op.bind(args, kwargs)
        self, dim, keepdim = values["self"], values["dim"], values["keepdim"]
        if op.outs:
            raise Unsupported(f"{name}: out= forms take the CPU")
        return spread(_var(self, dim, values["correction"], keepdim)), _mean(self, dim, keepdim)

    return run


ADAPTERS["var_mean.correction"] = _moments("var_mean.correction", lambda v: v)
ADAPTERS["std_mean.correction"] = _moments("std_mean.correction", torch.sqrt)


def _polar_result(magnitude, phase, dtype):
    return _pack(magnitude * torch.cos(phase), magnitude * torch.sin(phase), magnitude.shape, dtype,
                 magnitude.device)


def _product(self, dim=None, keepdim=False, dtype=None, cumulative=False):
    """prod/cumprod from magnitudes and phases: the product of the |z| and the sum of the arguments."""
    if dtype is not None and dtype != self.dtype:
        raise Unsupported("a product with dtype= other than self's")
    z = _Z.of(self)
    magnitude, phase = _abs(z), _angle(z)
    if cumulative:
        return _polar_result(torch.cumprod(magnitude, dim), torch.cumsum(phase, dim), self.dtype)
    if dim is None:
        return _polar_result(torch.prod(magnitude), torch.sum(phase), self.dtype)
    return _polar_result(torch.prod(magnitude, dim, keepdim), torch.sum(phase, dim, keepdim), self.dtype)


_variants("prod prod.dim_int prod.int_out", _product)
_variants("cumprod cumprod.out cumprod_", lambda self, dim, dtype=None: _product(self, dim, dtype=dtype,
                                                                                  cumulative=True))


# ------------------------------------------------------------------- matmul ---
def _bilinear(product: Callable, a, b) -> _Z:
    """product(a, b) for complex a, b: four real products of the parts (contiguous copies)."""
    za, zb = _Z.of(a), _Z.of(b)
    ar, ai = (p if p is None else p.contiguous() for p in (za.re, za.im))
    br, bi = (p if p is None else p.contiguous() for p in (zb.re, zb.im))
    mul = lambda x, y: None if x is None or y is None else product(x, y)  # noqa: E731
    return _Z(_sub(mul(ar, br), mul(ai, bi)), _add(mul(ar, bi), mul(ai, br)))


def _matmul_dtype(*operands):
    dtypes = {t.dtype for t in operands}
    if len(dtypes) != 1:
        raise Unsupported("a complex product of operands of different dtypes")
    return dtypes.pop()


def _product_adapter(product: Callable, first: str, second: str):
    def compute(**arguments):
        a, b = arguments[first], arguments[second]
        dtype = _matmul_dtype(a, b)
        z = _bilinear(product, a, b)
        return _pack(z.re, z.im, z.re.shape, dtype, a.device)

    return compute


_variants("mm mm.out", _product_adapter(torch.mm, "self", "mat2"))
_variants("bmm bmm.out", _product_adapter(torch.bmm, "self", "mat2"))
_variants("dot dot.out", _product_adapter(torch.dot, "self", "tensor"))
_variants("vdot vdot.out", lambda self, other: _product_adapter(torch.dot, "self", "other")(
    self=self.conj().resolve_conj() if self.is_complex() else self, other=other))
_variants("linalg_cross linalg_cross.out",
          lambda self, other, dim=-1: _product_adapter(lambda x, y: torch.linalg.cross(x, y, dim=dim),
                                                       "self", "other")(self=self, other=other))


def _accumulated(self, product: _Z, beta, alpha, dtype) -> torch.Tensor:
    """beta * self + alpha * product, ATen's way: self is ignored (NaN included) when beta is 0."""
    if complex(alpha) != 1:
        product = _Z(*_operand(alpha)) * product
    if complex(beta) != 0:
        product = _Z(*_operand(beta)) * _Z.of(self) + product
    shape = torch.broadcast_shapes(tuple(self.shape), tuple(product.re.shape))
    return _pack(product.re, product.im, shape, dtype, self.device)


def _addmv(self, mat, vec, beta=1, alpha=1):
    dtype = _matmul_dtype(self, mat, vec)
    return _accumulated(self, _bilinear(torch.mv, mat, vec), beta, alpha, dtype)


def _addmm(self, mat1, mat2, beta=1, alpha=1):
    dtype = _matmul_dtype(self, mat1, mat2)
    return _accumulated(self, _bilinear(torch.mm, mat1, mat2), beta, alpha, dtype)


def _baddbmm(self, batch1, batch2, beta=1, alpha=1):
    dtype = _matmul_dtype(self, batch1, batch2)
    return _accumulated(self, _bilinear(torch.bmm, batch1, batch2), beta, alpha, dtype)


def _addbmm(self, batch1, batch2, beta=1, alpha=1):
    dtype = _matmul_dtype(self, batch1, batch2)
    summed = _bilinear(lambda x, y: torch.bmm(x, y).sum(0), batch1, batch2)
    return _accumulated(self, summed, beta, alpha, dtype)


_variants("addmv addmv_ addmv.out", _addmv)
_variants("addmm addmm_ addmm.out", _addmm)
_variants("baddbmm baddbmm_ baddbmm.out", _baddbmm)
_variants("addbmm addbmm_ addbmm.out", _addbmm)


# ------------------------------------------------------------ complex-only ---
def _from_parts(name: str, a, b, out, parts: Callable):
    """`out` := parts(a, b) (real, imaginary) for two real tensors of one float32/float64
    dtype, `out` of the matching complex dtype resized to their broadcast shape."""
    if a.dtype != b.dtype or a.dtype not in _WHOLE:
        raise Unsupported(f"{name}(): its two tensors must share a float32/float64 dtype")
    if out.dtype != _WHOLE[a.dtype]:
        raise Unsupported(f"{name}(): out dtype {out.dtype} for {a.dtype} parts")
    shape = torch.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    if out.shape != shape:
        out.resize_(shape)
    return _store(out, *parts(a, b))


def complex_out(real, imag, *, out):
    """torch.complex(real, imag): the parts written into out's real view."""
    return _from_parts("complex", real, imag, out, lambda re, im: (re, im))


def polar_out(abs, angle, *, out):  # noqa: A002 (aten's argument name)
    """torch.polar(abs, angle) = abs * (cos(angle) + i sin(angle))."""
    return _from_parts("polar", abs, angle, out, lambda r, t: (r * torch.cos(t), r * torch.sin(t)))


def _linspace(start, end, steps, *, out):
    a, b = complex(start), complex(end)
    part = _part_dtype(out.dtype)
    re = torch.linspace(a.real, b.real, steps, dtype=part, device=out.device)
    im = torch.linspace(a.imag, b.imag, steps, dtype=part, device=out.device)
    return _store(out.resize_(steps) if out.shape != (steps,) else out, re, im)


def _logspace(start, end, steps, base=10.0, *, out):
    # base ** linspace(start, end) = exp(linspace(start, end) * ln(base)) for a positive base.
    if not base > 0:
        raise Unsupported("logspace of complex values with a base that is not positive")
    a, b = complex(start), complex(end)
    part = _part_dtype(out.dtype)
    re = torch.linspace(a.real, b.real, steps, dtype=part, device=out.device)
    im = torch.linspace(a.imag, b.imag, steps, dtype=part, device=out.device)
    z = _exp(_Z(re, im).scale(math.log(base)))
    return _store(out.resize_(steps) if out.shape != (steps,) else out, z.re, z.im)


ADAPTERS["linspace.out"] = _linspace
ADAPTERS["logspace.out"] = _logspace


def _eye(n, m=None, *, out):
    part = _part_dtype(out.dtype)
    m = n if m is None else m
    re = torch.eye(n, m, dtype=part, device=out.device)
    return _store(out.resize_(n, m) if out.shape != (n, m) else out, re, None)


ADAPTERS["eye.out"] = lambda n, *, out: _eye(n, out=out)
ADAPTERS["eye.m_out"] = _eye

KERNELS: dict[str, Callable] = {"complex.out": complex_out, "polar.out": polar_out}
