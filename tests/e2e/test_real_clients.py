"""Client code no one here wrote, on the simulated NPU: tiny random-init Hugging Face
transformers models (a tied-embedding decoder, an encoder with a tied MLM head, an
encoder-decoder, a grouped-query-attention decoder) trained a few AdamW steps on the chip
and on the CPU from the same weights, and greedy generation with and without the KV cache.

Dropout is off in the configs: the chip draws what a seeded CPU draws per op, but a model's
dropout masks depend on the order of its random ops, which is not what is compared here.
"""
from __future__ import annotations

import copy
import os

import pytest
import torch
from torch_fl import env

transformers = pytest.importorskip("transformers")

# The chip under test: npu in CI; TORCH_FL_CLIENT_DEVICE=nvgpu on the H200.
NPU = env.get("CLIENT_DEVICE", "npu")
STEPS = 3


def gpt2():
    config = transformers.GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


def bert():
    config = transformers.BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=32,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return transformers.BertForMaskedLM(config)


def t5():
    config = transformers.T5Config(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                   num_heads=4, dropout_rate=0.0, decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(config)


def llama_gqa():
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                      tie_word_embeddings=True)
    return transformers.LlamaForCausalLM(config)


MODELS = {"gpt2": gpt2, "bert": bert, "t5": t5, "llama_gqa": llama_gqa}


def batch(name: str, device: str) -> dict:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 96, (2, 12), generator=generator)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if name == "t5":
        inputs["labels"] = torch.randint(3, 96, (2, 7), generator=generator)
    else:
        inputs["labels"] = ids.clone()
    return {key: value.to(device) for key, value in inputs.items()}


def train(model: torch.nn.Module, name: str, device: str) -> list[float]:
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = model(**batch(name, device)).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", list(MODELS))
def test_training_on_the_chip_matches_the_cpu(name):
    torch.manual_seed(0)
    reference = MODELS[name]()
    chip_model = copy.deepcopy(reference)
    exact = copy.deepcopy(reference).double()
    count = len(list(reference.parameters()))
    cpu_losses = train(reference, name, "cpu")
    train(exact, name, "cpu")
    chip_losses = train(chip_model, name, NPU)
    # Module.to must keep tied weights tied: the same parameter count on both devices.
    assert len(list(chip_model.parameters())) == count
    torch.testing.assert_close(torch.tensor(chip_losses), torch.tensor(cpu_losses), atol=2e-4, rtol=2e-4)
    # The chip's float32 weights are as close to a float64 run's as the CPU's float32 weights
    # are. Comparing the two float32 runs directly is not a test: Adam divides each gradient by
    # its own running magnitude, and in T5 the CPU's own float32 run is 7e-4 off the float64
    # one, a different 7e-4 on another CPU model. Untied weights drift 6e-3 in these steps.
    for (param_name, truth), on_cpu, on_chip in zip(exact.named_parameters(), reference.parameters(),
                                                     chip_model.parameters()):
        cpu_error = (on_cpu.detach().double() - truth.detach()).abs().max().item()
        chip_error = (on_chip.detach().cpu().double() - truth.detach()).abs().max().item()
        assert chip_error <= 2 * cpu_error + 1e-4, (
            f"{param_name}: the chip's weights are {chip_error:.3g} off a float64 run, the CPU's {cpu_error:.3g}")


@pytest.mark.parametrize("name", ["gpt2", "llama_gqa", "t5"])
def test_greedy_generation_matches_the_cpu_with_and_without_cache(name):
    torch.manual_seed(0)
    reference = MODELS[name]().eval()
    chip_model = copy.deepcopy(reference).to(NPU)
    prompt = torch.randint(3, 96, (1, 5), generator=torch.Generator().manual_seed(2))
    settings = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = reference.generate(prompt, **settings)
        cached = chip_model.generate(prompt.to(NPU), use_cache=True, **settings).cpu()
        uncached = chip_model.generate(prompt.to(NPU), use_cache=False, **settings).cpu()
    assert torch.equal(cached, expected)
    assert torch.equal(uncached, expected)


def test_ctc_loss_gradient_matches_the_cpu():
    """Speech models' loss as transformers computes it (Wav2Vec2ForCTC, HubertForCTC): CTC over
    `log_softmax(logits).transpose(0, 1)`, whose backward hands log_softmax a transposed
    gradient. The simulated SDK's log_softmax backward once read that gradient as contiguous:
    the loss agreed with the CPU, the gradient did not (by 1.25 against 0.99), with no error."""
    torch.manual_seed(0)
    logits = torch.randn(2, 40, 20)
    targets = torch.randint(1, 20, (2, 5))
    lengths, target_lengths = torch.tensor([40, 33]), torch.tensor([5, 4])

    def loss_and_grad(device):
        x = logits.detach().to(device).requires_grad_()
        log_probs = torch.nn.functional.log_softmax(x, dim=-1, dtype=torch.float32).transpose(0, 1)
        loss = torch.nn.functional.ctc_loss(log_probs, targets.to(device), lengths.to(device),
                                            target_lengths.to(device), blank=0, reduction="sum",
                                            zero_infinity=True)
        loss.backward()
        return loss.detach().cpu(), x.grad.cpu()

    cpu_loss, cpu_grad = loss_and_grad("cpu")
    chip_loss, chip_grad = loss_and_grad(NPU)
    torch.testing.assert_close(chip_loss, cpu_loss, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(chip_grad, cpu_grad, rtol=1e-5, atol=1e-5)
