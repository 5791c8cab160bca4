"""A generated chip under torch.compile: Dynamo's and AOTAutograd's graphs run by the chip's
own kernels (backend "aot_eager"), and, where the spec's compile.inductor is "triton",
Inductor's own Triton kernels for the chip (the default backend, and max-autotune), forward
and backward, against the same model run eagerly on the chip; dynamic shapes with a bounded
number of compiles; no graph break of the chip's making; graph replay refused by name; and,
where compile.inductor is "none", Inductor's refusal by name.

Written once for every chip: a chip suite's tests/test_compile.py imports these tests (after
its conftest.py configured torch_fl.testing.suite). The transformers models need int64 token
ids and float32 and are defined only for chips with both.
"""
import copy

import pytest
import torch
import torch.nn as nn

from torch_fl import routes
from torch_fl.testing import suite

_suite = suite.chip()  # configured by the chip's conftest.py, imported before any test module
SPEC = _suite.spec
CHIP = SPEC.CHIP
FLOAT = getattr(torch, _suite.float_dtype)
# Compiled and eager runs use the same kernels; AOTAutograd's decompositions may round otherwise.
TOLERANCE = dict(atol=1e-4, rtol=1e-3) if FLOAT == torch.float32 else dict(atol=2e-2, rtol=2e-2)
INDUCTOR = getattr(SPEC, "INDUCTOR", "none")
# The backends a chip's graphs compile with: Inductor where it generates the chip's kernels.
BACKENDS = ("aot_eager", "inductor") if INDUCTOR == "triton" else ("aot_eager",)


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))


def conv_block() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))


class _Counting:
    """A backend (aot_eager or Inductor), counting the graphs Dynamo hands it."""

    def __init__(self, backend: str):
        self.backend = backend
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        if self.backend == "inductor":
            from torch._inductor.compile_fx import compile_fx

            return compile_fx(graph_module, example_inputs)
        from torch._dynamo.backends.debugging import aot_eager

        return aot_eager(graph_module, example_inputs)


def compiled_matches_eager(make, *inputs, backend="aot_eager", dynamic=None, mode=None):
    """One forward and backward of `make()` on the chip, compiled and eager, from the same
    weights: outputs and every gradient agree."""
    torch.manual_seed(0)
    eager = make().to(device=CHIP, dtype=FLOAT)
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, backend=backend, dynamic=dynamic, mode=mode)
    chip_inputs = [x.to(CHIP) for x in inputs]
    expected = eager(*chip_inputs)
    actual = compiled(*chip_inputs)
    expected, actual = (getattr(out, "logits", out) for out in (expected, actual))
    assert actual.device.type == CHIP
    torch.testing.assert_close(actual.cpu(), expected.cpu(), **TOLERANCE)
    expected.square().mean().backward()
    actual.square().mean().backward()
    for (name, want), got in zip(eager.named_parameters(), compiled_model.parameters()):
        if want.grad is None:
            assert got.grad is None, name
            continue
        assert got.grad is not None and got.grad.device.type == CHIP, name
        torch.testing.assert_close(got.grad.cpu(), want.grad.cpu(), **TOLERANCE, msg=lambda m, n=name: f"{n}: {m}")


by_backend = pytest.mark.parametrize("backend", BACKENDS)


@by_backend
def test_compiled_mlp_matches_eager(backend):
    compiled_matches_eager(mlp, torch.randn(8, 16, dtype=FLOAT), backend=backend)


# Batch norm counts batches in int64. (A chip without a convolution kernel convolves on its chain.)
if "int64" in SPEC.DTYPES:
    @by_backend
    def test_compiled_conv_block_with_batch_norm_matches_eager(backend):
        compiled_matches_eager(conv_block, torch.randn(4, 3, 8, 8, dtype=FLOAT), backend=backend)


# Traced convolutions: torch predicts a PrivateUse1 convolution contiguous; the chip's kernels
# return channels-last as cuDNN does, and torch_fl.conv_layout tells tracing so. Inductor asserts
# the traced strides, and its layout optimisation gives convolutions channels-last operands.
CONV_CASES = {   # name: (input shape, weight shape, groups, which operands are channels-last)
    "contiguous": ((2, 4, 6, 6), (8, 4, 3, 3), 1, ""),
    "input_channels_last": ((2, 4, 6, 6), (8, 4, 3, 3), 1, "input"),
    "weight_channels_last": ((2, 4, 6, 6), (8, 4, 3, 3), 1, "weight"),
    "both_channels_last": ((2, 4, 6, 6), (8, 4, 3, 3), 1, "input weight"),
    "depthwise_channels_last": ((2, 8, 6, 6), (8, 1, 3, 3), 8, "input weight"),
    "3d_channels_last": ((1, 2, 4, 4, 4), (3, 2, 3, 3, 3), 1, "input"),
    "1d": ((2, 4, 9), (6, 4, 3), 1, ""),
}


@pytest.mark.parametrize("case", CONV_CASES)
def test_convolution_strides_are_the_traced_strides(case):
    from torch._subclasses.fake_tensor import FakeTensorMode

    input_shape, weight_shape, groups, channels_last = CONV_CASES[case]
    last = {4: torch.channels_last, 5: torch.channels_last_3d}.get(len(input_shape), torch.contiguous_format)

    def laid_out(shape, name):
        t = torch.randn(shape, dtype=FLOAT, device=CHIP)
        return t.contiguous(memory_format=last) if name in channels_last else t

    input, weight = laid_out(input_shape, "input"), laid_out(weight_shape, "weight")
    dims = len(input_shape) - 2
    conv = dict(stride=[1] * dims, padding=[1] * dims, dilation=[1] * dims, transposed=False,
                output_padding=[0] * dims, groups=groups)
    out = torch.ops.aten.convolution(input, weight, None, **conv)
    grads = torch.ops.aten.convolution_backward(torch.ones_like(out), input, weight, [weight_shape[0]],
                                                **conv, output_mask=[True, True, True])
    with FakeTensorMode() as mode:
        fake_input, fake_weight = mode.from_tensor(input), mode.from_tensor(weight)
        fake_out = torch.ops.aten.convolution(fake_input, fake_weight, None, **conv)
        fake_grads = torch.ops.aten.convolution_backward(
            torch.ones_like(fake_out), fake_input, fake_weight, [weight_shape[0]], **conv, output_mask=[True, True, True])
    for name, real, fake in zip(("output", "grad_input", "grad_weight", "grad_bias"), (out, *grads),
                                (fake_out, *fake_grads)):
        assert real.shape == fake.shape, name
        # A size-1 dimension's stride is free (Inductor's assert_size_stride skips it too).
        assert significant_strides(real) == significant_strides(fake), \
            f"{CHIP} convolution {name}: strides {real.stride()}, traced {fake.stride()} (torch_fl.conv_layout)"


def significant_strides(t: torch.Tensor) -> list:
    return [stride if size > 1 else None for size, stride in zip(t.shape, t.stride())]


if INDUCTOR == "triton" and "int64" in SPEC.DTYPES:
    def test_compiled_conv_net_in_channels_last_matches_eager():
        # Inductor's layout optimisation (forced: it weighs the graph's size) makes the
        # convolutions' operands channels-last, and asserts the strides it traced.
        import torch._inductor.config

        torch._dynamo.reset()
        with torch._inductor.config.patch(force_layout_optimization=True):
            compiled_matches_eager(conv_block, torch.randn(4, 3, 8, 8, dtype=FLOAT), backend="inductor")


@by_backend
def test_dynamic_shapes_compile_a_bounded_number_of_times(backend):
    import torch._dynamo

    torch._dynamo.reset()
    counting = _Counting(backend)
    model = mlp().to(device=CHIP, dtype=FLOAT)
    compiled = torch.compile(model, backend=counting, dynamic=True)
    for batch in (2, 3, 5, 7, 11):
        x = torch.randn(batch, 16, dtype=FLOAT, device=CHIP)
        torch.testing.assert_close(compiled(x).cpu(), model(x).cpu(), **TOLERANCE)
    assert counting.graphs == 1, f"{counting.graphs} graphs for 5 batch sizes under dynamic=True"


class RecurrentLM(nn.Module):
    """Embedding, a two-layer RNN, a head: Dynamo does not trace recurrent layers, so the RNN
    runs eagerly inside the compiled call, with Dynamo's frame hook on. (A tanh RNN: an LSTM
    on a PrivateUse1 device takes torch's fused cell, `_thnn_fused_lstm_cell`, which not every
    chip has.)"""

    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(32, 16)
        self.rnn = nn.RNN(16, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 32)

    def forward(self, tokens):
        return self.head(self.rnn(self.tokens(tokens))[0])


# Token ids are int64.
if "int64" in SPEC.DTYPES:
    def test_chip_kernels_between_graph_breaks_are_not_traced():
        # Each of the chip's ops the RNN calls runs its kernel (vendor, Triton, chain) eagerly
        # under Dynamo's frame hook: the kernels' Python frames must not be traced as user code
        # (through Triton's interpreter that failed outright, on fake tensors).
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        compiled_matches_eager(RecurrentLM, torch.randint(0, 32, (2, 6)))
        traced = [reason.splitlines()[0] + reason.splitlines()[1] for reason in counters["graph_break"]
                  if "torch_fl" in reason or "triton" in reason]
        assert traced == [], traced


def graph_breaks(fn, *args) -> list:
    import torch._dynamo

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(fn)(*args)
    return [reason.reason.splitlines()[0] for reason in explanation.break_reasons]


def test_no_graph_break_of_the_chips_making():
    model = mlp().to(device=CHIP, dtype=FLOAT)
    x = torch.randn(8, 16, dtype=FLOAT, device=CHIP)

    def step(x):
        torch.accelerator.current_stream().synchronize   # device-generic stream code in the graph
        return model(x).sum()

    assert graph_breaks(step, x) == []


def test_the_chips_own_stream_functions_stay_in_the_graph():
    # Dynamo traces torch.cuda's and torch.accelerator's stream functions by name; the chip's
    # answer through torch.accelerator while compiling (the chip is torch's accelerator).
    module = getattr(torch, CHIP)
    x = torch.randn(8, 16, dtype=FLOAT, device=CHIP)

    def step(x):
        y = x * 2
        module.current_stream()
        module.current_stream(module.current_device())
        return y.sum() + module.current_device()

    assert graph_breaks(step, x) == []
    torch.testing.assert_close(torch.compile(step, backend="aot_eager")(x).cpu(), step(x).cpu(), **TOLERANCE)


# The matrix products Inductor's graphs call with out= (its extern kernels, `mm(a, b, out=buf)`):
# where the spec gives these forms a vendor kernel that computes in the chip's float, a compiled
# graph's products run on it, not on the chain.
OUT_FORMS_ON_VENDOR = tuple(op for op in SPEC.INDUCTOR_OUT_FORMS
                            if routes.route(SPEC, op).kernel is not None
                            and _suite.float_dtype in getattr(SPEC, "KERNEL_DTYPES", {}).get(op, SPEC.DTYPES))

if INDUCTOR == "triton" and OUT_FORMS_ON_VENDOR:
    def test_compiled_products_run_on_the_vendor_kernels():
        import torch_fl

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4, bias=False)).to(device=CHIP, dtype=FLOAT)
        compiled = torch.compile(model)
        x = torch.randn(8, 16, dtype=FLOAT, device=CHIP)
        torch_fl.reset_fallback_stats()
        compiled(x).square().mean().backward()
        ran = {op: paths for op, paths in torch_fl.fallback_stats().items() if op in OUT_FORMS_ON_VENDOR}
        assert ran, f"the compiled graph called none of {OUT_FORMS_ON_VENDOR}: {torch_fl.fallback_stats()}"
        assert all(set(paths) == {"vendor"} for paths in ran.values()), ran


if INDUCTOR == "triton":
    def test_inductor_writes_triton_kernels_that_run_on_the_chips_stream():
        from torch._inductor.utils import run_and_get_code

        torch._dynamo.reset()
        model = mlp().to(device=CHIP, dtype=FLOAT)
        x = torch.randn(8, 16, dtype=FLOAT, device=CHIP)
        out, (code, *_) = run_and_get_code(torch.compile(model), x)
        assert out.device.type == CHIP
        torch.testing.assert_close(out.cpu(), model(x).cpu(), **TOLERANCE)
        assert "async_compile.triton(" in code and "@triton.jit" in code, "no Triton kernel in Inductor's code"
        assert f"torch.{CHIP}.current_stream(" in code, "the kernels are not launched on the chip's stream"

    def test_inductor_kernels_follow_the_current_stream():
        # Queued on a side stream of the chip, behind a long producer on the same stream: the
        # result must be complete once that stream is synchronized.
        module = getattr(torch, CHIP)
        torch._dynamo.reset()
        fn = torch.compile(lambda a: (a * 2 + 1).sin())
        base = torch.arange(1 << 22, dtype=FLOAT) % 97
        fn(base.to(CHIP))
        side = module.Stream()
        with module.stream(side):
            a = base.to(CHIP, non_blocking=True) * 1.0
            out = fn(a)
        side.synchronize()
        torch.testing.assert_close(out.cpu(), (base * 2 + 1).sin(), **TOLERANCE)

    def test_max_autotune_matches_eager_without_graph_replay():
        torch._dynamo.reset()
        # Said where Inductor schedules the graph: not where its on-disk cache serves the code.
        with pytest.warns(UserWarning, match=f"chip '{CHIP}' runs without graph replay"), \
                torch._inductor.config.patch(force_disable_caches=True):
            compiled_matches_eager(mlp, torch.randn(8, 16, dtype=FLOAT), backend="inductor", mode="max-autotune")

    def test_graph_replay_is_refused_by_name():
        from torch_fl.compile import graph_replay_refusal

        torch._dynamo.reset()
        model = mlp().to(device=CHIP, dtype=FLOAT)
        with pytest.raises(Exception) as raised:
            torch.compile(model, mode="reduce-overhead")(torch.randn(8, 16, dtype=FLOAT, device=CHIP))
        assert graph_replay_refusal(CHIP) in str(raised.value)
else:
    # Without float32 Inductor's lowering makes a float32 tensor on the chip first (it computes
    # float16 in float32), refused by the chip's dtype error.
    @pytest.mark.skipif("float32" not in SPEC.DTYPES, reason="no float32 on the chip: its dtype error comes first")
    def test_inductor_refuses_the_chip_by_name():
        from torch_fl.compile import inductor_refusal

        model = mlp().to(device=CHIP, dtype=FLOAT)
        x = torch.randn(8, 16, dtype=FLOAT, device=CHIP)
        torch._dynamo.reset()
        with pytest.raises(Exception) as raised:
            torch.compile(model)(x)
        assert inductor_refusal(CHIP) in str(raised.value)
        # CPU graphs in the same process still compile with Inductor.
        cpu = mlp()
        y = torch.randn(3, 16)
        torch.testing.assert_close(torch.compile(cpu)(y), cpu(y))


if "int64" in SPEC.DTYPES and "float32" in SPEC.DTYPES:
    def _transformers():
        return pytest.importorskip("transformers")

    @by_backend
    def test_compiled_gpt2_matches_eager(backend):
        transformers = _transformers()
        config = transformers.GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        compiled_matches_eager(lambda: transformers.GPT2LMHeadModel(config), torch.randint(0, 96, (2, 12)),
                               backend=backend)

    @by_backend
    def test_compiled_llama_matches_eager(backend):
        transformers = _transformers()
        config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
        compiled_matches_eager(lambda: transformers.LlamaForCausalLM(config), torch.randint(0, 96, (2, 12)),
                               backend=backend)


__all__ = [name for name in tuple(globals()) if name.startswith("test_")]
