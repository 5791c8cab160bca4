"""The machinery every kernel module of the library shares (imported lazily: needs triton).

Dtype codes and type promotion, allocation and views (`empty`, `contig`, `resize_out`),
scalars passed exactly (`scalar_bits`, `fill_into`, `operand`), the pointwise launch
(`launch_pointwise`, `copy_into`, the `CAPTURE` of launches for C++ replay) and the
row reduction (`reduce_dims`). Only metadata / allocation / views are done with torch
here; every number is produced by a Triton kernel.
"""
from __future__ import annotations

import struct
import threading
from typing import NamedTuple

import torch

from . import Unsupported
from . import _kernels as K

# ---------------------------------------------------------------- dtypes --
# The kernels' dtype codes (the `*DT` constexprs of _kernels.py).
DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3, torch.int32: 4,
               torch.int64: 5, torch.bool: 6, torch.int8: 7, torch.uint8: 8, torch.int16: 9}
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
BLOCK = 1024
MAX_DIMS = 6


def dtype_code(dtype: torch.dtype) -> int:
    """The kernels' code for a storage dtype (an `ODT`); Unsupported for dtypes they lack."""
    try:
        return DTYPE_CODES[dtype]
    except KeyError:
        raise Unsupported(f"dtype {dtype} is not supported by the Triton kernels") from None


def compute_code(dtype: torch.dtype) -> int:
    """Compute dtype code: fp16/bf16 compute in fp32, small ints/bool in int32."""
    if dtype == torch.float64:
        return 1
    if dtype in FLOATS:
        return 0
    if dtype == torch.int64:
        return 5
    dtype_code(dtype)
    return 4


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The torch dtype of a buffer in `dtype`'s compute precision (small ints widen to int64)."""
    return {0: torch.float32, 1: torch.float64, 4: torch.int64, 5: torch.int64}[compute_code(dtype)]


def is_float(dtype) -> bool:
    return dtype in FLOATS


def float_of(dtype) -> torch.dtype:
    """`dtype` if floating, else the default dtype (the result of ops that float integers)."""
    return dtype if is_float(dtype) else torch.get_default_dtype()


def is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def promote(*args) -> torch.dtype:
    """torch.result_type semantics over any number of tensors / Python scalars."""
    args = [a for a in args if a is not None]
    if len(args) == 1:
        a = args[0]
        return a.dtype if is_tensor(a) else scalar_dtype(a)
    if len(args) == 2:
        return torch.result_type(args[0], args[1])
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
    return elementwise_dtypes(*args, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]


def scalar_dtype(v) -> torch.dtype:
    """The dtype a Python scalar takes on its own (bool, int64 or the default float)."""
    if isinstance(v, bool):
        return torch.bool
    if isinstance(v, int):
        return torch.int64
    return torch.get_default_dtype()


def device_of(*args) -> torch.device:
    """The device of an op's result: the first non-CPU or non-0-dim tensor's."""
    dev = None
    for a in args:
        if is_tensor(a):
            if a.device.type != "cpu" or a.dim() > 0:
                return a.device
            dev = dev or a.device
    return dev or torch.device("cpu")


# ---------------------------------------------------------- launch sizes --
# Host-side helpers: triton.cdiv / triton.next_power_of_2 are Triton constexpr functions,
# about 4 us per call from Python, and a small op calls them on every launch.
def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (0 for n <= 0), as triton.next_power_of_2."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def grid1(n):
    """The 1-d grid of a BLOCK-per-program launch over n elements."""
    return (-(-n // BLOCK),)


def pad6(shape, strides_list):
    """Coalesce dims (drop size-1 dims, merge contiguous runs), pad to 6 dims."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    sh = [shape[i] for i in dims]
    sts = [[st[i] for i in dims] for st in strides_list]
    i = len(sh) - 1
    while i > 0:
        if all(st[i - 1] == st[i] * sh[i] for st in sts):
            sh[i - 1] *= sh[i]
            del sh[i]
            for st in sts:
                st[i - 1] = st[i]
                del st[i]
        i -= 1
    if len(sh) > MAX_DIMS:
        raise Unsupported("more than 6 non-mergeable dims")
    pad = MAX_DIMS - len(sh)
    return [1] * pad + sh, [[0] * pad + st for st in sts]


# ------------------------------------------------------------ scalars/fill --
def scalar_bits(value, dtype):
    """(the kernel argument, is_float) that passes `value` exactly: a double as its int64 bit pattern."""
    if is_float(dtype):
        return struct.unpack("<q", struct.pack("<d", float(value)))[0], True
    if dtype == torch.bool:
        return int(bool(value)), False
    return int(value), False


def fill_into(t: torch.Tensor, value) -> torch.Tensor:
    """Fill a (strided) tensor with a Python scalar, exactly."""
    n = t.numel()
    if n == 0:
        return t
    if CAPTURE.launches is not None:
        CAPTURE.launches.append(None)  # not a launch a C++ replay makes
    bits, is_f = scalar_bits(value, t.dtype)
    if not is_f and isinstance(value, float) and t.dtype != torch.bool:
        bits = int(value)
    sh, (st,) = pad6(list(t.shape), [list(t.stride())])
    K.fill_kernel[grid1(n)](t, n, *sh, *st, bits, IS_FLOAT=is_f, ODT=dtype_code(t.dtype), BLOCK=BLOCK)
    return t


def scalar_tensor(value, device, dtype=None) -> torch.Tensor:
    dtype = dtype or (torch.float64 if isinstance(value, float) else scalar_dtype(value))
    t = torch.empty((), dtype=dtype, device=device)
    return fill_into(t, value)


def operand(v, device) -> torch.Tensor:
    """Tensor operand on `device`; Python scalars and 0-dim CPU tensors become 0-dim device tensors."""
    if not is_tensor(v):
        return scalar_tensor(v, device)
    if v.device != device and v.dim() == 0 and v.device.type == "cpu":
        return scalar_tensor(v.item(), device, v.dtype)
    return v


# ------------------------------------------------------- pointwise launch --
def launch_pointwise(op: str, out: torch.Tensor, inputs, cdt: int, params=()) -> torch.Tensor:
    """out = op(*inputs) elementwise; inputs are broadcast (by strides) to out's shape.
    `params` (up to 3 Python numbers) are the op's scalar parameters, passed exactly."""
    check_kernel_dtypes(inputs, out.dtype, out)
    n = out.numel()
    if n == 0:
        return out
    dev = out.device
    bits = [scalar_bits(float(v), torch.float64)[0] for v in params] + [0] * (3 - len(params))
    dense = dense_operands(out, inputs)
    capture = CAPTURE.launches
    if dense is not None:
        ptrs, imms, kinds = dense
        nin = len(ptrs)
        pad = 4 - nin
        ka, kb, kc, kd = kinds + [_DENSE] * pad
        values = (out, *ptrs, *([out] * pad), n, *imms, *([0] * pad), *bits)
        kernel = K.pointwise_dense_kernel[grid1(n)](*values, OP=K.OP_ID[op], NIN=nin, CDT=cdt,
                                                    ODT=dtype_code(out.dtype), KA=ka, KB=kb, KC=kc, KD=kd,
                                                    BLOCK=BLOCK)
        if capture is not None:
            capture.append(DenseLaunch(kernel, values, numel_index=5, elements_per_program=BLOCK))
        return out
    if capture is not None:
        capture.append(None)  # the strided kernel: not replayed
    ins = [operand(v, dev).expand(out.shape) for v in inputs]
    shape = list(out.shape)
    sh, sts = pad6(shape, [list(out.stride())] + [list(t.stride()) for t in ins])
    nin = len(ins)
    ptrs = ins + [ins[0]] * (4 - nin)
    sts = sts + [sts[1]] * (4 - nin)
    flat = [s for st in sts for s in st]
    K.pointwise_kernel[grid1(n)](out, *ptrs, n, *sh, *flat, *bits, OP=K.OP_ID[op], NIN=nin, CDT=cdt,
                                 ODT=dtype_code(out.dtype), BLOCK=BLOCK)
    return out


class _Capture(threading.local):
    """Kernel launches of the call in progress on this thread, while a caller collects
    them (torch_fl._triton_fast records a pointwise call's single dense launch for its
    C++ replay): a DenseLaunch, or None for a launch no replay makes."""
    launches: list | None = None


CAPTURE = _Capture()


class DenseLaunch(NamedTuple):
    """One launch of pointwise_dense_kernel: the compiled kernel, its parameter values in
    order (tensors, then integers), which of them is the element count, and how many
    elements one program covers (the grid is the count divided by that, rounded up)."""
    kernel: object
    values: tuple
    numel_index: int
    elements_per_program: int


class TableLaunch(NamedTuple):
    """One launch of _foreach.foreach_pointwise_kernel: the compiled kernel, its parameter
    values in order (the table, then integers), the table's rows on the host, and how many
    elements of a tensor one row covers."""
    kernel: object
    values: tuple
    rows: torch.Tensor
    chunk: int


_INT64 = (-(1 << 63), (1 << 63) - 1)
# pointwise_dense_kernel's operand kinds (_dense_operand in _kernels.py)
_DENSE, _ZERO_DIM, _IMMEDIATE, _IMMEDIATE_FLOAT = 0, 1, 2, 3


def dense_operands(out: torch.Tensor, inputs):
    """(pointers, immediates, kinds) for pointwise_dense_kernel, or None when an operand
    needs the strided kernel: a contiguous output, each input a contiguous tensor of the
    output's shape, a 0-dim tensor on its device, or a scalar passed by value (no
    device tensor, no fill launch)."""
    if not out.is_contiguous():
        return None
    ptrs, imms, kinds = [], [], []
    for v in inputs:
        if isinstance(v, torch.Tensor):
            if v.dim() == 0 and v.device.type == "cpu" and out.device.type != "cpu":
                if v.dtype not in DTYPE_CODES:
                    return None
                v = v.item()  # a host scalar: by value, as operand would fill it
            elif v.device != out.device or not (v.dim() == 0 or (v.shape == out.shape and v.is_contiguous())):
                return None
            else:
                ptrs.append(v)
                imms.append(0)
                kinds.append(_ZERO_DIM if v.dim() == 0 else _DENSE)
                continue
        if isinstance(v, float):
            ptrs.append(out)
            imms.append(scalar_bits(v, torch.float64)[0])
            kinds.append(_IMMEDIATE_FLOAT)
        elif isinstance(v, int) and _INT64[0] <= v <= _INT64[1]:  # bool included
            ptrs.append(out)
            imms.append(int(v))
            kinds.append(_IMMEDIATE)
        else:
            return None
    return ptrs, imms, kinds


def copy_into(dst: torch.Tensor, src) -> torch.Tensor:
    """Strided -> strided copy with dtype conversion (src broadcast to dst). A helper, not an op."""
    s = operand(src, dst.device)
    return launch_pointwise("copy", dst, [s], compute_code(s.dtype))


# ------------------------------------------------------ allocation / views --
def empty(shape, dtype, device):
    return torch.empty(tuple(shape), dtype=dtype, device=device)


def contig(x: torch.Tensor, dtype=None) -> torch.Tensor:
    """x itself when contiguous in `dtype`, else a contiguous copy converted to it."""
    dtype = dtype or x.dtype
    if x.dtype == dtype and x.is_contiguous():
        return x
    return copy_into(empty(x.shape, dtype, x.device), x)


def resize_out(out: torch.Tensor, shape) -> torch.Tensor:
    """An out= tensor resized to `shape` when it has another (as ATen's resize_output)."""
    if tuple(out.shape) != tuple(shape):
        out.resize_(tuple(shape))
    return out


def shape_of(operands):
    """The broadcast shape of a pointwise op's operands (tensors and scalars)."""
    shape = ()
    for o in operands:  # equal shapes and scalars (the common case): without broadcast_shapes' cost
        if isinstance(o, torch.Tensor) and o.dim():
            if not shape:
                shape = o.shape
            elif o.shape != shape:
                return torch.broadcast_shapes(*[tuple(t.shape) for t in operands if isinstance(t, torch.Tensor)])
    return tuple(shape)


def result_strides(shape, operands):
    """The strides of a pointwise result of `shape`, laid out as TensorIterator lays out a new
    output (TensorIterator::reorder_dimensions): dims ordered by the operands' strides, the
    first operand that orders a pair deciding it, broadcast (stride 0) dims left undecided,
    equal strides ordered by size. So a result follows its inputs' layout (a transposed input
    gives a transposed result, as on the CPU and CUDA, and as torch's meta functions say:
    compiled graphs view results as those say). None: contiguous."""
    ndim = len(shape)
    layouts = []
    for o in operands:
        if isinstance(o, torch.Tensor) and o.dim():
            if o.is_contiguous() and tuple(o.shape) == tuple(shape):
                if not layouts:
                    return None  # the first operand is contiguous of the result's shape: so is the result
                continue
            strides = [0] * ndim  # 0: a dim the operand broadcasts (missing, or 1 against more)
            for d, (size, stride) in enumerate(zip(reversed(o.shape), reversed(o.stride()))):
                strides[ndim - 1 - d] = 0 if size == 1 and shape[ndim - 1 - d] != 1 else stride
            layouts.append(strides)
    if not layouts or ndim < 2:
        return None

    def should_swap(dim0, dim1):  # 1: dim0 goes outside dim1; -1: inside; 0: undecided
        for strides in layouts:
            s0, s1 = strides[dim0], strides[dim1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[dim0] > shape[dim1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # innermost first
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    if perm == list(range(ndim - 1, -1, -1)):
        return None
    result = [0] * ndim
    stride = 1
    for d in perm:
        result[d] = stride
        stride *= max(shape[d], 1)
    return result


def empty_result(shape, dtype, device, operands):
    """A new pointwise result, laid out as `result_strides` says."""
    strides = result_strides(shape, operands)
    if strides is None:
        return empty(shape, dtype, device)
    return torch.empty_strided(tuple(shape), strides, dtype=dtype, device=device)


# Pointwise "ops" whose result does not depend on the values: a fill instead of a launch.
FILLS = {"fill_one": 1, "fill_zero": 0}


def check_kernel_dtypes(operands, result_dtype, out=None):
    """Decline (Unsupported: the call takes the next chain step) before anything is
    allocated when an operand, the result or the given output has a dtype the kernels lack:
    Triton has no complex types. Checked first, so that even a zero-element call, which
    launches nothing, never returns a result in a substitute dtype."""
    dtypes = [v.dtype for v in operands if isinstance(v, torch.Tensor)] + [result_dtype]
    if out is not None:
        dtypes.append(out.dtype)
    require_kernel_dtypes(dtypes)


def require_kernel_dtypes(dtypes):
    for dtype in dtypes:
        if dtype not in DTYPE_CODES:
            raise Unsupported(f"dtype {dtype} is not supported by the Triton kernels")


# ------------------------------------------------------------ reductions --
def norm_dims(dim, ndim):
    """A reduction's `dim` argument (None, an int, a list; empty = all) as sorted dims."""
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    dim = list(dim)
    if not dim:
        return list(range(ndim))
    nd = max(ndim, 1)
    out = sorted({d % nd for d in dim})
    return [d for d in out if d < ndim] if ndim else []


def reduce_dims(x, dim, keepdim, rop, cdtype, odtype, out=None, p=0.0, corr=0.0):
    """Generic row reduction: reduced dims are permuted last and packed into a
    contiguous (M, K) buffer of the compute dtype, then reduce_kernel reduces rows."""
    ndim = x.dim()
    dims = norm_dims(dim, ndim)
    kept = [d for d in range(ndim) if d not in dims]
    xp = x.permute(kept + dims) if ndim else x
    m = 1
    for d in kept:
        m *= x.shape[d]
    k = 1
    for d in dims:
        k *= x.shape[d]
    oshape = [1 if d in dims else x.shape[d] for d in range(ndim)] if keepdim else [x.shape[d] for d in kept]
    res = empty(oshape, odtype, x.device)
    if rop in ("sum", "mean") and m > 1 and k > 1 and sorted(dims) == list(range(len(dims))) and x.is_contiguous():
        reduce_leading(x, res, k, m, rop == "mean", cdtype)
    elif m > 0:
        buf = contig(xp, cdtype)
        bk = min(max(next_power_of_2(max(k, 1)), 16), 256)
        bm = max(1, min(next_power_of_2(m), 4096 // bk))
        K.reduce_kernel[(cdiv(m, bm),)](buf, res, m, k, float(p), float(corr), OP=K.RED_ID[rop],
                                        CDT=compute_code(cdtype), ODT=dtype_code(odtype), BLOCK_M=bm, BLOCK_K=bk)
    if out is None:
        return res
    resize_out(out, oshape)
    return copy_into(out, res)


# Programs a leading-dim reduction aims for: a few per multiprocessor of a large GPU, so a
# (tokens, features) bias gradient with few feature blocks still fills the device.
_LEADING_PROGRAMS = 512


def reduce_leading(x, res, k, m, mean, cdtype):
    """Sum (or mean) over the leading k rows of contiguous x seen as (k, m), into res (m
    elements), reading x where it lies: no transposed copy. Rows are split over several
    programs when the columns alone are too few to fill the device; their partial sums (in the
    compute dtype) are summed by a second launch."""
    bk, bm = 32, 64 if m >= 64 else max(16, next_power_of_2(m))
    blocks = cdiv(m, bm)
    split = max(1, min(cdiv(k, bk * 4), _LEADING_PROGRAMS // blocks))
    per = cdiv(cdiv(k, split), bk) * bk
    split = cdiv(k, per)
    cdt = compute_code(cdtype)
    if split == 1:
        K.reduce_leading_kernel[(blocks, 1)](x, res, k, m, per, k, MEAN=mean, CDT=cdt, ODT=dtype_code(res.dtype),
                                             BLOCK_K=bk, BLOCK_M=bm)
        return
    partial = empty((split, m), cdtype, x.device)
    K.reduce_leading_kernel[(blocks, split)](x, partial, k, m, per, k, MEAN=False, CDT=cdt, ODT=dtype_code(cdtype),
                                             BLOCK_K=bk, BLOCK_M=bm)
    per2 = cdiv(split, bk) * bk
    K.reduce_leading_kernel[(blocks, 1)](partial, res, split, m, per2, k, MEAN=mean, CDT=cdt,
                                         ODT=dtype_code(res.dtype), BLOCK_K=bk, BLOCK_M=bm)


# ---------------------------------------------------------------- rows ----
def rows_last(x, dim):
    """(contiguous (M, K) compute buffer, moved shape) with `dim` moved last."""
    nd = max(x.dim(), 1)
    dim = dim % nd
    xv = x.view(1) if x.dim() == 0 else x
    xm = xv.movedim(dim, -1)
    return xm, dim


def atleast1d(t):
    """A 0-dim tensor viewed as 1-d (the index kernels need a dim to walk)."""
    return t.view(1) if t.dim() == 0 else t


def acc_dtype(dt):
    """The dtype an atomic accumulation runs in: Triton's atomic add has no 8- or 16-bit
    integer (or bool) form, so those accumulate in int32 and wrap on the way back, as
    ATen's own int8 sums do; 16-bit floats accumulate in float32."""
    if dt in (torch.float16, torch.bfloat16):
        return torch.float32
    if dt in (torch.int8, torch.uint8, torch.int16, torch.bool):
        return torch.int32
    return dt
