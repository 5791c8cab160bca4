"""Random numbers drawn on the chip (the Triton `random` family, Philox keyed by the chip
generator's seed and offset), through torch's public API with CPU fallbacks forbidden:
distributions (moments and a Kolmogorov-Smirnov test), dtypes and layouts, dropout, and
reproducibility (manual_seed, generators, get/set_rng_state, fork_rng).

The npu (its Triton kernels under the interpreter) in CI; TEST_CHIP=nvgpu runs the same tests
with the kernels compiled, on the H200 (scripts/nvgpu_device_run.sh).

The npu's spec gives uniform_, normal_ and random_ vendor kernels (they draw the CPU's numbers);
the tests of those ops on the npu call the Triton kernels themselves (`triton_kernel`)."""
from __future__ import annotations

import math
import os

import pytest
import torch

import torch_fl

CHIP = os.environ.get("TEST_CHIP", "npu")
if "TEST_CHIP" in os.environ:  # a chip beside a native accelerator is registered when asked for
    import torch_fl as _torch_fl

    _torch_fl.init(chips=[CHIP])
N = 1 << 16
if CHIP == "npu":
    pytestmark = pytest.mark.usefixtures("npu_backend")


def _routes_to_triton(op: str) -> bool:
    """Whether the chip's spec sends `op` to the Triton kernels (else a vendor kernel has it)."""
    import importlib

    routes = importlib.import_module(f"torch_fl_{CHIP}.spec").ROUTES
    return routes[op][-1] == "triton" if op in routes else True


def draw(op: str, t: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """`t.<op>(*args)` on the chip: through torch where the chip routes the op to Triton, else
    the Triton kernel itself (the npu's vendor samplers draw the CPU's numbers)."""
    if _routes_to_triton(op):
        return getattr(t, op.partition(".")[0])(*args, **kwargs)
    from torch_fl.triton_ops import kernel_for

    return kernel_for(op)(t, *args, **kwargs)


def chip_tensor(n=N, dtype=torch.float32):
    return torch.empty(n, dtype=dtype, device=CHIP)


def ks_statistic(sample: torch.Tensor, cdf) -> float:
    """sup |F_n(x) - F(x)| of a one-dimensional sample against the distribution function cdf."""
    x, _ = torch.sort(sample.double().cpu())
    n = x.numel()
    f = cdf(x)
    above = torch.arange(1, n + 1, dtype=torch.float64) / n - f
    below = f - torch.arange(0, n, dtype=torch.float64) / n
    return max(above.max().item(), below.max().item())


# Critical value of the KS statistic at significance 1e-4: a correct sampler fails 1 in 10,000 runs.
KS_LIMIT = 2.1 / math.sqrt(N)


@pytest.fixture(autouse=True)
def no_cpu_fallback():
    torch.manual_seed(1234)
    with torch_fl.strict_fallback():
        yield


@pytest.mark.parametrize("op, args, cdf, mean, var", [
    ("uniform_", (-2.0, 3.0), lambda x: ((x + 2) / 5).clamp(0, 1), 0.5, 25 / 12),
    ("normal_", (1.0, 2.0), lambda x: 0.5 * (1 + torch.erf((x - 1) / (2 * math.sqrt(2)))), 1.0, 4.0),
    ("exponential_", (2.0,), lambda x: 1 - torch.exp(-2 * x.clamp(min=0)), 0.5, 0.25),
    ("log_normal_", (0.0, 0.5), lambda x: 0.5 * (1 + torch.erf(torch.log(x) / (0.5 * math.sqrt(2)))),
     math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)),
    ("cauchy_", (1.0, 0.5), lambda x: 0.5 + torch.atan((x - 1) / 0.5) / math.pi, None, None),
])
def test_continuous_distributions(op, args, cdf, mean, var):
    sample = draw(op, chip_tensor(), *args).cpu()
    assert torch.isfinite(sample).all()
    assert ks_statistic(sample, cdf) < KS_LIMIT
    if mean is not None:   # the sample mean within 6 standard errors
        assert abs(sample.double().mean().item() - mean) < 6 * math.sqrt(var / N)
        assert abs(sample.double().var().item() / var - 1) < 0.05


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_bernoulli_with_a_probability(p):
    sample = chip_tensor().bernoulli_(p).cpu()
    assert set(sample.unique().tolist()) <= {0.0, 1.0}
    assert abs(sample.mean().item() - p) <= 6 * math.sqrt(p * (1 - p) / N)


def test_bernoulli_with_a_tensor_of_probabilities_broadcast():
    p = torch.tensor([0.0, 0.25, 0.75, 1.0], device=CHIP)
    sample = torch.empty(N // 4, 4, device=CHIP).bernoulli_(p).cpu()
    frequencies = sample.mean(0)
    assert frequencies[0] == 0 and frequencies[3] == 1
    assert abs(frequencies[1] - 0.25) < 0.02 and abs(frequencies[2] - 0.75) < 0.02
    assert torch.bernoulli(torch.full((N,), 0.5, device=CHIP)).mean().item() == pytest.approx(0.5, abs=0.02)


def test_geometric():
    sample = chip_tensor().geometric_(0.25).cpu()
    assert sample.min() >= 1 and (sample == sample.round()).all()
    assert sample.double().mean().item() == pytest.approx(4.0, rel=0.03)      # 1 / p
    assert sample.double().var().item() == pytest.approx(12.0, rel=0.08)      # (1 - p) / p^2


@pytest.mark.parametrize("dtype, args, low, high", [
    (torch.int64, (3, 10), 3, 10), (torch.int32, (7,), 0, 7), (torch.uint8, (), 0, 256),
    (torch.bool, (), 0, 2), (torch.float32, (-5, 5), -5, 5), (torch.int8, (-128, 128), -128, 128),
])
def test_random_integers_cover_their_range_uniformly(dtype, args, low, high):
    op = {0: "random_", 1: "random_.to", 2: "random_.from"}[len(args)]
    sample = draw(op, chip_tensor(dtype=dtype), *args).cpu().long()
    assert sample.min().item() == low and sample.max().item() == high - 1
    counts = torch.bincount(sample - low, minlength=high - low).double()
    expected = N / (high - low)
    assert ((counts - expected).abs() < 6 * math.sqrt(expected)).all()


def test_random_of_a_floating_tensor_draws_integers_its_mantissa_holds():
    sample = draw("random_", chip_tensor(dtype=torch.float16)).cpu().double()
    assert (sample == sample.round()).all() and sample.min() >= 0 and sample.max() <= 2 ** 11
    assert sample.max() > 2 ** 10


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_floating_dtypes(dtype):
    sample = draw("uniform_", chip_tensor(dtype=dtype)).cpu()
    assert sample.dtype == dtype and sample.min() >= 0 and sample.max() < 1
    assert sample.double().mean().item() == pytest.approx(0.5, abs=0.01)
    sample = draw("normal_", chip_tensor(dtype=dtype)).cpu().double()
    assert sample.mean().item() == pytest.approx(0.0, abs=0.03) and sample.std().item() == pytest.approx(1.0, abs=0.02)
    if dtype == torch.float64:   # 53 random bits: values a float32 draw cannot hold
        u = draw("uniform_", chip_tensor(dtype=dtype)).cpu()
        assert (u != u.float().double()).float().mean() > 0.99


def test_a_non_contiguous_tensor_is_filled_everywhere():
    base = torch.zeros(256, 512, device=CHIP)
    view = base.t()[::2]          # every other column of base, transposed
    view.bernoulli_(1.0)
    filled = base.cpu()
    assert (filled[:, ::2] == 1).all() and (filled[:, 1::2] == 0).all()
    draw("uniform_", view, 2.0, 3.0)
    assert ((base.cpu()[:, ::2] >= 2) & (base.cpu()[:, ::2] < 3)).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dropout_keeps_and_scales_as_aten(dtype):
    x = torch.randn(N, device=CHIP).to(dtype)
    out, mask = torch.ops.aten.native_dropout(x, 0.3, True)
    assert out.device.type == CHIP and mask.dtype == torch.bool and out.dtype == dtype
    x, out, mask = x.cpu().float(), out.cpu().float(), mask.cpu()
    assert mask.float().mean().item() == pytest.approx(0.7, abs=0.01)
    torch.testing.assert_close(out[mask], x[mask] / 0.7, rtol=1e-2 if dtype != torch.float32 else 1e-6, atol=1e-3)
    assert (out[~mask] == 0).all()
    y, keep = torch.ops.aten.native_dropout(x.to(CHIP), 0.3, False)
    assert torch.equal(y.cpu(), x) and keep.cpu().all()


def test_dropout_trains_through_autograd_on_the_chip():
    layer = torch.nn.Dropout(0.5)
    x = torch.ones(1000, device=CHIP, requires_grad=True)
    y = layer(x)
    y.sum().backward()
    kept = y.detach().cpu() != 0
    assert torch.equal(x.grad.cpu(), kept.float() * 2.0)
    assert 0.4 < kept.float().mean().item() < 0.6


def test_a_seed_repeats_the_draws_and_calls_never_reuse_numbers():
    torch.manual_seed(7)
    a = chip_tensor().bernoulli_(0.5)
    b = chip_tensor().bernoulli_(0.5)
    torch.manual_seed(7)
    assert torch.equal(chip_tensor().bernoulli_(0.5).cpu(), a.cpu())
    assert torch.equal(chip_tensor().bernoulli_(0.5).cpu(), b.cpu())
    assert not torch.equal(a.cpu(), b.cpu())
    g = torch.Generator(device=CHIP).manual_seed(3)
    first = chip_tensor().exponential_(generator=g)
    g.manual_seed(3)
    assert torch.equal(chip_tensor().exponential_(generator=g).cpu(), first.cpu())


def test_rng_state_replays_the_draws():
    device_module = getattr(torch, CHIP)
    chip_tensor().bernoulli_(0.5)                    # the offset is not at zero
    state = device_module.get_rng_state()
    a = torch.nn.functional.dropout(torch.ones(N, device=CHIP), 0.25).cpu()
    device_module.set_rng_state(state)
    assert torch.equal(torch.nn.functional.dropout(torch.ones(N, device=CHIP), 0.25).cpu(), a)
    with torch.random.fork_rng(devices=[0], device_type=CHIP):
        chip_tensor().bernoulli_(0.5)
    assert not torch.equal(torch.nn.functional.dropout(torch.ones(N, device=CHIP), 0.25).cpu(), a)
    device_module.set_rng_state(state)
    with torch.random.fork_rng(devices=[0], device_type=CHIP):
        chip_tensor().bernoulli_(0.5)               # forked: the draws after it are unchanged
    assert torch.equal(torch.nn.functional.dropout(torch.ones(N, device=CHIP), 0.25).cpu(), a)


def test_a_generator_objects_state_replays_its_draws():
    """`Generator.get_state`/`set_state` of a private chip generator carry the Philox offset too
    (the host generator's bytes, then 8 of offset), as torch.cuda's carry seed and offset."""
    g = torch.Generator(device=CHIP).manual_seed(11)
    chip_tensor().exponential_(generator=g)            # the offset is not at zero
    state = g.get_state()
    a = chip_tensor().exponential_(generator=g).cpu()
    chip_tensor().exponential_(generator=g)
    g.set_state(state)
    assert torch.equal(chip_tensor().exponential_(generator=g).cpu(), a)
    assert state.numel() == torch.Generator().get_state().numel() + 8
    with pytest.raises(RuntimeError, match=f"RNG state of a {CHIP} generator: expected a ByteTensor"):
        g.set_state(torch.zeros(7, dtype=torch.uint8))


def test_a_cpu_sized_rng_state_is_accepted_and_a_wrong_one_refused():
    device_module = getattr(torch, CHIP)
    device_module.set_rng_state(torch.get_rng_state())    # a CPU generator's state: offset 0
    with pytest.raises(RuntimeError, match=f"RNG state of a {CHIP} device: expected a ByteTensor"):
        device_module.set_rng_state(torch.zeros(7, dtype=torch.uint8))


def test_normal_of_tensor_means_and_deviations_broadcast():
    mean = torch.tensor([0.0, 10.0], device=CHIP)
    std = torch.tensor([[1.0], [3.0]], device=CHIP).expand(2, 1).repeat(N // 4, 1)   # (N/2, 1)
    sample = torch.normal(mean, std).cpu().double()          # (N/2, 2): rows alternate std 1, 3
    assert sample.shape == (N // 2, 2)
    for column, m in enumerate((0.0, 10.0)):
        for row, s in enumerate((1.0, 3.0)):
            part = sample[row::2, column]
            assert abs(part.mean().item() - m) < 6 * s / math.sqrt(part.numel())
            assert part.std().item() == pytest.approx(s, rel=0.04)
    assert torch.normal(mean, 2.0).shape == (2,) and torch.normal(1.0, std).shape == std.shape
    out = torch.empty(0, device=CHIP)
    torch.normal(torch.zeros(N, device=CHIP), 1.0, out=out)
    assert out.shape == (N,) and out.cpu().std().item() == pytest.approx(1.0, rel=0.03)
    p = torch.full((N,), 0.25, device=CHIP)
    into = torch.empty(0, device=CHIP)
    torch.bernoulli(p, out=into)
    assert into.shape == (N,) and into.cpu().mean().item() == pytest.approx(0.25, abs=0.02)


def test_multinomial_with_replacement_follows_the_weights():
    weights = torch.tensor([[0.0, 1.0, 3.0, 0.0, 4.0], [5.0, 0.0, 0.0, 5.0, 0.0]], device=CHIP)
    picked = torch.multinomial(weights, 4000, replacement=True).cpu()
    assert picked.shape == (2, 4000) and picked.dtype == torch.int64
    for row, w in enumerate(weights.cpu()):
        counts = torch.bincount(picked[row], minlength=5).double()
        assert (counts[w == 0] == 0).all()                        # a zero weight is never drawn
        expected = 4000 * w / w.sum()
        assert ((counts - expected).abs() <= 6 * expected.clamp(min=1).sqrt()).all(), counts
    one_row = torch.multinomial(weights[0], 10, replacement=True)
    assert one_row.shape == (10,)


def test_multinomial_without_replacement_draws_distinct_categories():
    # One draw per row of 1,000 equal rows: the rows are drawn independently.
    weights = torch.tensor([1.0, 0.0, 2.0, 7.0], device=CHIP).expand(1000, 4)
    picked = torch.multinomial(weights, 3).cpu()
    assert picked.shape == (1000, 3)
    assert (picked.sort(dim=1).values == torch.tensor([0, 2, 3])).all()  # every positive weight, once a row
    frequency = torch.bincount(picked[:, 0], minlength=4).double() / 1000
    assert frequency[3].item() == pytest.approx(0.7, abs=0.1) and frequency[1] == 0   # 0.1: 7 sigma
    assert torch.multinomial(weights[0], 3).cpu().sort().values.tolist() == [0, 2, 3]  # one row


def test_randperm_is_a_uniform_permutation():
    perm = torch.randperm(1000, device=CHIP).cpu()
    assert perm.dtype == torch.int64 and torch.equal(perm.sort().values, torch.arange(1000))
    first = torch.stack([torch.randperm(4, device=CHIP) for _ in range(240)]).cpu()[:, 0]
    counts = torch.bincount(first, minlength=4).double()
    assert ((counts - 60).abs() < 6 * math.sqrt(60)).all(), counts
    torch.manual_seed(11)
    a = torch.randperm(50, device=CHIP).cpu()
    torch.manual_seed(11)
    assert torch.equal(torch.randperm(50, device=CHIP).cpu(), a)
