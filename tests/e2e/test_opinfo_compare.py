"""How the generated OpInfo suite compares the chip with the CPU (torch_fl.testing.opinfo, which
generated/npu/tests/test_opinfo.py runs): the float64 accuracy rule and index results of
unstable sorts."""
from __future__ import annotations

import importlib
import itertools
from types import SimpleNamespace

import pytest
import torch

from spec_helpers import ROOT


@pytest.fixture(scope="module")
def suite():
    """torch_fl.testing.opinfo configured for the npu, as the generated conftest.py does."""
    import torch_fl_npu
    from torch_fl.testing import suite as chip_suite

    chip_suite.configure(torch_fl_npu.spec, tests_dir=ROOT / "generated" / "npu" / "tests",
                         build_command="torchfl-gen build specs/npu.yaml")
    return importlib.import_module("torch_fl.testing.opinfo")


def _results():
    """A float64 reference and two float32 results with independent errors of one size (as two
    summation orders give): the CPU's and an equally accurate chip's."""
    generator = torch.Generator().manual_seed(0)
    reference = torch.randn(256, dtype=torch.float64, generator=generator)
    noisy = [(reference * (1 + 1e-5 * torch.randn(256, dtype=torch.float64, generator=generator))).float()
             for _ in range(2)]
    return reference, noisy[0], noisy[1]


def test_rounding_differences_pass_and_wrong_values_do_not(suite):
    reference, cpu, chip = _results()
    with pytest.raises(AssertionError):  # outside the fixed float32 tolerances
        torch.testing.assert_close(chip, cpu, rtol=1.3e-6, atol=1e-5)
    assert suite.no_less_accurate(chip, cpu, reference)
    wrong = chip.clone()
    wrong[17] += 1e-2 * abs(wrong[17].item())
    assert not suite.no_less_accurate(wrong, cpu, reference)
    assert not suite.no_less_accurate(chip.double(), cpu, reference)  # dtype differs
    with_nan = chip.clone()
    with_nan[3] = float("nan")
    assert not suite.no_less_accurate(with_nan, cpu, reference)


def test_assert_same_uses_the_rule_only_with_a_reference(suite):
    reference, cpu, chip = _results()
    with pytest.raises(AssertionError):
        suite.assert_same(chip.to(suite.CHIP), cpu, "forward")
    accepted = []
    suite.assert_same(chip.to(suite.CHIP), cpu, "forward", reference, accepted)
    assert accepted == ["forward"]


def test_unstable_sort_indices_are_compared_by_what_they_select(suite):
    x = torch.tensor([3, 1, 3, 1, 2, 3], dtype=torch.int8)
    sample = SimpleNamespace(input=x, args=(), kwargs={})
    values, cpu_indices = torch.sort(x)
    chip_indices = torch.tensor([3, 1, 4, 5, 0, 2])  # ties in another order
    actual = (values.to(suite.CHIP), chip_indices.to(suite.CHIP))
    chosen, expected = suite.by_selection("sort", sample, actual, (values, cpu_indices), "forward")
    suite.assert_same(chosen, expected, "forward")
    with pytest.raises(AssertionError, match="not a permutation"):
        suite.by_selection("sort", sample, (actual[0], torch.tensor([3, 3, 4, 5, 0, 2]).to(suite.CHIP)),
                           (values, cpu_indices), "forward")
    stable = SimpleNamespace(input=x, args=(), kwargs={"stable": True})
    assert suite.by_selection("sort", stable, actual, (values, cpu_indices), "forward")[0] is actual


def test_reduced_index_results_are_compared_by_what_they_select(suite):
    x = torch.tensor([[2.0, 1.0, 2.0], [5.0, 5.0, 0.0]])
    sample = SimpleNamespace(input=x, args=(1,), kwargs={})  # median along dim 1
    values, cpu_indices = torch.median(x, 1)
    other = torch.tensor([0, 1])  # row 0: the other 2.0; row 1: the other 5.0
    assert not torch.equal(other, cpu_indices)
    chosen, expected = suite.by_selection("median", sample, (values.to(suite.CHIP), other.to(suite.CHIP)),
                                          (values, cpu_indices), "forward")
    suite.assert_same(chosen, expected, "forward")
    wrong = torch.tensor([1, 1])  # row 0 selects 1.0, not the median
    chosen, expected = suite.by_selection("median", sample, (values.to(suite.CHIP), wrong.to(suite.CHIP)),
                                          (values, cpu_indices), "forward")
    with pytest.raises(AssertionError):
        suite.assert_same(chosen, expected, "forward")


def _opinfo(name):
    from torch.testing._internal.common_methods_invocations import op_db
    return next(info for info in op_db if info.name == name)


def test_outputs_torch_defines_otherwise_on_devices_are_compared_as_devices_give_them(suite):
    """layer norm's saved statistics for bfloat16 input: the CPU's in bfloat16, a device's in
    float32 (torch's meta function; CUDA's, so nvgpu's): compared in float32 after the CPU's
    are converted. Batch norm in evaluation: the CPU's saved statistics are empty, a device's
    are not: not compared. Both recorded. A chip's own deviation still fails."""
    info = _opinfo("native_layer_norm")
    sample = next(iter(info.sample_inputs("cpu", torch.bfloat16)))
    out, mean, rstd = info.op(sample.input, *sample.args, **sample.kwargs)
    as_device = (out.to(suite.CHIP), mean.float().to(suite.CHIP), rstd.float().to(suite.CHIP))
    record = {}
    actual, expected = suite.as_devices_give(info, sample, as_device, (out, mean, rstd), "s", record)
    assert [t.dtype for t in expected] == [torch.bfloat16, torch.float32, torch.float32]
    suite.assert_same(actual, expected, "s")
    assert record["device_outputs"] == ["s[1]: torch.float32 as on devices (torch.bfloat16 on the CPU), compared in "
                                        "torch.float32", "s[2]: torch.float32 as on devices (torch.bfloat16 on the "
                                        "CPU), compared in torch.float32"]
    # A dtype torch gives no device (float64 statistics) is the chip's own: left to fail.
    wrong = (as_device[0], mean.double().to(suite.CHIP), rstd.double().to(suite.CHIP))
    actual, expected = suite.as_devices_give(info, sample, wrong, (out, mean, rstd), "s", {})
    with pytest.raises(AssertionError, match="dtype"):
        suite.assert_same(actual, expected, "s")

    info = _opinfo("native_batch_norm")
    sample = list(itertools.islice(info.sample_inputs("cpu", torch.float32), 8))[7]  # training=False, [2, 1]
    out, save_mean, save_invstd = info.op(sample.input, *sample.args, **sample.kwargs)
    assert sample.args[4] is False and save_mean.numel() == 0
    channels = sample.input.shape[1]
    as_device = (out.to(suite.CHIP), torch.zeros(channels, device=suite.CHIP), torch.ones(channels, device=suite.CHIP))
    record = {}
    actual, expected = suite.as_devices_give(info, sample, as_device, (out, save_mean, save_invstd), "s", record)
    suite.assert_same(actual, expected, "s")
    assert len(record["device_outputs"]) == 2 and "not compared" in record["device_outputs"][0]
    wrong_out = (out + 1).to(suite.CHIP)
    actual, expected = suite.as_devices_give(info, sample, (wrong_out, *as_device[1:]), (out, save_mean, save_invstd),
                                             "s", {})
    with pytest.raises(AssertionError, match=r"s\[0\]"):
        suite.assert_same(actual, expected, "s")
