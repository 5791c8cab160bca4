"""torch.distributed for generated chips: the spec's `distributed` backend.

`register_chip_backend(spec, _C)` (called by the generated backend at load) registers the
spec's backend with `torch.distributed.Backend.register_backend(..., devices=[chip])`.
A chip with a collective library (`distributed.library`: NCCL-shaped hooks, the simulated
NPU's libsimnpu_ccl) gets the runtime's C++ backend over it (csrc/src/collectives.cpp):
collectives on the chip's memory, ordered on its streams. For a chip without one
(`staging: gloo`) every collective stages through gloo on host memory: chip tensors are
copied to the host, gloo runs the collective, results are copied back.

`get_backend_config(device)` says how to call `init_process_group` for a device, and
`init_process_group(backend="nccl")` on a chip whose spec `replaces: [nccl]` uses the
chip's backend (one warning), so CUDA scripts run unchanged.
"""
from __future__ import annotations

import collections
import datetime
import functools
import inspect
import os
import threading
import warnings

import torch
import torch.distributed as dist

__all__ = ["StagedProcessGroup", "get_backend_config", "register_chip_backend"]

# backend name -> the generated spec module that registered it
_specs: dict = {}


def _done(result):
    """A completed Work whose future holds `result` (the collective ran synchronously)."""
    future = torch.futures.Future()
    future.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(future)


def _host(t: torch.Tensor) -> torch.Tensor:
    return t if t.device.type == "cpu" else t.to("cpu")


def _back(dst: torch.Tensor, host: torch.Tensor) -> None:
    if host is not dst:
        dst.copy_(host)   # synchronous: the host buffer may be staged into again at once


class _HostBuffers:
    """Host buffers staging a chip's tensors, reused from call to call: a fresh host allocation
    per collective paid its page faults every time (the to-host step, allocation included, was a
    third of a 64 MiB all_reduce in docs/benchmarks.md). One buffer per (position in the call,
    dtype, shape); past `limit_bytes` the least recently used go."""

    def __init__(self, limit_bytes: int = 1 << 30):
        self._buffers: collections.OrderedDict = collections.OrderedDict()
        self._bytes = 0
        self._limit = limit_bytes
        self._lock = threading.Lock()

    def staged(self, tensors) -> list:
        """Host copies of `tensors` in this group's buffers (CPU tensors as they are)."""
        out = []
        with self._lock:
            for position, t in enumerate(tensors):
                if t.device.type == "cpu":
                    out.append(t)
                    continue
                key = (position, t.dtype, tuple(t.shape))
                buffer = self._buffers.pop(key, None)
                if buffer is None:
                    buffer = torch.empty(t.shape, dtype=t.dtype)
                    self._bytes += buffer.nbytes
                self._buffers[key] = buffer
                buffer.copy_(t)
                out.append(buffer)
            while self._bytes > self._limit and len(self._buffers) > len(out):
                _, dropped = self._buffers.popitem(last=False)
                self._bytes -= dropped.nbytes
        return out


class StagedProcessGroup(dist.ProcessGroup):
    """A ProcessGroup for a chip's tensors whose collectives run on a gloo group over host
    copies. Collectives complete before they return (their Work is already done)."""

    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta, backend_name: str):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._name = backend_name
        self._buffers = _HostBuffers()   # the in-place collectives' staging (all_reduce, DDP's path)

    def getBackendName(self) -> str:
        return self._name

    @property
    def gloo(self):
        return self._gloo

    # Each collective: host copies in, gloo, results back to the chip tensors.

    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        host = self._buffers.staged(tensors)
        self._gloo.allreduce(host, opts).wait()
        for t, h in zip(tensors, host):
            _back(t, h)
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceCoalescedOptions()
        host = self._buffers.staged(tensors)
        self._gloo.allreduce_coalesced(host, opts).wait()
        for t, h in zip(tensors, host):
            _back(t, h)
        return _done(tensors)

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        host = self._buffers.staged(tensors)
        self._gloo.broadcast(host, opts).wait()
        for t, h in zip(tensors, host):
            _back(t, h)
        return _done(tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        host_out = [[_host(t) for t in outs] for outs in output_tensors]
        self._gloo.allgather(host_out, [_host(t) for t in input_tensors], opts).wait()
        for outs, hosts in zip(output_tensors, host_out):
            for t, h in zip(outs, hosts):
                _back(t, h)
        return _done(output_tensors)

    def all_gather_single(self, output, input, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        host_out = _host(output)
        self._gloo._allgather_base(host_out, _host(input), opts).wait()
        _back(output, host_out)
        return _done([output])

    def _reduce_scattered(self, inputs: list, opts) -> torch.Tensor:
        """This rank's share of the reduction of `inputs` (one tensor per rank). Staged as an
        allreduce of all shares: gloo's reduce_scatter does not take every reduce op."""
        stacked = torch.stack([_host(t) for t in inputs])
        allreduce = dist.AllreduceOptions()
        allreduce.reduceOp = opts.reduceOp
        self._gloo.allreduce([stacked], allreduce).wait()
        return stacked[self.rank()]

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        for out, ins in zip(output_tensors, input_tensors):
            out.copy_(self._reduce_scattered(list(ins), opts))
        return _done(output_tensors)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        output.copy_(self._reduce_scattered(list(input.chunk(self.size())), opts).view_as(output))
        return _done([output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        host_out = [_host(t) for t in output_tensors]
        self._gloo.alltoall(host_out, [_host(t) for t in input_tensors], opts).wait()
        for t, h in zip(output_tensors, host_out):
            _back(t, h)
        return _done(output_tensors)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        host_out = _host(output)
        self._gloo.alltoall_base(host_out, _host(input), output_split_sizes or [], input_split_sizes or [],
                                 opts).wait()
        _back(output, host_out)
        return _done([output])

    def reduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.ReduceOptions()
        host = self._buffers.staged(tensors)
        self._gloo.reduce(host, opts).wait()
        if self.rank() == opts.rootRank:
            for t, h in zip(tensors, host):
                _back(t, h)
        return _done(tensors)

    def gather(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else dist.GatherOptions()
        host_out = [[_host(t) for t in outs] for outs in output_tensors]
        self._gloo.gather(host_out, [_host(t) for t in input_tensors], opts).wait()
        for outs, hosts in zip(output_tensors, host_out):
            for t, h in zip(outs, hosts):
                _back(t, h)
        return _done(output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else dist.ScatterOptions()
        host_out = [_host(t) for t in output_tensors]
        self._gloo.scatter(host_out, [[_host(t) for t in ins] for ins in input_tensors], opts).wait()
        for t, h in zip(output_tensors, host_out):
            _back(t, h)
        return _done(output_tensors)

    def barrier(self, opts=None):
        self._gloo.barrier(opts if opts is not None else dist.BarrierOptions()).wait()
        return _done([])

    def send(self, tensors, dst: int, tag: int = 0):
        self._gloo.send([_host(t) for t in tensors], dst, tag).wait()
        return _done(tensors)

    def recv(self, tensors, src: int, tag: int = 0):
        host = [_host(t) for t in tensors]
        self._gloo.recv(host, src, tag).wait()
        for t, h in zip(tensors, host):
            _back(t, h)
        return _done(tensors)


def register_chip_backend(spec, _C) -> None:
    """Register the generated chip's backend (its spec module's DIST_* facts); idempotent. With
    a collective library (`distributed.library`) the backend is the runtime's C++ backend over
    it (`_C._create_collective_backend`); without, collectives stage through gloo."""
    name = spec.DIST_BACKEND
    if name in _specs or not dist.is_available():
        return
    if spec.DIST_LIBRARY:
        def create(store, rank, size, timeout):
            return _C._create_collective_backend(store, rank, size, timeout)
    elif spec.DIST_STAGING == "gloo":
        if not dist.is_gloo_available():
            return   # this torch has no gloo: nothing to stage through

        def create(store, rank, size, timeout):
            return StagedProcessGroup(store, rank, size, timeout, name)
    else:
        raise RuntimeError(f"{spec.SPEC_SOURCE}: distributed.staging {spec.DIST_STAGING!r} is not supported")

    dist.Backend.register_backend(name, create, devices=[spec.CHIP])
    _specs[name] = spec
    if spec.DIST_REPLACES:
        _map_replaced_names()


# The device a replaceable backend natively serves.
_NATIVE_DEVICE = {"nccl": "cuda", "xccl": "xpu", "hccl": "npu"}


def _replacement(backend) -> tuple[str, str] | None:
    """What `backend` ("nccl") means with a chip backend registered, and the warning saying so:
    the chip's backend where the native library is absent; where it is there too (NCCL on a
    CUDA machine, beside `nvgpu`), both, one per device ("cuda:nccl,nvgpu:nvgpuccl"), so the
    chip's tensors have a backend as the native device's keep theirs."""
    if not isinstance(backend, str) or ":" in backend:
        return None
    wanted = backend.lower()
    for name, spec in _specs.items():
        if wanted not in spec.DIST_REPLACES:
            continue
        where = f"({spec.SPEC_SOURCE}: distributed.replaces)"
        if not _natively_available(wanted):
            return name, (f"torch.distributed backend {backend!r} is not available here; using the {spec.CHIP} "
                          f"chip's {name!r} instead {where}")
        native = _NATIVE_DEVICE.get(wanted)
        if native is None or native == spec.CHIP:
            return None
        return f"{native}:{wanted},{spec.CHIP}:{name}", (
            f"torch.distributed backend {backend!r} serves {native} tensors; {spec.CHIP} tensors in the same "
            f"group use the chip's {name!r} {where}")
    return None


def _natively_available(backend: str) -> bool:
    if backend == "nccl":
        return dist.is_nccl_available() and torch.cuda.is_available()
    if backend == "gloo":
        return dist.is_gloo_available()
    if backend == "mpi":
        return dist.is_mpi_available()
    if backend == "ucc":
        return dist.is_ucc_available()
    if backend == "xccl":
        return dist.is_xccl_available()
    return False


_warned: set = set()


def _map_replaced_names() -> None:
    """Make torch.distributed.init_process_group / new_group accept the replaced names."""
    from torch.distributed import distributed_c10d as c10d

    if getattr(c10d.init_process_group, "_torch_fl_wrapped", False):
        return

    def mapped(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            bound = signature.bind_partial(*args, **kwargs)
            backend = bound.arguments.get("backend")
            replacement = _replacement(backend)
            if replacement is not None:
                chip_backend, message = replacement
                if (backend, chip_backend) not in _warned:
                    _warned.add((backend, chip_backend))
                    warnings.warn(message, stacklevel=2)
                bound.arguments["backend"] = chip_backend
            return fn(*bound.args, **bound.kwargs)

        call._torch_fl_wrapped = True
        return call

    for fn_name in ("init_process_group", "new_group"):
        wrapped = mapped(getattr(c10d, fn_name))
        setattr(c10d, fn_name, wrapped)
        setattr(dist, fn_name, wrapped)


def get_backend_config(device: str | torch.device, **options) -> dict:
    """How to call init_process_group for `device`: {"backend", "library", "init_method", "options"}.

    The backend is the chip spec's: a generated chip's `distributed`, a native chip's
    `native.collective` (`library` names what implements it: rccl behind ROCm's `nccl`).
    init_method is tcp://MASTER_ADDR:MASTER_PORT for the spec's `init_method: tcp` (torchrun
    sets both), env:// for `env`. `options` are init_process_group keyword arguments (a
    timeout by default, plus those given here) less the ones the spec lists under
    `unsupported_options`: dropping one warns, naming it."""
    from .chips import device_facts, missing_facts_error

    device_type = torch.device(device).type
    spec = next((s for s in _specs.values() if s.CHIP == device_type), None)
    # where the spec lists the options, for the warning
    where = f"{spec.SPEC_SOURCE}: distributed.unsupported_options" if spec is not None else None
    if spec is not None:
        backend, method, unsupported = spec.DIST_BACKEND, spec.DIST_INIT_METHOD, spec.DIST_UNSUPPORTED_OPTIONS
        library = backend
    elif device_type == "cpu":
        backend, method, unsupported, library = "gloo", "tcp", (), "gloo"
    else:
        facts = device_facts(device_type)
        if facts is None or facts.kind != "native":
            raise missing_facts_error(device_type, "torch.distributed backend")
        backend, method, unsupported = facts.dist_backend, facts.dist_init_method, facts.dist_unsupported_options
        library = facts.dist_library
        where = f"{facts.spec_source}: native.collective.unsupported_options"
    if method == "tcp":
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if not addr or not port:
            raise RuntimeError(f"the {backend} backend meets over tcp: set MASTER_ADDR and MASTER_PORT "
                               "(torchrun sets them)")
        init_method = f"tcp://{addr}:{port}"
    elif method == "env":
        init_method = "env://"
    else:
        init_method = None   # `file`: the caller names the shared file
    wanted = {"timeout": datetime.timedelta(minutes=30), **options}
    dropped = sorted(k for k in wanted if k in unsupported)
    if dropped:
        warnings.warn(f"the {backend} backend does not support {', '.join(dropped)} "
                      f"({where}); left out", stacklevel=2)
    return {"backend": backend, "library": library, "init_method": init_method,
            "options": {k: v for k, v in wanted.items() if k not in unsupported}}
