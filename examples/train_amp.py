"""Mixed-precision training with torch_fl.amp: autocast plus a gradient scaler.

    python examples/train_amp.py --device npu --dtype float16 --strict
    python examples/train_amp.py --device npu --dtype bfloat16

The script never names a chip's AMP API: `torch_fl.amp.autocast()` and
`torch_fl.amp.GradScaler()` take the current device. Every `--inf-every` steps one
gradient is poisoned with an inf (as an overflowing fp16 backward would): the scaler
must skip that optimizer step and back its scale off. `--out` writes the losses, the
scale after each step and which steps ran.
"""
import argparse
import contextlib
import json

import torch
import torch_fl
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="npu")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--inf-every", type=int, default=10, help="poison a gradient every N steps (0: never)")
    parser.add_argument("--strict", action="store_true", help="fail on any CPU fallback")
    parser.add_argument("--out", help="write the run's record here (JSON)")
    args = parser.parse_args()

    torch_fl.init()
    torch_fl.set_default_device(args.device)
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)

    # A small regression problem the model can fit: y = x @ w_true + noise.
    x = torch.randn(256, 32)
    y = x @ torch.randn(32, 1) + 0.01 * torch.randn(256, 1)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
    scaler = torch_fl.amp.GradScaler(init_scale=2.0 ** 10, growth_interval=5)

    record = {"losses": [], "scales": [], "stepped": [], "autocast_dtypes": []}
    torch_fl.reset_fallback_stats()
    with torch_fl.strict_fallback() if args.strict else contextlib.nullcontext():
        for step in range(args.steps):
            optimizer.zero_grad()
            with torch_fl.amp.autocast(dtype=dtype):
                hidden = model[0](x)
                out = model[2](model[1](hidden))
                loss = nn.functional.mse_loss(out.float(), y)
            record["autocast_dtypes"].append(str(hidden.dtype))
            scaler.scale(loss).backward()
            if args.inf_every and step % args.inf_every == args.inf_every - 1:
                model[0].weight.grad[0, 0] = float("inf")
            before = [p.detach().clone() for p in model.parameters()]
            scaler.step(optimizer)
            scaler.update()
            record["stepped"].append(any(not torch.equal(b, p) for b, p in zip(before, model.parameters())))
            record["losses"].append(loss.item())
            record["scales"].append(scaler.get_scale())
    record["fallback_stats"] = torch_fl.fallback_stats()
    print(f"{args.device} {args.dtype}: loss {record['losses'][0]:.4f} -> {record['losses'][-1]:.4f}, "
          f"skipped steps {[i for i, s in enumerate(record['stepped']) if not s]}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(record, fh)


if __name__ == "__main__":
    main()
