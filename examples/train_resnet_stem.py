"""Train a ResNet stem for two epochs: a standard PyTorch script but for the device string.

    python examples/train_resnet_stem.py --device npu      # the generated simulated NPU
    python examples/train_resnet_stem.py --device cpu      # the same run on the host

With the same seed both runs see the same data, the same initial weights and the
same batches (the npu's random generator is CPU-compatible), so their losses and
final weights agree to fp32 tolerance; tests/test_example.py checks that.
"""
import argparse
import contextlib
import json

import torch
import torch_fl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def resnet_stem(num_classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, kernel_size=7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, num_classes),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="npu")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--strict", action="store_true", help="fail on any CPU fallback")
    parser.add_argument("--out", help="write losses and final weights here (JSON)")
    args = parser.parse_args()

    torch_fl.init()
    torch_fl.set_default_device(args.device)
    torch.manual_seed(0)

    images = torch.randn(args.samples, 3, 32, 32)
    labels = torch.randint(0, 10, (args.samples,))
    # The shuffle's generator on the default device: torch's sampler draws its permutation
    # there, and a CPU generator is refused on cuda as on a chip.
    shuffle = torch.Generator(device=args.device)
    shuffle.manual_seed(0)
    loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True, generator=shuffle)
    model = resnet_stem()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    torch_fl.reset_fallback_stats()
    losses = []
    with torch_fl.strict_fallback() if args.strict else contextlib.nullcontext():
        for epoch in range(args.epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            epoch_losses = losses[-len(loader):]
            print(f"epoch {epoch + 1}: mean loss {sum(epoch_losses) / len(epoch_losses):.4f}")

    cpu_fallbacks = {op: p["cpu"] for op, p in torch_fl.fallback_stats().items() if p.get("cpu")}
    print(f"device {args.device}: {len(losses)} steps, final loss {losses[-1]:.4f}, "
          f"CPU fallbacks: {sum(cpu_fallbacks.values())} {cpu_fallbacks or ''}")
    if args.out:
        weights = {name: p.detach().cpu().flatten().tolist() for name, p in model.state_dict().items()
                   if p.dtype.is_floating_point}
        with open(args.out, "w") as f:
            json.dump({"device": args.device, "losses": losses, "weights": weights,
                       "cpu_fallbacks": cpu_fallbacks}, f)


if __name__ == "__main__":
    main()
