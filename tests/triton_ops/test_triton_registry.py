"""torch_fl.triton_ops' registry: ops.yaml and the kernel modules agree, op for op.

Every family of ops.yaml has a module whose `KERNELS` dict holds exactly the family's ops
(a listed op without a kernel, or a kernel ops.yaml does not list, fails here), and
`kernel_for` resolves every SUPPORTED_OPS entry through that one mapping."""
import os
import subprocess
import sys

from triton_device import DEVICE  # noqa: F401  (sets TRITON_INTERPRET before triton is imported)

import pytest  # noqa: E402

import torch_fl.triton_ops as tops  # noqa: E402

needs_triton = pytest.mark.skipif(not tops.available(), reason="triton not installed")


def test_import_does_not_import_triton():
    """The package's names (SUPPORTED_OPS, FAMILIES, ...) come from ops.yaml: importing it
    imports neither triton nor a kernel module (torch's backend autoload off, as that
    imports the installed backends)."""
    code = ("import sys, torch_fl.triton_ops as t; assert t.SUPPORTED_OPS and t.FAMILIES;"
            "loaded = [m for m in sys.modules if m == 'triton' or m.startswith('triton.')"
            " or m.startswith('torch_fl.triton_ops._')]; assert not loaded, loaded")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_ops_listed_once():
    assert len(set(tops.SUPPORTED_OPS)) == len(tops.SUPPORTED_OPS)
    assert set(tops.FAMILIES) <= set(tops._CATALOG["families"])


@needs_triton
@pytest.mark.parametrize("family", list(tops._CATALOG["families"]))
def test_family_module_kernels_match_ops_yaml(family):
    from torch_fl.triton_ops import _registry

    kernels = _registry.family_module(family).KERNELS
    listed = set(tops.family_ops(family))
    assert not listed - set(kernels), f"ops.yaml lists ops of `{family}` without a kernel"
    assert not set(kernels) - listed, f"`{family}`'s KERNELS has ops ops.yaml does not list"
    assert all(callable(fn) for fn in kernels.values())


@needs_triton
def test_kernel_for_resolves_every_op():
    for op in tops.SUPPORTED_OPS:
        fn = tops.kernel_for(op)
        assert callable(fn) and fn.__name__ == "triton_" + op.replace(".", "_")
    with pytest.raises(KeyError):
        tops.kernel_for("nonexistent.op")


@needs_triton
def test_op_ids_written_out_once_with_one_branch_each():
    """Each pointwise op id is a constant of its own in _kernels.py (`OP_GELU = tl.constexpr(..)`,
    found by grep), ids are distinct, and each has exactly one branch among the group functions
    _apply dispatches to; likewise the reductions' R_* ids in reduce_kernel."""
    import re

    from torch_fl.triton_ops import _kernels as K

    src = open(K.__file__).read()
    assert len(set(K.OP_ID.values())) == len(K.OP_ID) > 100
    for name, op_id in K.OP_ID.items():
        const = "OP_" + name.upper()
        assert re.findall(rf"^{const} = tl\.constexpr\((\d+)\)$", src, re.M) == [str(op_id)], const
        assert len(re.findall(rf"\bOP == {const}:", src)) == 1, const
    assert len(set(K.RED_ID.values())) == len(K.RED_ID) == 16
    for name, op_id in K.RED_ID.items():
        assert re.findall(rf"^R_{name.upper()} = tl\.constexpr\((\d+)\)$", src, re.M) == [str(op_id)]
