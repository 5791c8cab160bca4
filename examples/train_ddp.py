"""Data-parallel training on a generated chip: DistributedDataParallel over its backend.

    torchrun --nproc_per_node=2 examples/train_ddp.py --out-dir /tmp/ddp
    python examples/train_ddp.py --reference --out-dir /tmp/ddp   # one process, whole batches

Each rank trains on its half of every global batch; DDP averages the gradients over
the chip's torch.distributed backend (from the spec's `distributed` section), so every
rank ends with the parameters a single process gets from the whole batches. The
script asks for `nccl`, as a CUDA script would (`--backend nccl`, the default): on the
chip the spec's `replaces: [nccl]` maps it to the chip's backend. Before training each
rank runs every collective once and records what it received (`collectives`).
"""
import argparse
import json
import os

import torch
import torch.distributed as dist
import torch_fl
from torch import nn

GLOBAL_BATCH = 32


def make_model() -> nn.Module:
    # No batch norm: its statistics would be per rank, and the point is to match one process.
    return nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(kernel_size=2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    )


def run_collectives(device, rank: int, world: int) -> dict:
    """Each collective once, on chip tensors; returns what this rank holds afterwards."""
    got = {}
    t = torch.full((3,), float(rank + 1), device=device)
    dist.all_reduce(t)
    got["all_reduce"] = t.tolist()
    t = torch.full((2,), float(rank + 10), device=device)
    dist.broadcast(t, src=1)
    got["broadcast"] = t.tolist()
    outs = [torch.empty(2, device=device) for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank), device=device))
    got["all_gather"] = [o.tolist() for o in outs]
    out = torch.empty(world * 2, device=device)
    dist.all_gather_single(out, torch.full((2,), float(rank), device=device))
    got["all_gather_single"] = out.tolist()
    out = torch.empty(2, device=device)
    dist.reduce_scatter(out, [torch.full((2,), float(rank * world + i), device=device) for i in range(world)])
    got["reduce_scatter"] = out.tolist()
    outs = [torch.empty(1, device=device) for _ in range(world)]
    dist.all_to_all(outs, [torch.full((1,), float(rank * 10 + i), device=device) for i in range(world)])
    got["all_to_all"] = [o.tolist() for o in outs]
    out = torch.empty(world, device=device)
    dist.all_to_all_single(out, torch.arange(world, dtype=torch.float32, device=device) + 10 * rank)
    got["all_to_all_single"] = out.tolist()
    dist.barrier()
    t = torch.full((2,), float(rank + 100), device=device)
    if rank == 0:
        dist.send(t, dst=1)
    elif rank == 1:
        dist.recv(t, src=0)
    got["send_recv"] = t.tolist()
    got["devices"] = sorted({str(x.device) for x in outs + [t]})
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="npu")
    parser.add_argument("--backend", default="nccl", help="the name the script asks for (nccl: a CUDA script)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--reference", action="store_true", help="one process on the whole batches")
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()

    torch_fl.init()
    device = torch.device(args.device)
    torch.manual_seed(0)
    images = torch.randn(args.steps * GLOBAL_BATCH, 3, 16, 16)
    labels = torch.randint(0, 10, (args.steps * GLOBAL_BATCH,))
    model = make_model().to(device)

    rank, world = 0, 1
    record = {}
    if not args.reference:
        config = torch_fl.distributed.get_backend_config(device)
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group(backend=args.backend, init_method=config["init_method"], rank=rank,
                                world_size=world, **config["options"])
        record["backend"] = dist.get_backend()
        record["config"] = {k: v for k, v in config.items() if k != "options"}
        record["collectives"] = run_collectives(device, rank, world)
        model = nn.parallel.DistributedDataParallel(model)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    share = GLOBAL_BATCH // world
    losses = []
    for step in range(args.steps):
        lo = step * GLOBAL_BATCH + rank * share
        x, y = images[lo:lo + share].to(device), labels[lo:lo + share].to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    module = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    record["losses"] = losses
    record["params"] = {name: p.detach().cpu().flatten().tolist() for name, p in module.named_parameters()}
    record["param_devices"] = sorted({str(p.device) for p in module.parameters()})
    name = "reference.json" if args.reference else f"rank{rank}.json"
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, name), "w") as fh:
        json.dump(record, fh)
    if not args.reference:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
