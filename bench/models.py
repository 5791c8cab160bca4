"""Real-model training steps (issue 19): a generated chip against a native device, model by model.

Every model is built in code with random weights (nothing is downloaded): transformers'
GPT-2, Llama (grouped-query attention), BERT, T5 and ViT; torch.nn's TransformerEncoder,
LSTM and GRU; torchvision's ResNet-18, ResNet-50, MobileNetV3 and EfficientNet-B0 and timm's
ConvNeXt-tiny where those packages are installed (else the model's row says it was skipped).

Per model and precision, one worker process per device: both load the same weights and the
same batches, and run their steps in alternating blocks (see `run_pair`), so clock and thermal
drift hit both alike. Reported per model: the median step time of each device and their ratio
(chip / native), the ratio of their host times (until a step's last op is queued), the
relative difference of their losses, and the chip's CPU fallbacks (torch_fl.fallback_stats()).
Then the sweep's median and worst ratio per precision.

  python bench/models.py --chip nvgpu --native cuda --size realistic --out bench/results/h200/models.json
  python bench/models.py --chip npu --native cpu --size small --models gpt2 lstm --steps 3 --warmup 1

With --compile default, both workers train torch.compile(model) (Inductor; the chip's Triton
kernels where its spec's compile.inductor is triton): compiled chip against compiled native
(--compile aot_eager: Dynamo's and AOTAutograd's graphs run by each device's own kernels). The
eager run of the same sweep, on the same machine, gives compiled against eager. Compiled runs
count each worker's graph breaks, and on the chip those the chip caused (torch_fl.coverage).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import itertools
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from functools import partial
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

SIZES = ("small", "realistic")  # small: tiny configs, host-bound; realistic: GPU-bound configs
OPTIMIZERS = ("adamw", "adamw-fused", "sgd")
PRECISIONS = ("fp32", "bf16")
BATCHES = 2           # distinct batches, cycled through by step number (the same on both devices)
SEED = 0

NATIVE_WORKER_NOTE = (
    "The native worker runs with TORCH_FL_CHIPS=none, so no generated chip is registered in it: "
    "the native device's baseline is that of a process without the chip. (Where torch drives a "
    "native accelerator, `import torch` leaves chips out by default anyway: a registered "
    "PrivateUse1 backend becomes torch's one accelerator, and native CUDA backward would then "
    "fail in torch's autograd engine, pytorch/pytorch#161129; torch_fl.coexistence.) The chip "
    "worker asks for its chip with torch_fl.init(chips=[...]). Each row records the native "
    "worker's PrivateUse1 backend name (native_privateuse1_backend, 'privateuseone' when none "
    "is loaded).")
LOSS_NOTE = (
    "step-0 loss: one forward in eval() mode (dropout off; gradients on, so no inference fast "
    "path) on the first batch before training, in the precision's autocast: deterministic on "
    "both devices. Training losses are recorded too (train_losses) but differ between the "
    "devices from the first step on, as dropout draws other random numbers on each; the last "
    "one's difference is reported for scale only.")
TIMING_NOTE = (
    "step: median time of a training step (zero_grad, forward, loss, backward, optimizer step), "
    "the device drained before and after; host: until the step's last op is queued (as "
    "bench/resnet50.py's _host_share). CPU fallbacks: the chip's calls on torch_fl's 'cpu' path "
    "from the eval forward to the last timed step.")


# ---------------------------------------------------------------- the models

@dataclasses.dataclass(frozen=True)
class ModelSpec:
    package: str                       # importable, or the model is skipped
    build: Callable[[str], tuple]      # size -> (model on the CPU, random weights; batch(generator) -> inputs)
    loss: Callable[[Any, dict], Any]   # (model, inputs) -> scalar loss


def _hf_loss(model, inputs: dict):
    return model(**inputs).loss


def _classifier_loss(model, inputs: dict):

    return F.cross_entropy(model(inputs["images"]), inputs["labels"])


def _next_token_loss(model, inputs: dict):

    logits = model(inputs["tokens"])
    return F.cross_entropy(logits.flatten(0, 1), inputs["targets"].flatten())


def _causal_lm_batch(vocab: int, shape: tuple, generator) -> dict:
    ids = torch.randint(0, vocab, shape, generator=generator)
    return {"input_ids": ids, "labels": ids}  # the model shifts the labels itself


def _classification_batch(vocab: int, shape: tuple, labels: int, generator) -> dict:
    return {"input_ids": torch.randint(0, vocab, shape, generator=generator),
            "labels": torch.randint(0, labels, shape[:1], generator=generator)}


def _seq2seq_batch(vocab: int, shape: tuple, generator) -> dict:
    batch, length = shape
    return {"input_ids": torch.randint(0, vocab, (batch, length), generator=generator),
            "labels": torch.randint(0, vocab, (batch, length // 4), generator=generator)}


def _next_token_batch(vocab: int, shape: tuple, generator) -> dict:
    tokens = torch.randint(0, vocab, (shape[0], shape[1] + 1), generator=generator)
    return {"tokens": tokens[:, :-1], "targets": tokens[:, 1:]}


def _image_batch(shape: tuple, classes: int, generator, key: str = "images") -> dict:
    batch, side = shape
    return {key: torch.randn(batch, 3, side, side, generator=generator),
            "labels": torch.randint(0, classes, (batch,), generator=generator)}


def _image_shape(size: str, realistic_batch: int = 64) -> tuple[tuple, int]:
    """(batch, side) and classes: 2 images of 32x32 in 10 classes, or ImageNet's 224x224 in 1000."""
    return ((2, 32), 10) if size == "small" else ((realistic_batch, 224), 1000)


def _gpt2(size: str):
    from transformers import GPT2Config, GPT2LMHeadModel

    if size == "small":
        config, shape = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64), (2, 32)
    else:
        config, shape = GPT2Config(), (8, 512)  # GPT-2 124M; lm_head tied to the token embedding
    return GPT2LMHeadModel(config), partial(_causal_lm_batch, config.vocab_size, shape)


def _llama(size: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    if size == "small":
        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, vocab_size=512, max_position_embeddings=64)
        shape = (2, 32)
    else:  # about 250M parameters, 4 query heads per key/value head
        config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16, num_attention_heads=16,
                             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024)
        shape = (8, 512)
    return LlamaForCausalLM(config), partial(_causal_lm_batch, config.vocab_size, shape)


def _bert(size: str):
    from transformers import BertConfig, BertForSequenceClassification

    if size == "small":
        config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                            vocab_size=512, max_position_embeddings=64, num_labels=2)
        shape = (2, 32)
    else:
        config, shape = BertConfig(num_labels=2), (16, 512)  # BERT-base
    return BertForSequenceClassification(config), partial(_classification_batch, config.vocab_size, shape, 2)


def _t5(size: str):
    from transformers import T5Config, T5ForConditionalGeneration

    if size == "small":
        config = T5Config(vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                          decoder_start_token_id=0, pad_token_id=0)
        shape = (2, 32)
    else:  # T5-base; targets a quarter of the source length
        config = T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12,
                          decoder_start_token_id=0, pad_token_id=0)
        shape = (16, 512)
    return T5ForConditionalGeneration(config), partial(_seq2seq_batch, config.vocab_size, shape)


def _vit(size: str):
    from transformers import ViTConfig, ViTForImageClassification

    shape, classes = _image_shape(size)
    if size == "small":
        config = ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, num_labels=classes)
    else:
        config = ViTConfig(num_labels=classes)  # ViT-B/16 at 224x224
    return ViTForImageClassification(config), partial(_image_batch, shape, classes, key="pixel_values")


class TokenEncoder(nn.Module):
    """nn.TransformerEncoder between a token (+ learned position) embedding and a linear head."""

    def __init__(self, vocab: int, width: int, heads: int, layers: int, length: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(length, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.head(self.encoder(self.tokens(tokens) + self.positions(positions)))


class RecurrentLM(nn.Module):
    """An LSTM or GRU between a token embedding and a linear head (dropout between its layers)."""

    def __init__(self, kind: str, vocab: int, width: int, layers: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.rnn = getattr(nn, kind)(width, width, layers, batch_first=True, dropout=0.1)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.rnn(self.tokens(tokens))[0])


def _transformer_encoder(size: str):
    if size == "small":
        vocab, width, heads, layers, shape = 512, 64, 4, 2, (2, 32)
    else:
        vocab, width, heads, layers, shape = 32000, 1024, 16, 12, (16, 512)
    model = TokenEncoder(vocab, width, heads, layers, length=shape[1])
    return model, partial(_next_token_batch, vocab, shape)


def _recurrent(kind: str, size: str):
    # Few time steps when small: the chip runs a recurrent layer step by step, op by op.
    vocab, width, layers, shape = (512, 64, 2, (2, 8)) if size == "small" else (32000, 1024, 2, (32, 256))
    return RecurrentLM(kind, vocab, width, layers), partial(_next_token_batch, vocab, shape)


def _resnet(depth: int, size: str):
    from torchvision.models import resnet

    shape, classes = _image_shape(size)
    block = resnet.BasicBlock if depth == 18 else resnet.Bottleneck
    # Small: one block per stage (the same block kind); realistic: the real depth.
    layers = [1, 1, 1, 1] if size == "small" else {18: [2, 2, 2, 2], 50: [3, 4, 6, 3]}[depth]
    return resnet.ResNet(block, layers, num_classes=classes), partial(_image_batch, shape, classes)


def _mobilenet_v3(size: str):
    import torchvision

    shape, classes = _image_shape(size)
    build = torchvision.models.mobilenet_v3_small if size == "small" else torchvision.models.mobilenet_v3_large
    return build(num_classes=classes), partial(_image_batch, shape, classes)


def _efficientnet_b0(size: str):
    import torchvision

    shape, classes = _image_shape(size)  # stochastic depth: random ops in every training step
    return torchvision.models.efficientnet_b0(num_classes=classes), partial(_image_batch, shape, classes)


def _convnext_tiny(size: str):
    import timm
    from timm.models.convnext import ConvNeXt

    shape, classes = _image_shape(size)
    if size == "small":
        model = ConvNeXt(depths=(1, 1, 1, 1), dims=(16, 32, 64, 128), num_classes=classes)
    else:
        model = timm.create_model("convnext_tiny", pretrained=False, num_classes=classes)
    return model, partial(_image_batch, shape, classes)


REGISTRY: dict[str, ModelSpec] = {
    "gpt2": ModelSpec("transformers", _gpt2, _hf_loss),
    "llama": ModelSpec("transformers", _llama, _hf_loss),
    "bert": ModelSpec("transformers", _bert, _hf_loss),
    "t5": ModelSpec("transformers", _t5, _hf_loss),
    "vit": ModelSpec("transformers", _vit, _hf_loss),
    "transformer_encoder": ModelSpec("torch", _transformer_encoder, _next_token_loss),
    "lstm": ModelSpec("torch", partial(_recurrent, "LSTM"), _next_token_loss),
    "gru": ModelSpec("torch", partial(_recurrent, "GRU"), _next_token_loss),
    "resnet18": ModelSpec("torchvision", partial(_resnet, 18), _classifier_loss),
    "resnet50": ModelSpec("torchvision", partial(_resnet, 50), _classifier_loss),
    "mobilenet_v3": ModelSpec("torchvision", _mobilenet_v3, _classifier_loss),
    "efficientnet_b0": ModelSpec("torchvision", _efficientnet_b0, _classifier_loss),
    "convnext_tiny": ModelSpec("timm", _convnext_tiny, _classifier_loss),
}


def missing_package(spec: ModelSpec) -> str | None:
    """The package a model needs when it is not installed (the model is then skipped)."""
    return None if importlib.util.find_spec(spec.package) is not None else spec.package


# ---------------------------------------------------------------- one training step

def make_optimizer(name: str, parameters):
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=0.01, momentum=0.9)
    # "adamw": torch's default implementation for the device (foreach on CUDA and on the chip)
    return torch.optim.AdamW(parameters, lr=1e-4, fused=True if name == "adamw-fused" else None)


def autocast(device: str, precision: str):
    if precision == "bf16":
        return torch.autocast(device.split(":")[0], dtype=torch.bfloat16)
    return contextlib.nullcontext()


def make_step(model, loss_fn, batches: list, optimizer, device: str, precision: str):
    """One training step per call on the next batch in turn; returns the loss (on the device)."""
    counter = itertools.count()

    def step():
        inputs = batches[next(counter) % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, precision):
            loss = loss_fn(model, inputs)
        loss.backward()
        optimizer.step()
        return loss

    return step


def eval_loss(model, loss_fn, inputs: dict, device: str, precision: str) -> float:
    """The loss of one forward in eval() mode (no dropout, no random ops): the same on any device
    up to rounding, so the chip's and the native device's can be compared before training.
    Gradients stay enabled so that torch's inference fast paths (nn.TransformerEncoder's) keep
    out of it: the ops are the training forward's, less dropout."""
    model.eval()
    with autocast(device, precision):
        value = loss_fn(model, inputs).item()
    model.train()
    return value


def timed_step(step, device: str) -> tuple[float, float, float]:
    """(host s, step s, loss) of one step: host until its last op is queued, step until the
    device is drained (bench/resnet50.py's _host_share, here for every timed step)."""
    _common.synchronize(device)
    start = time.perf_counter()
    loss = step()
    queued = time.perf_counter()
    _common.synchronize(device)
    done = time.perf_counter()
    return queued - start, done - start, loss.item()


# ---------------------------------------------------------------- the worker (one device)

_PROTOCOL = "@bench-models "  # prefixes the worker's messages; other stdout lines are a library's


def _send(message: dict) -> None:
    print(_PROTOCOL + json.dumps(message), flush=True)


def _to_device(inputs: dict, device: str) -> dict:
    return {key: value.to(device) for key, value in inputs.items()}


def _load_model(name: str, size: str, saved: dict, device: str):
    """The model's architecture, the parent's weights copied in on the CPU, then moved to `device`."""
    torch.manual_seed(SEED)
    model, _ = REGISTRY[name].build(size)
    model.load_state_dict(saved["state_dict"])
    return model.to(device)


def _cpu_fallbacks() -> dict[str, int]:
    """op -> calls that ran on the CPU path since the last reset (torch_fl.fallback_stats())."""
    import torch_fl

    stats = torch_fl.fallback_stats()
    return {op: paths["cpu"] for op, paths in stats.items() if paths.get("cpu")}


def _paths() -> dict[str, int]:
    """Calls per path (vendor, triton, cpu, ...) since the last reset, all ops together."""
    import torch_fl

    totals: dict[str, int] = {}
    for paths in torch_fl.fallback_stats().values():
        for path, calls in paths.items():
            totals[path] = totals.get(path, 0) + calls
    return totals


def _graph_breaks(device: str) -> dict[str, int]:
    """Dynamo's graph breaks in this worker: all of them, and those the chip's code caused."""
    from torch_fl.coverage import compile_report

    report = compile_report(device.split(":")[0])
    return {"all": sum(b.count for b in report.breaks), "chip": report.chip_breaks, "graphs": report.graphs}


def serve(args) -> None:
    """Load, measure the eval loss, warm up, then run the blocks of steps the parent asks for."""
    device, is_chip = args.worker, args.role == "chip"
    precision, optimizer = args.precision[0], args.optimizer[0]  # one of each per worker
    if is_chip:
        import torch_fl

        _common.ask_for_chip(device)
    saved = torch.load(args.inputs, weights_only=True)
    model = _load_model(args.model, args.size, saved, device)
    if args.compile == "aot_eager":   # compiled in the warmup steps
        model = torch.compile(model, backend="aot_eager")
    elif args.compile != "none":
        model = torch.compile(model, mode=args.compile)
    batches = [_to_device(b, device) for b in saved["batches"]]
    if is_chip:
        torch_fl.reset_fallback_stats()
    loss_fn = REGISTRY[args.model].loss
    first_loss = eval_loss(model, loss_fn, batches[0], device, precision)
    step = make_step(model, loss_fn, batches, make_optimizer(optimizer, model.parameters()), device, precision)
    warmup = [timed_step(step, device) for _ in range(args.warmup)]  # compiles, autotuning, caches
    _send({"ready": True, "eval_loss": first_loss, "warmup_losses": [loss for _, _, loss in warmup],
           "privateuse1_backend": torch._C._get_privateuse1_backend_name()})
    for line in sys.stdin:
        timings = [timed_step(step, device) for _ in range(int(line))]
        _send({"host_s": [t[0] for t in timings], "step_s": [t[1] for t in timings],
               "losses": [t[2] for t in timings]})
    _send({"cpu_fallbacks": _cpu_fallbacks() if is_chip else {}, "paths": _paths() if is_chip else {},
           "graph_breaks": _graph_breaks(device) if args.compile != "none" else None})


def worker(args) -> None:
    """`serve`, any error sent to the parent as its first line (the traceback on stderr)."""
    import traceback

    try:
        serve(args)
    except Exception as error:  # noqa: BLE001 - reported to the parent, which goes on with the sweep
        traceback.print_exc()
        _send({"error": first_line(error)})
        sys.exit(1)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


# ---------------------------------------------------------------- the parent (the sweep)

class WorkerFailed(Exception):
    pass


class Worker:
    """One device's worker process. Its output is read on threads, so that a worker that hangs
    meets the deadline instead of blocking the sweep, and one that crashes reports its last words."""

    def __init__(self, label: str, argv: list[str], env: dict):
        self.label = label  # "chip npu", "native cpu": who failed, in the report
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.messages: queue.Queue = queue.Queue()
        self.last_stderr: deque = deque(maxlen=1)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self.stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.stderr_reader.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(_PROTOCOL):
                self.messages.put(json.loads(line[len(_PROTOCOL):]))
            else:
                sys.stderr.write(line)
        self.messages.put(None)  # end of output: the process is gone

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            sys.stderr.write(line)
            if line.strip():
                self.last_stderr.append(line.strip())

    def send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except OSError:
            raise WorkerFailed(self._exit_reason()) from None

    def finish(self) -> None:
        """No more steps: the worker sends its final counts and exits."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()

    def receive(self, deadline: float, timeout: float) -> dict:
        try:
            message = self.messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise WorkerFailed(f"{self.label}: timed out (no answer within the {timeout:g} s limit)") from None
        if message is None:
            raise WorkerFailed(self._exit_reason())
        if "error" in message:
            raise WorkerFailed(f"{self.label}: {message['error']}")
        return message

    def stop(self, kill: bool = False) -> None:
        """Let the worker exit; `kill` when the pair failed (nothing more to hear from it)."""
        self.finish()
        if not kill:
            try:
                self.proc.wait(timeout=10)
                return
            except subprocess.TimeoutExpired:  # hung after its last message
                pass
        self.proc.kill()
        self.proc.wait()

    def _exit_reason(self) -> str:
        code = self.proc.wait()
        self.stderr_reader.join(timeout=5)  # its last line may still be on the way
        words = self.last_stderr[-1] if self.last_stderr else "no message"
        return f"{self.label}: worker exited with code {code} ({words})"


def block_sizes(steps: int, blocks: int) -> list[int]:
    """`steps` split into at most `blocks` alternations, as evenly as they go."""
    blocks = max(1, min(blocks, steps))
    return [steps // blocks + (1 if b < steps % blocks else 0) for b in range(blocks)]


def _start_worker(args, role: str, device: str, model: str, precision: str, optimizer: str,
                  inputs: Path) -> Worker:
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="error")
    if role == "native":  # no chip registered: see NATIVE_WORKER_NOTE
        env["TORCH_FL_CHIPS"] = "none"
    argv = [sys.executable, __file__, "--worker", device, "--role", role, "--model", model, "--size", args.size,
            "--precision", precision, "--optimizer", optimizer, "--warmup", str(args.warmup),
            "--inputs", str(inputs), "--compile", args.compile]
    return Worker(f"{role} {device}", argv, env)


def run_pair(args, model: str, precision: str, optimizer: str, inputs: Path) -> dict:
    """The chip's and the native device's worker, steps alternating between them in blocks."""
    deadline = time.monotonic() + args.timeout
    workers, failed = {}, False
    try:
        for role, device in (("chip", args.chip), ("native", args.native)):
            workers[role] = _start_worker(args, role, device, model, precision, optimizer, inputs)
        ready = {role: w.receive(deadline, args.timeout) for role, w in workers.items()}
        blocks = {role: [] for role in workers}
        for number, count in enumerate(block_sizes(args.steps, args.blocks)):
            # who goes first alternates too, so that neither device always follows the other
            for role in ("chip", "native") if number % 2 == 0 else ("native", "chip"):
                workers[role].send(str(count))
                blocks[role].append(workers[role].receive(deadline, args.timeout))
        final = {}
        for role, w in workers.items():
            w.finish()
            final[role] = w.receive(deadline, args.timeout)
    except WorkerFailed as failure:
        failed = True
        return {"status": "failed", "error": str(failure)}
    finally:
        for w in workers.values():
            w.stop(kill=failed)
    return summarize_pair(ready, blocks, final)


def _relative_difference(chip: float, native: float) -> float:
    return abs(chip - native) / abs(native) if native else abs(chip - native)


def summarize_pair(ready: dict, blocks: dict, final: dict) -> dict:
    """The figures of one model at one precision from both workers' messages."""
    def joined(role, key):
        return [x for block in blocks[role] for x in block[key]]

    step = {role: _common.median(joined(role, "step_s")) for role in blocks}
    host = {role: _common.median(joined(role, "host_s")) for role in blocks}
    train_losses = {role: ready[role]["warmup_losses"] + joined(role, "losses") for role in blocks}
    fallbacks = final["chip"]["cpu_fallbacks"]
    chip_breaks = (final["chip"].get("graph_breaks") or {}).get("chip", 0)
    return {
        "status": "fallbacks" if fallbacks else "chip graph breaks" if chip_breaks else "ok",
        "median_step_s": step, "median_host_s": host,
        "ratio": step["chip"] / step["native"],
        "host_ratio": host["chip"] / host["native"],
        "host_share": {role: host[role] / step[role] for role in blocks},
        # the ratio of each block's medians: their spread shows how steady the machine was
        "block_ratios": [_common.median(c["step_s"]) / _common.median(n["step_s"])
                         for c, n in zip(blocks["chip"], blocks["native"])],
        "steps_per_device": len(joined("chip", "step_s")),
        "eval_loss": {role: ready[role]["eval_loss"] for role in ready},
        "step0_loss_rel_diff": _relative_difference(ready["chip"]["eval_loss"], ready["native"]["eval_loss"]),
        "train_losses": train_losses,
        "last_loss_rel_diff": _relative_difference(train_losses["chip"][-1], train_losses["native"][-1]),
        "cpu_fallbacks": fallbacks,
        "cpu_fallback_calls": sum(fallbacks.values()),
        "chip_paths": final["chip"]["paths"],
        "graph_breaks": {role: final[role].get("graph_breaks") for role in final},
        "native_privateuse1_backend": ready["native"]["privateuse1_backend"],
    }


def save_inputs(name: str, size: str, path: Path) -> None:
    """Build the model once on the CPU from the seed; its weights and the batches go to `path`,
    which both workers load: the same weights and the same inputs on both devices."""
    torch.manual_seed(SEED)
    model, batch = REGISTRY[name].build(size)
    generator = torch.Generator().manual_seed(SEED + 1)
    torch.save({"state_dict": model.state_dict(), "batches": [batch(generator) for _ in range(BATCHES)]}, path)


def sweep(args) -> dict:
    """results[model][precision/optimizer] for every model asked for, skipped or failed ones included."""
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-models-") as scratch:
        for name in args.models:
            missing = missing_package(REGISTRY[name])
            if missing:
                results[name] = {"status": "skipped", "reason": f"{missing} not installed"}
                print(f"# {name}: skipped: {missing} not installed", file=sys.stderr)
                continue
            inputs = Path(scratch) / f"{name}.pt"
            try:
                save_inputs(name, args.size, inputs)
            except Exception as error:  # noqa: BLE001 - reported in the model's row, the sweep goes on
                results[name] = {"status": "failed", "error": f"cpu (building the model): {first_line(error)}"}
                continue
            results[name] = {}
            for precision in args.precision:
                for optimizer in args.optimizer:
                    print(f"# {name} {precision} {optimizer} ...", file=sys.stderr, flush=True)
                    results[name][f"{precision}/{optimizer}"] = run_pair(args, name, precision, optimizer, inputs)
            inputs.unlink()
    return results


def _runs(results: dict):
    """(model, "precision/optimizer", figures) of every model that got as far as its workers."""
    for name, by_run in results.items():
        if "status" not in by_run:
            for run, figures in by_run.items():
                yield name, run, figures


def summary(results: dict) -> dict:
    """Per precision/optimizer: the median and the worst chip/native ratio over the models that ran."""
    ratios: dict[str, dict[str, float]] = {}
    for name, run, figures in _runs(results):
        if "ratio" in figures:
            ratios.setdefault(run, {})[name] = figures["ratio"]
    return {run: {"models": len(r), "median_ratio": _common.median(list(r.values())),
                  "worst_ratio": max(r.values()), "worst_model": max(r, key=r.get)}
            for run, r in ratios.items()}


def _fallback_cell(figures: dict) -> str:
    calls = figures["cpu_fallback_calls"]
    if not calls:
        return "0"
    top = sorted(figures["cpu_fallbacks"].items(), key=lambda kv: -kv[1])[:3]
    return f"{calls} ({', '.join(f'{op} {n}' for op, n in top)})"


def table_rows(results: dict, size: str) -> list[list]:
    """One row per model and run; a skipped or failed one says why in its status, its figures '–'."""
    rows = []
    for name, by_run in results.items():
        if "status" in by_run:  # skipped, or failed before any worker ran
            reason = by_run.get("reason") or by_run.get("error")
            rows.append([name, size, "–", "–", *_NO_FIGURES, f"{by_run['status']}: {reason}"])
            continue
        for run, f in by_run.items():
            precision, optimizer = run.split("/")
            if f["status"] == "failed":
                rows.append([name, size, precision, optimizer, *_NO_FIGURES, f"failed: {f['error']}"])
                continue
            step = f["median_step_s"]
            rows.append([name, size, precision, optimizer, step["chip"] * 1e3, step["native"] * 1e3, f["ratio"],
                         f["host_ratio"], f["step0_loss_rel_diff"], f["last_loss_rel_diff"], _fallback_cell(f),
                         f["status"]])
    return rows


_NO_FIGURES = ["–"] * 7  # chip ms, native ms, ratio, host ratio, the two loss differences, CPU fallbacks


def report(args, results: dict) -> dict:
    record = {"chip": args.chip, "native": args.native, "size": args.size, "models": args.models,
              "precisions": args.precision, "optimizers": args.optimizer, "warmup": args.warmup,
              "steps_per_device": args.steps, "blocks": block_sizes(args.steps, args.blocks),
              "timeout_s": args.timeout, "compile": args.compile, "results": results, "summary": summary(results),
              "native_worker_env": {"TORCH_FL_CHIPS": "none"},
              "notes": [NATIVE_WORKER_NOTE, LOSS_NOTE, TIMING_NOTE]}
    header = ["model", "size", "precision", "optimizer", f"{args.chip} ms", f"{args.native} ms", "ratio",
              "host ratio", "step-0 loss rel. diff", "last loss rel. diff", "CPU fallbacks", "status"]
    _common.emit("models_train_step", record, table_rows(results, args.size), header, args.out)
    for line in graph_break_lines(record):
        print(f"graph breaks {line}")
    for run, s in record["summary"].items():
        print(f"summary {run}: median ratio {s['median_ratio']:.3g}, worst {s['worst_ratio']:.3g} "
              f"({s['worst_model']}) over {s['models']} models")
    if not record["summary"]:
        print("summary: no model ran on both devices")
    print(f"note: {NATIVE_WORKER_NOTE}")
    return record


def graph_break_lines(record: dict) -> list[str]:
    """Per compiled model: the graph breaks in each worker, the chip's own counted apart."""
    chip, native, out = record["chip"], record["native"], []
    for name, run, figures in _runs(record["results"]):
        breaks = figures.get("graph_breaks") or {}
        if breaks.get("chip") is not None:
            out.append(f"{name} {run}: {chip} {breaks['chip']['all']} ({breaks['chip']['chip']} the chip's, "
                       f"{breaks['chip']['graphs']} graphs), {native} {breaks['native']['all']}")
    return out


def parse(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("--chip", default="nvgpu")
    p.add_argument("--native", default="cuda", help="the native device (cpu for the simulated npu)")
    p.add_argument("--size", choices=SIZES, default="realistic")
    p.add_argument("--models", nargs="+", choices=list(REGISTRY), default=list(REGISTRY))
    p.add_argument("--precision", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    p.add_argument("--optimizer", nargs="+", choices=OPTIMIZERS, default=["adamw"])
    p.add_argument("--warmup", type=int, default=5, help="untimed steps per device before the timed ones")
    p.add_argument("--steps", type=int, default=20, help="timed steps per device and model")
    p.add_argument("--blocks", type=int, default=4, help="alternations between the devices the steps are split into")
    p.add_argument("--timeout", type=float, default=600, help="seconds a model (both workers) may take in all")
    p.add_argument("--compile", choices=("none", "default", "max-autotune-no-cudagraphs", "aot_eager"), default="none",
                   help="train torch.compile(model, mode=...) on both devices (aot_eager: that backend; none: eager)")
    # the worker's side
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--role", choices=("chip", "native"), help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--inputs", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.worker:
        return worker(args)
    if args.steps < 1:
        sys.exit("bench/models.py: --steps must be at least 1")
    for device in (args.chip, args.native):
        if device != "cpu" and not _common.chip_available(device):
            sys.exit(f"bench/models.py: torch.{device} is not available"
                     + (f" (build specs/{device}.yaml first)" if device == args.chip else ""))
    return report(args, sweep(args))


if __name__ == "__main__":
    main()
