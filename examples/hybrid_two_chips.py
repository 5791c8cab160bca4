"""The seed's hybrid model (section 5.1) on two vendors' chips in one process: the embedding on
one chip, the transformer and the head on another, trained against the same model on the CPU.

    torchfl-gen build specs/hybrid.yaml          # npu (simnpu) and vpu (simvpu) behind `hybrid`
    python examples/hybrid_two_chips.py          # embedding on hybrid:2 (vpu), the rest on hybrid:0 (npu)

PyTorch drives one out-of-tree device type per process, so two chips meet as the devices of
one composite chip (docs/multichip.md): `torch_fl.device("vpu:0")` is `hybrid:2`. Both runs
start from the same weights and see the same batches; the last line is the result as JSON.
"""
import argparse
import copy
import json

import torch
import torch_fl
from torch import nn
from torch_fl.placement import DevicePlacementPolicy


class HybridModel(nn.Module):
    """Token embedding, one transformer encoder layer, a language-model head."""

    def __init__(self, vocabulary: int = 64, width: int = 32, heads: int = 4):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, width)
        self.transformer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=64, dropout=0.0,
                                                      batch_first=True)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, tokens):
        return self.head(self.transformer(self.embedding(tokens)))


def train(model: nn.Module, batches, device: torch.device) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for tokens in batches:
        optimizer.zero_grad()
        logits = model(tokens[:, :-1].to(model.embedding.weight.device))
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).to(device),
                                           tokens[:, 1:].reshape(-1).to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", default="hybrid", help="the composite chip [hybrid]")
    parser.add_argument("--embedding", default="vpu:0", help="the embedding's device (a member's name) [vpu:0]")
    parser.add_argument("--transformer", default="npu:0", help="the transformer's device [npu:0]")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    torch_fl.init(chips=[args.chip])
    embedding, transformer = torch_fl.device(args.embedding), torch_fl.device(args.transformer)
    torch.manual_seed(0)
    reference = HybridModel()
    split = copy.deepcopy(reference)
    DevicePlacementPolicy({"embedding": embedding, "*": transformer}, default=transformer).apply(split)
    batches = [torch.randint(0, 64, (8, 17)) for _ in range(args.steps)]

    cpu = train(reference, batches, torch.device("cpu"))
    hybrid = train(split, batches, transformer)
    difference = max(abs(a - b) for a, b in zip(cpu, hybrid))
    weights = max((p.detach().cpu() - q.detach()).abs().max().item()
                  for p, q in zip(split.parameters(), reference.parameters()))
    for step, (a, b) in enumerate(zip(cpu, hybrid)):
        print(f"step {step:3d}: cpu {a:.6f}  {embedding}+{transformer} {b:.6f}")
    print(json.dumps({"embedding": str(embedding), "transformer": str(transformer), "losses": hybrid,
                      "max_loss_difference": difference, "max_weight_difference": weights}))


if __name__ == "__main__":
    main()
