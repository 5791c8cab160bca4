"""The `foreach` family: torch._foreach_* ops (the optimizers' multi-tensor updates).

Without these kernels a foreach op decomposes into one pointwise op per tensor: SGD with
momentum on ResNet-50 makes ~480 Triton launches a step, each paying the host cost of
an op. Here one call computes every tensor of its lists, element by element, exactly as
the per-tensor op would (same preparation: `_pointwise`'s type promotion and op choice), in
one launch of `foreach_pointwise_kernel` per group of tensors that share dtypes and
operand kinds. The kernel reads a table (one row per chunk of a tensor: output
pointer, operand pointers or immediate scalars, element range) from device memory; the
table of a call is cached by its tensors (addresses, sizes), so a training loop, whose
tensors keep their addresses, builds and uploads it once. Rows laid out like the first
one skip the per-tensor preparation (`_Template`): an optimizer's call costs a few
attribute reads per tensor on the host.

Tensors the table cannot serve take the per-tensor paths: a non-contiguous or broadcast
operand gets `launch_pointwise` (the strided kernel), an operand on another device the
per-tensor torch op. Under Triton's interpreter the table holds host addresses, so it is
used for CPU tensors only (the tests); chips whose Triton is interpreted do not route the
family (COMPILED_ONLY in __init__.py), a chip's tensors there would get a launch per tensor.
"""
from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from . import Unsupported
from . import _pointwise
from . import _kernels as K
from . import _launch
from . import family_ops
from ._common import (CAPTURE, FILLS, TableLaunch, compute_code, dense_operands, dtype_code, empty, fill_into, launch_pointwise, scalar_bits,
                      shape_of)

OPS = family_ops("foreach")
from ._kernels import BF16, F16, F32, F64, I8, I16, I32, I64, U8, _apply, _dense_operand, _to_cdt, _to_odt

_ROW = 8             # int64 fields of a table row: out, four operands, start, end, unused
_CHUNK = 16 * 1024   # elements per row: enough rows for every SM when tensors are few
_BLOCK = 1024
_TABLE_CACHE: dict[tuple, tuple] = {}  # (device, width, the group's ints) -> _table's result
_TABLE_CACHE_SIZE = 32
# Element dtypes a table pointer can be cast to (bool and complex take the per-tensor paths).
_POINTER_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
                   torch.int16, torch.int32, torch.int64}


@triton.jit
def _as_pointer(address, DT: tl.constexpr):
    if DT == F32:
        return address.to(tl.pointer_type(tl.float32))
    elif DT == F64:
        return address.to(tl.pointer_type(tl.float64))
    elif DT == F16:
        return address.to(tl.pointer_type(tl.float16))
    elif DT == BF16:
        return address.to(tl.pointer_type(tl.bfloat16))
    elif DT == I32:
        return address.to(tl.pointer_type(tl.int32))
    elif DT == I64:
        return address.to(tl.pointer_type(tl.int64))
    elif DT == I8:
        return address.to(tl.pointer_type(tl.int8))
    elif DT == U8:
        return address.to(tl.pointer_type(tl.uint8))
    else:
        return address.to(tl.pointer_type(tl.int16))


@triton.jit
def _row_operand(field, out, lin, mask, DT: tl.constexpr, KIND: tl.constexpr, OTHER: tl.constexpr,
                 CDT: tl.constexpr):
    """A row's operand: `field` is a pointer (KIND 0: laid out like the output, 1: one
    element) or an immediate (2: an int, 3: a double's bit pattern); see _dense_operand."""
    if KIND <= 1:
        return _dense_operand(_as_pointer(field, DT), lin, mask, field, KIND, OTHER, CDT)
    else:
        return _dense_operand(out, lin, mask, field, KIND, OTHER, CDT)


@triton.jit(do_not_specialize=['P0', 'P1', 'P2'])
def foreach_pointwise_kernel(table, P0, P1, P2, OP: tl.constexpr, NIN: tl.constexpr, CDT: tl.constexpr,
                             ODT: tl.constexpr, DA: tl.constexpr, DB: tl.constexpr, DC: tl.constexpr,
                             DD: tl.constexpr, KA: tl.constexpr, KB: tl.constexpr, KC: tl.constexpr,
                             KD: tl.constexpr, BLOCK: tl.constexpr):
    """pointwise_dense_kernel over a table: program i computes row i's element range of
    its output tensor (D*: operand dtype codes, K*: operand kinds)."""
    row = table + tl.program_id(0).to(tl.int64) * 8
    out = _as_pointer(tl.load(row), ODT)
    fa = tl.load(row + 1)
    fb = tl.load(row + 2)
    fc = tl.load(row + 3)
    fd = tl.load(row + 4)
    start = tl.load(row + 5)
    end = tl.load(row + 6)
    p0 = _to_cdt(P0.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    p1 = _to_cdt(P1.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    p2 = _to_cdt(P2.to(tl.int64).to(tl.float64, bitcast=True), CDT)
    for offset in range(start, end, BLOCK):
        lin = offset + tl.arange(0, BLOCK)
        mask = lin < end
        x = _row_operand(fa, out, lin, mask, DA, KA, 0, CDT)
        y = x
        z = x
        w = x
        if NIN >= 2:
            y = _row_operand(fb, out, lin, mask, DB, KB, 1, CDT)
        if NIN >= 3:
            z = _row_operand(fc, out, lin, mask, DC, KC, 1, CDT)
        if NIN >= 4:
            w = _row_operand(fd, out, lin, mask, DD, KD, 1, CDT)
        res = _apply(x, y, z, w, p0, p1, p2, OP, CDT)
        tl.store(out + lin, _to_odt(res, ODT), mask=mask)


# ------------------------------------------------------------ element ops --
# foreach name -> per overload: (the per-tensor op whose preparation _pointwise.POINTWISE has,
# the torch function a tensor falls back to).
def _same(prep_key: str, function: str, overloads=("List", "Scalar", "ScalarList", "Tensor")) -> dict:
    return {overload: (prep_key, function) for overload in overloads}


_ELEMENT: dict[str, dict] = {
    "add": _same("add.Tensor", "add"),
    "sub": _same("sub.Tensor", "sub"),
    "mul": _same("mul.Tensor", "mul"),
    "div": _same("div.Tensor", "div"),
    # maximum/minimum with a scalar are clamp_min/clamp_max, as in ATen's foreach kernels
    "maximum": {"List": ("maximum", "maximum"), **_same("clamp_min", "clamp_min", ("Scalar", "ScalarList"))},
    "minimum": {"List": ("minimum", "minimum"), **_same("clamp_max", "clamp_max", ("Scalar", "ScalarList"))},
    "clamp_min": _same("clamp_min", "clamp_min"),
    "clamp_max": _same("clamp_max", "clamp_max"),
    "pow": {"List": ("pow.Tensor_Tensor", "pow"), "Scalar": ("pow.Tensor_Scalar", "pow"),
            "ScalarList": ("pow.Tensor_Scalar", "pow"), "ScalarAndTensor": ("pow.Scalar", "pow")},
    "lerp": {"List": ("lerp.Tensor", "lerp"), **_same("lerp.Scalar", "lerp", ("Scalar", "ScalarList"))},
    "addcmul": _same("addcmul", "addcmul"),
    "addcdiv": _same("addcdiv", "addcdiv"),
    **{name: {None: (name if name != "abs" else "abs.out", name)}
       for name in ("neg", "abs", "sqrt", "rsqrt", "reciprocal", "sign", "exp", "log")},
}


def _prep_zero(self):
    return "copy", [0], self.dtype, compute_code(self.dtype)


def _prep_copy(self, src):
    return "copy", [src], self.dtype, compute_code(src.dtype)


def _check_lengths(*lists) -> int:
    n = len(lists[0])
    if n == 0:
        raise RuntimeError("Tensor list must have at least one tensor.")
    for other in lists[1:]:
        if len(other) != n:
            raise RuntimeError(f"Tensor lists must have the same number of tensors, got {n} and {len(other)}")
    return n


def _rows(name: str, overload: str | None, args, kwargs):
    """(the list that gives each row its output or shape, [(positional, keyword) per tensor])."""
    if name in ("addcmul", "addcdiv"):
        self, t1, t2, *rest = args
        value = rest[0] if rest else kwargs.get("value", kwargs.get("scalars", 1))
        n = _check_lengths(self, t1, t2)
        if overload == "Scalar":
            values = [value] * n
        else:
            values = value.tolist() if isinstance(value, torch.Tensor) else list(value)
            if isinstance(value, torch.Tensor) and value.dim() != 1:
                raise RuntimeError(f"Expected scalars to be a 1-D tensor, got {value.dim()}-D")
            _check_lengths(self, values)
        return self, [((self[i], t1[i], t2[i]), {"value": values[i]}) for i in range(n)]
    if name == "lerp":
        self, t1, weight = args
        n = _check_lengths(self, t1)
        if overload == "List":
            _check_lengths(self, weight)
            return self, [((self[i], t1[i], weight[i]), {}) for i in range(n)]
        weights = [weight] * n if overload == "Scalar" else list(weight)
        _check_lengths(self, weights)
        return self, [((self[i], t1[i], weights[i]), {}) for i in range(n)]
    if overload == "ScalarAndTensor":  # pow(scalar, exponents)
        base, exponents = args
        _check_lengths(exponents)
        return exponents, [((base, e), {}) for e in exponents]
    if overload is None:  # unary, zero_
        self = args[0]
        _check_lengths(self)
        return self, [((t,), {}) for t in self]
    self, other = args[0], args[1]
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    extra = {"alpha": alpha} if name in ("add", "sub") and overload in ("List", "Tensor") else {}
    n = _check_lengths(self)
    if overload == "List":
        _check_lengths(self, other)
        return self, [((self[i], other[i]), extra) for i in range(n)]
    if overload == "ScalarList":
        _check_lengths(self, other)
        return self, [((self[i], other[i]), extra) for i in range(n)]
    if overload == "Tensor" and other.dim() != 0:
        raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.dim()} dimensions "
                           f"and {other.numel()} elements.")
    return self, [((self[i], other), extra) for i in range(n)]


# ------------------------------------------------------------ the launch ---
def _table_serves(device: torch.device) -> bool:
    """Whether kernels can follow the table's raw addresses on `device`."""
    return device.type == "cpu" or not _launch.interpreting()


def _launch_groups(groups: dict, device: torch.device) -> None:
    """Launch every group's pending rows and empty its list in place (a _Template keeps
    appending to the list it holds)."""
    for (op, cdt, odt, kinds, dtypes, params), tensors in groups.items():
        if not tensors:
            continue
        table, rows, host_rows = cached_table(tensors, device)
        nin = len(kinds)
        kinds = kinds + (0,) * (4 - nin)
        dtypes = dtypes + (0,) * (4 - nin)
        bits = [scalar_bits(float(v), torch.float64)[0] for v in params] + [0] * (3 - len(params))
        kernel = foreach_pointwise_kernel[(rows,)](
            table, *bits, OP=K.OP_ID[op], NIN=nin, CDT=cdt, ODT=odt, DA=dtypes[0], DB=dtypes[1], DC=dtypes[2],
            DD=dtypes[3], KA=kinds[0], KB=kinds[1], KC=kinds[2], KD=kinds[3], BLOCK=_BLOCK)
        if CAPTURE.launches is not None:
            CAPTURE.launches.append(TableLaunch(kernel, (table, *bits), host_rows, _CHUNK))
        del tensors[:]


# A group lists _TENSOR ints per tensor: output address, four operand slots, element count.
_TENSOR = 6


def cached_table(tensors: list, device: torch.device, width: int = _TENSOR) -> tuple[torch.Tensor, int, torch.Tensor]:
    """_table's result for these entries, built and uploaded once while they recur."""
    key = (device, width, tuple(tensors))
    cached = _TABLE_CACHE.get(key)
    if cached is None:
        cached = _table(tensors, device, width)
        if len(_TABLE_CACHE) >= _TABLE_CACHE_SIZE:
            _TABLE_CACHE.pop(next(iter(_TABLE_CACHE)))
        _TABLE_CACHE[key] = cached
    return cached


def _table(tensors: list, device: torch.device, width: int = _TENSOR) -> tuple[torch.Tensor, int, torch.Tensor]:
    """The kernel's table (one _ROW-int row per _CHUNK elements of each tensor) on `device`,
    its row count and its host copy (what a C++ replay is recorded from). Expanded from the per-tensor list with tensor ops, not per row in
    Python: ResNet-50's 161 parameters make ~1,600 rows. A `width` of 7 gives each tensor a
    field for the rows' last slot (the fused optimizers' fifth operand, _optim.py)."""
    info = torch.tensor(tensors, dtype=torch.int64).view(-1, width)
    n = info[:, 5]
    chunks = (n + _CHUNK - 1) // _CHUNK
    owner = torch.repeat_interleave(torch.arange(len(info)), chunks)
    first = torch.cumsum(chunks, 0) - chunks  # each tensor's first row
    start = (torch.arange(len(owner)) - first[owner]) * _CHUNK
    on_chip = device.type != "cpu"
    # Uploaded from pinned memory without waiting: a copy from pageable memory waits for the
    # chip's stream to drain, so each new table (an optimizer's fresh outputs, per-tensor
    # scalars that change every step) held the host until the step's queued work had run.
    # The pinned block is reused only once the copy is done (the chip's host allocator).
    rows = torch.zeros((len(owner), _ROW), dtype=torch.int64, pin_memory=on_chip)
    rows[:, :5] = info[owner, :5]
    rows[:, 5] = start
    rows[:, 6] = torch.minimum(start + _CHUNK, n[owner])
    if width > _TENSOR:
        rows[:, 7] = info[owner, 6]
    return rows.to(device, non_blocking=on_chip), len(owner), rows


def _add_rows(tensors: list, out: torch.Tensor, dense) -> None:
    ptrs, imms, kinds = dense
    slots = [p.data_ptr() if k <= 1 else imm for p, imm, k in zip(ptrs, imms, kinds)]
    slots += [0] * (4 - len(slots))
    tensors += (out.data_ptr(), *slots, out.numel())


def _run(prep: Callable, rows, like, inplace: bool, function: str):
    device = like[0].device
    table = _table_serves(device)
    groups: dict[tuple, list] = {}
    outs = []
    template = None
    for index, ((pos, kw), lead) in enumerate(zip(rows, like)):
        if template is not None:
            out = template.row(pos, kw, lead, device)
            if out is not None:
                outs.append(out)
                continue
        out, group, dense = _row(prep, pos, kw, lead, inplace, function, device, table, groups)
        if index == 0 and group is not None:
            template = _Template.of(pos, kw, lead, out, group, dense, inplace)
        outs.append(out)
    if groups:
        _launch_groups(groups, device)
    return None if inplace else outs


# How an argument of a row relates to row 0 (_Template).
_SAME, _PER_ROW = 0, 1


class _Template:
    """Row 0 of a call, when it went to a table group: a later row whose arguments have
    row 0's dtypes, each tensor contiguous and of its row's shape, and whose other
    arguments are row 0's own objects (a shared scalar, alpha, a 0-dim tensor), has row
    0's preparation (type promotion, op choice, operand kinds depend on nothing else), so
    its table rows are written without preparing it again. A typical optimizer call's
    rows all qualify: a few attribute reads per tensor instead of the whole preparation."""

    __slots__ = ("group", "values", "kw_names", "classes", "dtypes", "same", "per_row", "slots",
                 "per_row_slots", "aliases", "out_dtype", "inplace", "lead_zero_dim")

    @classmethod
    def of(cls, pos, kw, lead, out, group, dense, inplace):
        values = (*pos, *kw.values())
        self = cls()
        self.group, self.values, self.inplace = group, values, inplace
        self.kw_names = (len(pos), tuple(kw))
        self.out_dtype = out.dtype
        self.lead_zero_dim = lead.dim() == 0
        self.classes, self.dtypes = [], []
        for v in values:
            row_tensor = isinstance(v, torch.Tensor) and (v is lead or (v.dim() and v.shape == lead.shape))
            if not row_tensor and isinstance(v, torch.Tensor) and v.dim():
                return None  # a shared tensor broadcast over rows of other shapes: not row 0's layout
            self.classes.append(_PER_ROW if row_tensor else _SAME)
            self.dtypes.append(v.dtype if row_tensor else None)
        if inplace and not any(v is lead for v in values):
            return None
        self.same = [j for j, kind in enumerate(self.classes) if kind == _SAME]
        self.per_row = [(j, dtype) for j, (kind, dtype) in enumerate(zip(self.classes, self.dtypes)) if kind == _PER_ROW]
        # Row 0's table slots; one holding a per-row tensor's address is refilled from the
        # argument that is (the same object as) that operand in each later row.
        ptrs, imms, kinds = dense
        self.slots = [p.data_ptr() if k <= 1 else imm for p, imm, k in zip(ptrs, imms, kinds)]
        self.slots += [0] * (4 - len(self.slots))
        self.per_row_slots = []
        self.aliases = []
        for k, (p, kind) in enumerate(zip(ptrs, kinds)):
            if kind > 1:
                continue  # an immediate: from a shared argument, the same in every row
            where = [j for j, v in enumerate(values) if v is p]
            if not where:
                return None  # an operand the preparation made: only a full preparation remakes it
            if self.classes[where[0]] == _PER_ROW:
                self.per_row_slots.append((k, where[0]))
            # Row 0 passes one tensor in several places (AdamW's addcmul_(v, g, g)): a later
            # row has row 0's preparation only where it does the same.
            self.aliases += [(where[0], j) for j in where[1:] if (where[0], j) not in self.aliases]
        return self

    def row(self, pos, kw, lead, device):
        """This row's output with its table rows added, or None: prepare it in full."""
        values = (*pos, *kw.values())
        if (len(pos), tuple(kw)) != self.kw_names or (lead.dim() == 0) != self.lead_zero_dim:
            return None
        for j in self.same:
            if values[j] is not self.values[j]:
                return None
        for i, j in self.aliases:
            if values[i] is not values[j]:
                return None
        shape = lead.shape
        for j, dtype in self.per_row:
            v = values[j]
            if (type(v) is not torch.Tensor and not isinstance(v, torch.Tensor)) or v.dtype != dtype \
                    or v.shape != shape or not v.is_contiguous() or v.device != device:
                return None
        if self.inplace:
            out = lead  # one of the per-row tensors checked above (_run's rows pass it)
        else:
            out = empty(shape, self.out_dtype, device)
        slots = self.slots[:]
        for k, j in self.per_row_slots:
            slots[k] = values[j].data_ptr()
        n = out.numel()
        if n:
            self.group += (out.data_ptr(), *slots, n)
        return out


def _row(prep, pos, kw, lead, inplace, function, device, table, groups):
    """One tensor of a foreach call: its output (computed now or added to a table group),
    the group's list and the row's operands (_dense_operands), or None for both."""
    tensors = [a for a in (*pos, *kw.values()) if isinstance(a, torch.Tensor)]
    if any(t.device != device and not (t.dim() == 0 and t.device.type == "cpu") for t in tensors):
        _launch_groups(groups, device)
        return _torch_call(function, pos, kw, inplace), None, None  # another device: the op's own dispatch
    try:
        op, operands, rdt, cdt, *params = prep(*pos, **kw)
        params = tuple(params[0]) if params else ()
        shape = shape_of(operands if not inplace else [lead, *operands])
        if inplace:
            out = lead
            if tuple(shape) != tuple(out.shape):
                raise RuntimeError(f"output with shape {list(out.shape)} doesn't match the broadcast shape "
                                   f"{list(shape)}")
            if not torch.can_cast(rdt, out.dtype):
                raise RuntimeError(f"result type {rdt} can't be cast to the desired output type {out.dtype}")
        else:
            out = empty(shape, rdt, device)
        if op in FILLS:
            _launch_groups(groups, device)
            fill_into(out, FILLS[op])
            return out, None, None
        dense = dense_operands(out, operands) if table and out.numel() else None
        if dense is not None and out.dtype in _POINTER_DTYPES and all(
                k > 1 or p.dtype in _POINTER_DTYPES for p, k in zip(dense[0], dense[2])):
            kinds = tuple(dense[2])
            dtypes = tuple(dtype_code(p.dtype) if k <= 1 else 0 for p, k in zip(dense[0], kinds))
            group = groups.setdefault((op, cdt, dtype_code(out.dtype), kinds, dtypes, params), [])
            _add_rows(group, out, dense)
            return out, group, dense
        _launch_groups(groups, device)
        launch_pointwise(op, out, operands, cdt, params)
        return out, None, None
    except Unsupported:
        _launch_groups(groups, device)
        return _torch_call(function, pos, kw, inplace), None, None


def _torch_call(function: str, pos, kw, inplace: bool):
    if inplace:
        getattr(pos[0], function + "_")(*pos[1:], **kw)
        return pos[0]
    return getattr(torch, function)(*pos, **kw)


def _make(op_name: str) -> Callable:
    base, _, overload = op_name.partition(".")
    name = base[len("_foreach_"):]
    inplace = name.endswith("_")
    name = name.rstrip("_")
    if name == "zero":
        def zero_(self):
            _run(_prep_zero, [((t,), {}) for t in self], self, True, "zero")
        return zero_
    if name == "copy":
        def copy_(self, src, non_blocking=False):
            n = _check_lengths(self, src)
            _run(_prep_copy, [((self[i], src[i]), {}) for i in range(n)], self, True, "copy")
        return copy_
    prep_key, function = _ELEMENT[name][overload or None]
    prep = _pointwise.POINTWISE[prep_key].prep

    def kernel(*args, **kwargs):
        like, rows = _rows(name, overload or None, args, kwargs)
        return _run(prep, rows, like, inplace, function)

    return kernel


KERNELS: dict[str, Callable] = {op: _make(op) for op in OPS}
# Ops whose preparation reads the values of a scalar list, not only their types (pow picks
# square, sqrt, ... by each exponent): a C++ replay, keyed on the types, would not (_triton_fast).
VALUE_DEPENDENT = frozenset({"_foreach_pow.ScalarList", "_foreach_pow_.ScalarList"})

# Compiled mode: launches skip Triton's per-call argument binding (_launch.py).
_launch.install(globals())
