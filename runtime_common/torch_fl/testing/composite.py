"""The suite of a composite chip (`chip.integration: composite`, docs/multichip.md), written once.

A composite's tests/conftest.py calls `configure(spec, ...)` with its spec module (which
registers the backend) and star-imports this module. Each test reads what it expects from
the member chips' own spec modules (`spec.MEMBERS`): which chip serves a device, its dtypes,
the route of an op, so it holds for any composite.
"""
from __future__ import annotations

import copy
import importlib
from types import ModuleType

import pytest
import torch
from torch import nn

from .. import routes

__all__ = [
    "composite_spec", "test_devices_are_the_members_devices_in_order", "test_each_chip_takes_only_its_own_dtypes",
    "test_each_op_runs_on_its_chip_s_route", "test_copies_between_chips_keep_values_and_gradients",
    "test_a_model_split_over_the_chips_trains_as_on_the_cpu", "test_the_selector_moves_batches_between_chips",
]

_spec: ModuleType | None = None
_build_command = ""


def configure(spec: ModuleType, build_command: str) -> None:
    """Called by the composite's conftest.py: the spec module, and how the package is built."""
    global _spec, _build_command
    _spec, _build_command = spec, build_command


@pytest.fixture(scope="session")
def composite_spec() -> ModuleType:
    """The composite's spec module, its backend registered (the chip must be there: no skips)."""
    assert _spec is not None, "torch_fl.testing.composite is not configured: the conftest.py calls configure()"
    package = importlib.import_module(_spec.__name__.rpartition(".")[0])
    package._register()
    assert getattr(torch, _spec.CHIP).device_count() > 0, (
        f"no {_spec.CHIP} device: {package.load_error()} (build: {_build_command})")
    return _spec


def _backend(spec):
    return importlib.import_module(spec.__name__.rpartition(".")[0] + "._C")


def _members_by_device(spec) -> list[ModuleType]:
    """The member spec module behind each device index."""
    _C = _backend(spec)
    return [spec.MEMBERS[_C._member_of(i)] for i in range(getattr(torch, spec.CHIP).device_count())]


def _first_devices(spec) -> list[tuple[ModuleType, torch.device]]:
    """Each member chip with its first device."""
    seen: dict[str, tuple[ModuleType, torch.device]] = {}
    for index, member in enumerate(_members_by_device(spec)):
        seen.setdefault(member.CHIP, (member, torch.device(spec.CHIP, index)))
    return list(seen.values())


def _shared_float(members) -> torch.dtype:
    """A floating dtype every given member lists (float32 first)."""
    for name in ("float32", "float16", "bfloat16", "float64"):
        if all(name in m.DTYPES for m in members):
            return getattr(torch, name)
    pytest.fail("the members share no floating dtype: " + ", ".join(f"{m.CHIP}: {m.DTYPES}" for m in members))


def test_devices_are_the_members_devices_in_order(composite_spec):
    spec = composite_spec
    module = getattr(torch, spec.CHIP)
    by_device = _members_by_device(spec)
    order = [spec.MEMBERS.index(m) for m in by_device]
    assert order == sorted(order) and set(order) == set(range(len(spec.MEMBERS))), order
    for index, member in enumerate(by_device):
        properties = module.get_device_properties(index)
        assert properties.name == member.DESCRIPTION
        assert (properties.major, properties.minor) == tuple(member.CAPABILITY)
        assert f"{spec.CHIP}:{index}, {member.CHIP}" in module.get_device_name(index)
        assert properties.total_memory == module.mem_get_info(index)[1] > 0


def test_each_chip_takes_only_its_own_dtypes(composite_spec):
    spec = composite_spec
    for member, device in _first_devices(spec):
        for name in member.DTYPES:
            assert torch.zeros(2, dtype=getattr(torch, name), device=device).dtype == getattr(torch, name)
        for name in (d for d in spec.DTYPES if d not in member.DTYPES):
            with pytest.raises(NotImplementedError, match=f"chip '{member.CHIP}' .*{member.SPEC_SOURCE}"):
                torch.zeros(2, dtype=getattr(torch, name), device=device)


def test_each_op_runs_on_its_chip_s_route(composite_spec):
    """A vendor op of each chip runs its kernel there; an op no chip has a kernel for takes each
    chip's own chain (Triton on one, the host on another), with the CPU's answers."""
    spec = composite_spec
    _C = _backend(spec)
    unrouted = "cumsum"  # no member of a composite here names it: each chip's default chain
    for member, device in _first_devices(spec):
        dtype = _shared_float([member])
        x = torch.arange(1, 7, dtype=dtype).reshape(2, 3)
        vendor = next(op for op in ("add.Tensor", "mul.Tensor", "mm") if routes.route(member, op).path == "vendor")
        _C.reset_fallback_stats()
        expected = {"add.Tensor": x + x, "mul.Tensor": x * x, "mm": x @ x.T}[vendor]
        d = x.to(device)
        got = {"add.Tensor": lambda: d + d, "mul.Tensor": lambda: d * d, "mm": lambda: d @ d.T}[vendor]()
        torch.testing.assert_close(got.cpu(), expected)
        assert _C.fallback_stats().get(vendor, {}).get("vendor", 0) >= 1, (member.CHIP, _C.fallback_stats())
        _C.reset_fallback_stats()
        torch.testing.assert_close(torch.cumsum(d, 1).cpu(), torch.cumsum(x, 1))
        path = routes.route(member, unrouted).path
        assert set(_C.fallback_stats().get(unrouted, {})) == {path}, (member.CHIP, path, _C.fallback_stats())


def _pairs(spec):
    firsts = _first_devices(spec)
    return [(a, b) for a in firsts for b in firsts if a[0] is not b[0]]


def test_copies_between_chips_keep_values_and_gradients(composite_spec):
    for (a, da), (b, db) in _pairs(composite_spec):
        dtype = _shared_float([a, b])
        x = torch.randn(4, 5, dtype=dtype)
        on_a = x.to(da)
        torch.testing.assert_close(on_a.to(db).cpu(), x, rtol=0, atol=0)
        torch.testing.assert_close(on_a.to(db, non_blocking=True).cpu(), x, rtol=0, atol=0)
        torch.testing.assert_close(on_a.t().to(db).cpu(), x.t(), rtol=0, atol=0)  # a strided source
        for other in (d for d in b.DTYPES if d != str(dtype).removeprefix("torch.") and d in ("float16", "int32")):
            converted = on_a.to(db, dtype=getattr(torch, other))
            assert converted.device == db
            torch.testing.assert_close(converted.cpu(), x.to(getattr(torch, other)), rtol=0, atol=0)
        leaf = x.clone().to(da).requires_grad_()
        (leaf.to(db) * 3).sum().backward()
        assert leaf.grad.device == da
        torch.testing.assert_close(leaf.grad.cpu(), torch.full_like(x, 3))


class _Tokens(nn.Module):
    """The seed's hybrid model (section 5.1): an embedding on one chip, a transformer layer and
    the head on another."""

    def __init__(self, vocabulary: int = 40, width: int = 16):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, width)
        self.body = nn.Sequential(nn.Linear(width, 32), nn.ReLU(), nn.Linear(32, width))
        self.head = nn.Linear(width, vocabulary)

    def forward(self, tokens):
        hidden = self.embedding(tokens)
        return self.head(hidden + self.body(hidden))


def test_a_model_split_over_the_chips_trains_as_on_the_cpu(composite_spec):
    from ..placement import DevicePlacementPolicy

    for (a, da), (b, db) in _pairs(composite_spec):
        if torch.float32 != _shared_float([a, b]):
            continue
        torch.manual_seed(0)
        reference = _Tokens()
        split = copy.deepcopy(reference)
        DevicePlacementPolicy({"embedding": str(db), "body": str(da), "head": str(da)}, default=str(da)).apply(split)
        assert split.embedding.weight.device == db and split.head.weight.device == da
        tokens = torch.randint(0, 40, (8, 6))
        losses = {}
        for name, model, device in (("cpu", reference, torch.device("cpu")), ("split", split, da)):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
            losses[name] = []
            for _ in range(4):
                optimizer.zero_grad()
                logits = model(tokens.to(db if name == "split" else device))
                loss = nn.functional.cross_entropy(logits.reshape(-1, 40).to(device), tokens.reshape(-1).to(device))
                loss.backward()
                optimizer.step()
                losses[name].append(loss.item())
        torch.testing.assert_close(losses["split"], losses["cpu"], rtol=1e-5, atol=1e-5)
        assert losses["cpu"][-1] < losses["cpu"][0]
        for (name, p), q in zip(split.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-5, msg=name)
        return
    pytest.fail("no two member chips share float32 to train in")


def test_the_selector_moves_batches_between_chips(composite_spec):
    from ..data import DeviceLoader
    from ..monitor import DynamicDeviceSelector

    spec = composite_spec
    module = getattr(torch, spec.CHIP)
    selector = DynamicDeviceSelector(device_type=spec.CHIP)
    ranked = [torch.device(s.device) for s in selector.candidates()]
    assert sorted(ranked, key=lambda d: d.index) == [torch.device(spec.CHIP, i) for i in range(module.device_count())]
    dtype = _shared_float(spec.MEMBERS)
    batches = [torch.randn(3, 4, dtype=dtype) for _ in range(3)]
    for device in ranked:
        for moved, batch in zip(DeviceLoader(batches, device), batches):
            assert moved.device == device
            torch.testing.assert_close(moved.cpu(), batch, rtol=0, atol=0)
    chosen = selector.select()  # the least loaded now: the batches above changed the loads
    assert chosen.type == spec.CHIP and chosen in ranked
