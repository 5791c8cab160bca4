"""aten operators of the installed torch."""
from __future__ import annotations

import torch

from torchfl_gen import torch_ops


def test_lookup_and_names():
    names = torch_ops.all_names()
    assert len(names) > 2000 and names == sorted(names)
    for n in ["add.Tensor", "relu", "random_.from", "randperm.generator_out", "copy_"]:
        assert torch_ops.lookup(n) is not None, n
        assert torch_ops.in_running_torch(n), n
    assert torch_ops.lookup("add.Tensr") is None
    assert not torch_ops.in_running_torch("add.Tensr")


def test_suggest():
    assert torch_ops.suggest("add.Tensr") == "add.Tensor"
    assert torch_ops.suggest("randperm.generatorout") == "randperm.generator_out"
    assert torch_ops.suggest("convolutoin") == "convolution"
    assert torch_ops.suggest("zzqqxx_frob") is None


def test_composite_implicit():
    assert torch_ops.is_composite_implicit("linear")
    assert not torch_ops.is_composite_implicit("add.Tensor")
    assert not torch_ops.is_composite_implicit("copy_")        # CompositeExplicitAutograd
    assert not torch_ops.is_composite_implicit("nope")


def test_signature_matches_torch_schema():
    sig = torch_ops.signature("add.Tensor")
    assert sig.returns == "at::Tensor"
    assert [(a.name, a.cpp_type) for a in sig.arguments] == [
        ("self", "const at::Tensor &"), ("other", "const at::Tensor &"), ("alpha", "const at::Scalar &")]
    assert "aten::" + sig.schema == str(torch._C._get_schema("aten::add", "Tensor"))
    cb = torch_ops.signature("convolution_backward")
    assert cb.returns == "::std::tuple<at::Tensor,at::Tensor,at::Tensor>"
    assert cb.arguments[-1].cpp_type == "::std::array<bool,3>"


def test_suggest_overloads():
    assert torch_ops.suggest("add") == "add.Tensor"           # first overload in native_functions.yaml
    assert torch_ops.suggest("relu.Tensor") == "relu"         # no such overload: the default one
    assert torch_ops.suggest("sum.dim_IntLst") == "sum.dim_IntList"
