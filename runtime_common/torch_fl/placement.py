"""Split a model over devices by module name: `DevicePlacementPolicy`.

    policy = torch_fl.placement.DevicePlacementPolicy({"encoder*": "npu", "head": "cpu"})
    model = policy.apply(model)     # build the optimizer after this
    out = model(x)                  # x where the model's root is; out comes back there

Patterns are `fnmatch` globs over qualified module names (`model.named_modules()`; `*` also
matches dots). A module takes the device of the last rule matching its own name, else its
parent's; the root, unless a rule names it (""), stays where its parameters are (`default`
overrides). Each module's own parameters and buffers move to its device.

Transfers are inserted where the device changes: a module placed elsewhere than its parent
gets its inputs (args and kwargs) moved to its device, and its outputs moved back to the
parent's device, since the parent's own forward code computes there. A parent that is an
`nn.Sequential` only chains its children: there every child takes its input on its own device
and only the chain's output comes back to the Sequential's device. The root's outputs always
come back to the root's device. Transfers
are `Tensor.to`, so gradients flow back across them.
"""
from __future__ import annotations

import fnmatch
from typing import Mapping

import torch
from torch import nn
from torch.utils import _pytree as pytree

from . import naming

__all__ = ["DevicePlacementPolicy"]


def _to(tree, device: torch.device):
    return pytree.tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) and t.device != device else t, tree)


class DevicePlacementPolicy:
    def __init__(self, rules: Mapping[str, str | torch.device], default: str | torch.device | None = None):
        if not rules:
            raise ValueError("DevicePlacementPolicy needs at least one {module-name pattern: device} rule")
        self.rules = {str(pattern): naming.device(device) for pattern, device in rules.items()}
        self.default = naming.device(default) if default is not None else None
        self._handles: list = []
        self._placed: list[nn.Module] = []  # modules whose inputs a hook moves (marked for the doctor)

    def plan(self, model: nn.Module) -> dict[str, torch.device]:
        """Qualified module name ("" for the root) -> device; raises for a rule that matches nothing."""
        names = [name for name, _ in model.named_modules()]
        unused = [p for p in self.rules if not any(fnmatch.fnmatchcase(n, p) for n in names)]
        if unused:
            sample = ", ".join(repr(n) for n in names[1:9]) + (", ..." if len(names) > 9 else "")
            raise ValueError(f"placement rule(s) {unused} match no module of {type(model).__name__}; "
                             f"its modules are named like {sample}")
        root = self._device_of_root(model)
        plan: dict[str, torch.device] = {}
        for name in names:
            matched = [d for p, d in self.rules.items() if fnmatch.fnmatchcase(name, p)]
            parent = name.rpartition(".")[0] if name else None
            plan[name] = matched[-1] if matched else (plan[parent] if parent is not None else root)
        return plan

    def _device_of_root(self, model: nn.Module) -> torch.device:
        if self.default is not None:
            return self.default
        for tensor in list(model.parameters(recurse=False)) + list(model.parameters()):
            return tensor.device
        return torch.device("cpu")

    def apply(self, model: nn.Module) -> nn.Module:
        """Move every module's own tensors to its planned device and insert the transfers (in place)."""
        self.remove()
        plan = self.plan(model)
        for device in set(plan.values()):
            if device.type not in ("cpu", "meta"):
                torch.empty(0, device=device)  # an unusable device fails before anything moved
        modules = dict(model.named_modules())
        for name, module in modules.items():
            module._apply(lambda t, device=plan[name]: t.to(device), recurse=False)
        self._handles.append(model.register_forward_hook(self._outputs_to(plan[""])))
        for name, module in modules.items():
            children = [f"{name}.{c}" if name else c for c, _ in module.named_children()]
            mixed = [c for c in children if plan[c] != plan[name]]
            if not mixed:
                continue
            if isinstance(module, nn.Sequential):
                # Chained children: each one takes its input where it runs, the chain's output
                # comes back at the end (the root's hook does that for a root Sequential).
                for child in children:
                    self._input_hook(modules[child], plan[child])
                if name:
                    self._handles.append(module.register_forward_hook(self._outputs_to(plan[name])))
            else:
                for child in mixed:
                    self._input_hook(modules[child], plan[child])
                    self._handles.append(modules[child].register_forward_hook(self._outputs_to(plan[name])))
        self.placement = plan
        model._torch_fl_placement = plan  # the doctor takes this split as deliberate
        return model

    def _input_hook(self, module: nn.Module, device: torch.device) -> None:
        module._torch_fl_placed = device
        self._placed.append(module)
        self._handles.append(module.register_forward_pre_hook(self._inputs_to(device), with_kwargs=True))

    def remove(self) -> None:
        """Take the inserted transfers out again (tensors stay where they are)."""
        for handle in self._handles:
            handle.remove()
        for module in self._placed:
            module._torch_fl_placed = None
        self._handles, self._placed = [], []

    @staticmethod
    def _inputs_to(device: torch.device):
        def hook(module, args, kwargs):
            return _to(args, device), _to(kwargs, device)
        return hook

    @staticmethod
    def _outputs_to(device: torch.device):
        def hook(module, args, output):
            return _to(output, device)
        return hook
