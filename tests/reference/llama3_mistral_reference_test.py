#!/usr/bin/python3
"""Llama 3.x RoPE scaling (rope_scaling llama3 and linear) and Mistral's sliding window
against an independent float64 PyTorch model written here from HF's published definitions
(transformers' _compute_llama3_parameters / linear scaling; a token attends to keys j with
i - W < j <= i).

Random weights are written as HF directories (config.json + safetensors); `trident score`
gives the loss and d(loss)/d(weights), compared with autograd's at 1e-5. Then: `trident
generate` (greedy, KV cache) beyond W tokens equals full recomputation; import -> checkpoint
-> export keeps the tensors bit for bit and config.json's rope_scaling / sliding_window;
Qwen2-style use_sliding_window false means no window; unsupported rope_scaling types are
refused with exit 2 naming them.
Usage: llama3_mistral_reference_test.py /path/to/trident /path/to/source
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_reference_test import draw_weights, rms_norm, rotate_half, write_model  # noqa: E402
from parity import Checks, read_safetensors  # noqa: E402

# head_dim 16 with rope_theta 500 and original context 32: wavelengths 6.3 (below
# 32 / high 4: kept), 13.6 and 29.8 (between: interpolated), 64 and up (divided by factor).
LLAMA3 = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
              num_hidden_layers=2, hidden_size=64, intermediate_size=48, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=101, max_position_embeddings=70,
              rms_norm_eps=1e-5, rope_theta=500.0, tie_word_embeddings=False,
              attention_bias=False, mlp_bias=False,
              rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                original_max_position_embeddings=32, rope_type="llama3"))
# W = 37: not a multiple of the 64-key tiles; 150 positions: whole tiles skipped.
MISTRAL = dict(architectures=["MistralForCausalLM"], model_type="mistral", hidden_act="silu",
               num_hidden_layers=2, hidden_size=64, intermediate_size=48, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=101, max_position_embeddings=150,
               rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
               sliding_window=37, head_dim=16)


def inv_frequencies(c, d):
    """HF's rope init: default, then the llama3 or linear rule of rope_scaling."""
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    r = c.get("rope_scaling")
    if not r:
        return inv
    kind = r.get("rope_type", r.get("type"))
    if kind == "linear":
        return inv / r["factor"]
    assert kind == "llama3"
    factor, low, high = r["factor"], r["low_freq_factor"], r["high_freq_factor"]
    old = r["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return torch.where(medium, smoothed, scaled)


def logits_of(w, c, ids):
    """Logits [s, V] of the token list ids, positions from 0."""
    h, nh, g = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    d, eps, s = h // nh, c["rms_norm_eps"], len(ids)
    angles = torch.outer(torch.arange(s, dtype=torch.float64), inv_frequencies(c, d))
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    window = c.get("sliding_window") or s + 1
    hidden = (j > i) | (j <= i - window)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (a @ w[p + "self_attn.q_proj.weight"].T).view(s, nh, d).transpose(0, 1)
        k = (a @ w[p + "self_attn.k_proj.weight"].T).view(s, g, d).transpose(0, 1)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).view(s, g, d).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(nh // g, 0), v.repeat_interleave(nh // g, 0)
        att = ((q @ k.transpose(-1, -2)) / math.sqrt(d)).masked_fill(hidden, float("-inf"))
        x = x + (att.softmax(-1) @ v).transpose(0, 1).reshape(s, h) @ w[p + "self_attn.o_proj.weight"].T
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        m = F.silu(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)
        x = x + m @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"]
    return x @ head.T


def total_loss(w, c, sequences):
    """Sum of next-token losses over windows of max_position_embeddings + 1 tokens (score's)."""
    total, count, n = 0.0, 0, c["max_position_embeddings"]
    for seq in sequences:
        for start in range(0, len(seq) - 1, n):
            chunk = seq[start:start + n + 1]
            logits = logits_of(w, c, chunk[:-1])
            total = total + F.cross_entropy(logits, torch.tensor(chunk[1:]), reduction="sum")
            count += len(chunk) - 1
    return total, count


def weights_for(config, rng):
    return draw_weights(dict({"attention_bias": False}, **config), rng)


def score_against_torch(check, trident, tmp, tag, config, lengths, rng, reference=None):
    """reference: the configuration PyTorch computes (config's meaning), config by default."""
    weights = weights_for(config, rng)
    sequences = [[int(t) for t in rng.integers(0, config["vocab_size"], n)] for n in lengths]
    model = os.path.join(tmp, tag)
    write_model(model, config, weights, 1)
    tokens = os.path.join(tmp, tag + "_tokens.json")
    with open(tokens, "w") as f:
        json.dump(sequences, f)
    grads_dir = os.path.join(tmp, tag + "_grads")
    out = subprocess.run([trident, "score", "--model", model, "--tokens", tokens, "--save-grads",
                          grads_dir], capture_output=True, text=True)
    if out.returncode != 0:
        check(False, f"{tag}: trident score ran\n{out.stdout}{out.stderr}")
        return None
    result = json.loads(out.stdout)
    grads = read_safetensors(os.path.join(grads_dir, "model.safetensors"))
    w = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in weights.items()}
    total, count = total_loss(w, reference or config, sequences)
    loss = total / count
    loss.backward()
    rel = abs(result["loss"] - loss.item()) / loss.item()
    check(result["tokens"] == count and rel < 1e-5,
          f"{tag}: loss trident {result['loss']:.8f} torch {loss.item():.8f} (rel {rel:.1e})")
    worst, bad = 0.0, []
    for name, t in w.items():
        ref, got = t.grad.numpy(), grads.get(name)
        if got is None or got.shape != ref.shape:
            bad.append(f"{name}: {None if got is None else got.shape} vs {ref.shape}")
            continue
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-3)
        worst = max(worst, err)
        if err > 1e-5:
            bad.append(f"{name}: gradient differs by {err:.1e}")
    check(not bad and len(grads) == len(w),
          f"{tag}: {len(w)} gradients, worst relative error {worst:.1e} {bad[:3]}")
    return model, weights


def greedy_reference(w, c, prompt, n, eod):
    tokens, out, logprobs = list(prompt), [], []
    for _ in range(n):
        logits = logits_of(w, c, tokens)[-1]
        t = int(logits.argmax())
        if t == eod:
            break
        logprobs.append(float(logits.log_softmax(-1)[t]))
        out.append(t)
        tokens.append(t)
    return out, logprobs


def generation_against_torch(check, trident, source, tmp, tag, config, rng):
    """Greedy decoding with the KV cache past the window / original context equals full
    recomputation in float64 (GPT-2's tokenizer: vocabulary 50257)."""
    config = dict(config, vocab_size=50257, max_position_embeddings=80)
    weights = weights_for(config, rng)
    model = os.path.join(tmp, tag)
    write_model(model, config, weights, 1)
    tokenizer = ["--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                 "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
    prompts = ["In the beginning God created the heaven and the earth. And the earth was "
               "without form, and void; and darkness was upon the face of the deep.", "Hello"]
    out = subprocess.run([trident, "generate", "--load-hf", model, "--greedy", "--logprobs",
                          "--tokens-to-generate", "40", "--max-batch", "2", "--json"] +
                         tokenizer + [a for p in prompts for a in ("--prompt", p)],
                         capture_output=True, text=True, timeout=240)
    if out.returncode != 0:
        check(False, f"{tag}: trident generate ran\n{out.stdout}{out.stderr}")
        return
    w = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights.items()}
    for r in map(json.loads, out.stdout.splitlines()):
        want, want_lp = greedy_reference(w, config, r["prompt_tokens"], 40, 50256)
        err = max((abs(a - b) for a, b in zip(r["logprobs"], want_lp)), default=0)
        total = len(r["prompt_tokens"]) + len(r["tokens"])
        check(r["tokens"] == want and err < 1e-4,
              f"{tag}: greedy generation with the KV cache to position {total} equals full "
              f"recomputation (logprob error {err:.1e})")


def round_trip(check, trident, tmp, model, key):
    ckpt, back = os.path.join(tmp, key + "_ckpt"), os.path.join(tmp, key + "_back")
    a = subprocess.run([trident, "convert", "--load-hf", model, "--save", ckpt],
                       capture_output=True, text=True)
    b = subprocess.run([trident, "convert", "--load", ckpt, "--save-hf", back],
                       capture_output=True, text=True)
    ok = a.returncode == 0 and b.returncode == 0
    if ok:
        exported = read_safetensors(os.path.join(back, "model.safetensors"))
        original = read_safetensors(os.path.join(model, "model.safetensors"))
        ok = exported.keys() == original.keys() and all(
            exported[n].tobytes() == original[n].tobytes() for n in original)
        written, read = (json.load(open(os.path.join(d, "config.json"))) for d in (back, model))
        ok = ok and written.get(key) == read[key] and written["model_type"] == read["model_type"]
    check(ok, f"HF -> trident checkpoint -> HF: tensors identical and config.json keeps {key} "
              f"{a.stderr[-300:]}{b.stderr[-300:]}")


def refusals(check, trident, tmp, rng):
    tokens = os.path.join(tmp, "mistral_tokens.json")
    for kind in ("dynamic", "yarn", "longrope"):
        bad = os.path.join(tmp, "bad_" + kind)
        write_model(bad, dict(LLAMA3, rope_scaling=dict(rope_type=kind, factor=2.0)),
                    weights_for(LLAMA3, rng), 1)
        out = subprocess.run([trident, "score", "--model", bad, "--tokens", tokens],
                             capture_output=True, text=True)
        check(out.returncode == 2 and kind in out.stderr,
              f"rope_scaling type {kind} refused, exit 2, named: {out.stderr.strip()[:160]}")


def main():
    trident, source = sys.argv[1], sys.argv[2]
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(2030)
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        llama3 = score_against_torch(check, trident, tmp, "llama3", LLAMA3, (13, 69, 100), rng)
        linear = dict(LLAMA3, rope_scaling=dict(rope_type="linear", factor=2.0),
                      tie_word_embeddings=True)
        score_against_torch(check, trident, tmp, "linear", linear, (50,), rng)
        mistral = score_against_torch(check, trident, tmp, "mistral", MISTRAL, (13, 90, 150), rng)
        # Qwen2's files carry a window that use_sliding_window switches off: full attention.
        off = dict(MISTRAL, architectures=["LlamaForCausalLM"], model_type="llama",
                   use_sliding_window=False, max_window_layers=2)
        score_against_torch(check, trident, tmp, "window_off", off, (60,), rng,
                            reference=dict(off, sliding_window=None))
        if llama3:
            round_trip(check, trident, tmp, llama3[0], "rope_scaling")
        if mistral:
            round_trip(check, trident, tmp, mistral[0], "sliding_window")
        refusals(check, trident, tmp, rng)
        generation_against_torch(check, trident, source, tmp, "mistral_generate",
                                 dict(MISTRAL, sliding_window=9), rng)
        generation_against_torch(check, trident, source, tmp, "llama3_generate", LLAMA3, rng)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
