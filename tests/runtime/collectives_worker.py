"""One rank of tests/runtime/test_collectives.py, started by torchrun: the npu chip's collectives
on its collective library (libsimnpu_ccl, the spec's distributed.library). Writes what it
found to <out>/rank<R>.json.

  collectives: every collective, for every dtype the chip has, against an exact reference
               computed on the host and, where gloo takes the dtype, against gloo's result
  fsdp:        FSDP2 (fully_shard) trains a small transformer, saves a distributed checkpoint,
               loads it back into perturbed parameters
  fault:       rank 1 dies inside a collective (SIMCCL_FAULTS); the others report what they got

TEST_CHIP names another generated chip (default npu): on the H200, nvgpu over NCCL, one rank; in
CI, the variant chip whose library has NCCL's dtype table (registered explicitly, autoload off).
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_fl  # noqa: F401  (the chip's backend)

CHIP = os.environ.get("TEST_CHIP", "npu")
if "TEST_CHIP" in os.environ:  # a chip beside a native accelerator is registered when asked for
    import torch_fl as _torch_fl

    _torch_fl.init(chips=[CHIP])
if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0":   # several backends installed: this one
    import importlib

    importlib.import_module(f"torch_fl_{CHIP}")._register()

FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
COMPLEX = (torch.complex64, torch.complex128)


def value(rank: int, i: int, dtype: torch.dtype) -> torch.Tensor:
    """Rank `rank`'s contribution: small exact values of `dtype` (i: the element index)."""
    base = torch.arange(i, dtype=torch.int64) % 5 + rank + 1
    if dtype == torch.bool:
        return (base + rank) % 2 == 0
    if dtype in COMPLEX:
        return torch.complex(base.double(), (base % 3).double() - rank).to(dtype)
    return base.to(dtype)


def reference(op: str, contributions: list[torch.Tensor]) -> torch.Tensor:
    stacked = torch.stack(contributions)
    if stacked.dtype == torch.bool:  # torch's bool reductions (as ProcessGroupNCCL): or / and
        return {"sum": stacked.any(0), "prod": stacked.all(0), "max": stacked.any(0), "min": stacked.all(0)}[op]
    wide = stacked.to(torch.complex128 if stacked.is_complex() else torch.float64)
    out = {"sum": wide.sum(0), "prod": wide.prod(0), "avg": wide.mean(0)}.get(op)
    if out is None:
        out = wide.real.amax(0) if op == "max" else wide.real.amin(0)
    return out.to(stacked.dtype)


def reduce_ops(dtype: torch.dtype) -> list[str]:
    """The reductions torch.distributed takes for `dtype` (complex: sum and avg only)."""
    if dtype in COMPLEX:
        return ["sum", "avg"]
    return ["sum", "prod", "max", "min"] + (["avg"] if dtype in FLOATING else [])


REDUCE = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
          "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}


def check_collectives(rank: int, world: int, device: torch.device) -> dict:
    failures, checked = [], 0
    gloo = dist.new_group(backend="gloo")
    n = 7

    def expect(name, got, want):
        nonlocal checked
        checked += 1
        got = got.cpu()
        close = (torch.equal(got, want) if not (got.is_floating_point() or got.is_complex())
                 else torch.allclose(got.to(torch.complex128 if got.is_complex() else torch.float64),
                                     want.to(torch.complex128 if want.is_complex() else torch.float64),
                                     rtol=1e-2, atol=1e-2))
        if not close:
            failures.append(f"{name}: got {got.tolist()}, expected {want.tolist()}")

    mine = lambda dtype: value(rank, n, dtype).to(device)  # noqa: E731
    everyone = lambda dtype: [value(r, n, dtype) for r in range(world)]  # noqa: E731
    library_dtypes = {getattr(torch, d) for d in _spec().DIST_LIBRARY_DTYPES}
    for dtype in _dtypes():
        tag = str(dtype).replace("torch.", "")
        reducible = dtype in library_dtypes or (dtype in COMPLEX and dtype.to_real() in library_dtypes)
        if not reducible:   # the library has no such type: a reduction is refused, naming it
            checked += 1
            try:
                dist.all_reduce(mine(dtype))
                failures.append(f"all_reduce {tag}: ran, although the library has no {tag} type")
            except RuntimeError as e:
                if "the collective library has no" not in str(e):
                    failures.append(f"all_reduce {tag}: unclear error {e}")
        for op in reduce_ops(dtype) if reducible else ():
            t = mine(dtype)
            dist.all_reduce(t, op=REDUCE[op])
            want = reference(op, everyone(dtype))
            expect(f"all_reduce {op} {tag}", t, want)
            if dtype in (torch.float32, torch.int64) and op != "avg":  # gloo's result, the same
                g = value(rank, n, dtype)
                dist.all_reduce(g, op=REDUCE[op], group=gloo)
                expect(f"all_reduce {op} {tag} vs gloo", t, g)
            t = mine(dtype)
            dist.reduce(t, dst=world - 1, op=REDUCE[op])
            if rank == world - 1:
                expect(f"reduce {op} {tag}", t, want)
            out = torch.empty(n, dtype=dtype, device=device)
            dist.reduce_scatter_tensor(out, torch.cat([value(rank, n, dtype)] * world).to(device), op=REDUCE[op])
            expect(f"reduce_scatter_tensor {op} {tag}", out, want)
        t = mine(dtype)
        dist.broadcast(t, src=world - 1)
        expect(f"broadcast {tag}", t, value(world - 1, n, dtype))
        out = torch.empty(world * n, dtype=dtype, device=device)
        dist.all_gather_into_tensor(out, mine(dtype))
        expect(f"all_gather_into_tensor {tag}", out, torch.cat(everyone(dtype)))
        outs = [torch.empty(n, dtype=dtype, device=device) for _ in range(world)]
        dist.all_gather(outs, mine(dtype))
        expect(f"all_gather {tag}", torch.cat(outs), torch.cat(everyone(dtype)))
        # all_to_all: block r of rank q goes to rank r; uneven splits too (rank r gets r+1 rows)
        send = torch.cat([value(rank * 10 + r, n, dtype) for r in range(world)]).to(device)
        out = torch.empty_like(send)
        dist.all_to_all_single(out, send)
        expect(f"all_to_all_single {tag}", out, torch.cat([value(q * 10 + rank, n, dtype) for q in range(world)]))
        send = torch.cat([value(rank * 10 + r, r + 1, dtype) for r in range(world)]).to(device)
        out = torch.empty((rank + 1) * world, dtype=dtype, device=device)
        dist.all_to_all_single(out, send, output_split_sizes=[rank + 1] * world,
                               input_split_sizes=[r + 1 for r in range(world)])
        expect(f"all_to_all_single uneven {tag}", out,
               torch.cat([value(q * 10 + rank, rank + 1, dtype) for q in range(world)]))
        # point to point: a ring
        got = torch.empty(n, dtype=dtype, device=device)
        ops = [dist.P2POp(dist.isend, mine(dtype), (rank + 1) % world),
               dist.P2POp(dist.irecv, got, (rank - 1) % world)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        expect(f"ring send/recv {tag}", got, value((rank - 1) % world, n, dtype))
        gathered = [torch.empty(n, dtype=dtype, device=device) for _ in range(world)] if rank == 0 else None
        dist.gather(mine(dtype), gathered, dst=0)
        if rank == 0:
            expect(f"gather {tag}", torch.cat(gathered), torch.cat(everyone(dtype)))
        got = torch.empty(n, dtype=dtype, device=device)
        dist.scatter(got, [value(10 + r, n, dtype).to(device) for r in range(world)] if rank == 0 else None, src=0)
        expect(f"scatter {tag}", got, value(10 + rank, n, dtype))
    dist.barrier()
    # async: the Work is returned before the collective completes; wait() then the result
    t = torch.full((1 << 20,), float(rank + 1), device=device)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    expect("async all_reduce 1M", t[:4], torch.full((4,), float(sum(range(1, world + 1)))))
    return {"checked": checked, "failures": failures}


def _spec():
    import importlib

    return importlib.import_module(f"torch_fl_{CHIP}.spec")


def _dtypes() -> list[torch.dtype]:
    return [getattr(torch, d) for d in _spec().DTYPES]


def run_fsdp(rank: int, world: int, device: torch.device, out_dir: str) -> dict:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world,))
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2),
        torch.nn.Linear(32, 1)).to(device)
    for layer in model[0].layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    torch.manual_seed(1)
    x = torch.randn(8 * world, 6, 32)
    y = x.sum(dim=-1, keepdim=True) * 0.05   # a target the model can learn
    share = slice(rank * 8, rank * 8 + 8)
    losses = []
    for _ in range(5):   # the loss falls below half by the fourth step (Triton's interpreter: ~5 s a step)
        loss = torch.nn.functional.mse_loss(model(x[share].to(device)), y[share].to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    saved = {k: v.full_tensor().cpu() for k, v in get_model_state_dict(model).items()}
    checkpoint = os.path.join(out_dir, "checkpoint")
    dcp.save(get_model_state_dict(model), checkpoint_id=checkpoint)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)   # perturbed: the load must bring back what was saved
    state = get_model_state_dict(model)
    dcp.load(state, checkpoint_id=checkpoint)
    set_model_state_dict(model, state)
    loaded = {k: v.full_tensor().cpu() for k, v in get_model_state_dict(model).items()}
    return {"losses": losses,
            "restored": all(torch.equal(saved[k], loaded[k]) for k in saved),
            "params": {k: v.flatten()[:8].tolist() for k, v in saved.items()},
            "shard_devices": sorted({str(p.device) for p in model.parameters()})}


def run_fault(rank: int, world: int, device: torch.device) -> dict:
    t = torch.ones(1 << 16, device=device)
    start = time.monotonic()
    try:
        for _ in range(10):   # rank 1 dies inside its third collective (SIMCCL_FAULTS)
            dist.all_reduce(t)
            getattr(torch, CHIP).synchronize()
        error = None
    except Exception as e:  # noqa: BLE001 - the class and text are what the test checks
        error = {"type": type(e).__name__, "message": str(e)}
    return {"error": error, "seconds": time.monotonic() - start}


def main() -> None:
    mode, out_dir = sys.argv[1], sys.argv[2]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device(CHIP)
    dist.init_process_group(backend="nccl", rank=rank, world_size=world,   # a CUDA script's name
                            timeout=datetime.timedelta(seconds=int(os.environ.get("TEST_TIMEOUT_S", "60"))))
    result = {"backend": dist.get_backend(), "rank": rank, "world": world}
    if mode == "collectives":
        result.update(check_collectives(rank, world, device))
    elif mode == "fsdp":
        result.update(run_fsdp(rank, world, device, out_dir))
    else:
        result.update(run_fault(rank, world, device))
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
        json.dump(result, fh)
    if mode != "fault":
        dist.destroy_process_group()
    else:
        os._exit(0)   # a peer died: nothing to tear down with it


if __name__ == "__main__":
    main()
