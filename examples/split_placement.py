"""Train one model split over two devices and the same model on one, and compare them.

    python examples/split_placement.py    # input layer and the second residual block on npu, the rest on cpu
    python examples/split_placement.py --rule "0=cpu" --rule "2*=npu" --out run.json

`torch_fl.placement.DevicePlacementPolicy` moves each submodule to the device its name
matches and inserts the transfers at the module boundaries; `torch_fl.data.DeviceLoader`
brings the batches to the root's device (the split moves them on). Both runs start from the same weights and
see the same batches, so their losses and final weights agree to fp32 tolerance.
"""
import argparse
import copy
import json

import torch
import torch_fl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_fl.data import DeviceLoader
from torch_fl.placement import DevicePlacementPolicy


class Residual(nn.Module):
    """Its own forward computes on its device: a child placed elsewhere hands its output back."""

    def __init__(self, width: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))

    def forward(self, x):
        return torch.relu(x + self.body(x))


def make_model(width: int = 32, classes: int = 5) -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, width), nn.ReLU(),
        nn.Sequential(Residual(width), Residual(width)),
        nn.Linear(width, classes),
    )


def train(model: nn.Module, loader, steps_device: str, epochs: int) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for _ in range(epochs):
        for x, y in DeviceLoader(loader, steps_device):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rule", action="append", metavar="PATTERN=DEVICE",
                        help="placement rule (repeatable) [0=npu, 2.1=npu, 2.1.body.2=cpu, 3=cpu]")
    parser.add_argument("--reference-device", default="cpu", help="where the unsplit model trains")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", help="write both runs' losses and weights here (JSON)")
    args = parser.parse_args()
    rules = dict(r.split("=", 1) for r in args.rule or ["0=npu", "2.1=npu", "2.1.body.2=cpu", "3=cpu"])

    torch_fl.init()
    torch.manual_seed(0)
    inputs = torch.randn(256, 16)
    labels = (inputs[:, :5].argmax(1) + (inputs[:, 5] > 0)) % 5

    reference = make_model()
    split = copy.deepcopy(reference)
    policy = DevicePlacementPolicy(rules, default=args.reference_device)
    policy.apply(split)
    placed = sorted({str(d) for d in policy.placement.values()})
    moved = {name or "<root>": str(device) for name, device in policy.placement.items()}
    print("placement:", ", ".join(f"{name}={device}" for name, device in moved.items()))

    reference.to(args.reference_device)
    runs = {}
    for name, model in (("reference", reference), ("split", split)):
        loader = DataLoader(TensorDataset(inputs, labels), batch_size=32, shuffle=True,
                            generator=torch.Generator().manual_seed(1))  # same batches in both runs
        losses = train(model, loader, args.reference_device, args.epochs)
        weights = {k: v.detach().cpu().flatten().tolist() for k, v in model.state_dict().items()}
        runs[name] = {"losses": losses, "weights": weights}
        print(f"{name}: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    runs["devices"] = placed
    runs["parameter_devices"] = {k: str(v.device) for k, v in split.named_parameters()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(runs, f)


if __name__ == "__main__":
    main()
