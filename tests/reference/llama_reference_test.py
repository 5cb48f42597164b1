#!/usr/bin/python3
"""trident's Llama (RMSNorm, RoPE, SwiGLU, grouped-query attention, untied output, no
biases) against an independent Llama written here in PyTorch, on HF-layout weights.

The weights are drawn with numpy and written as a HuggingFace LlamaForCausalLM directory
(config.json, the weights split over two shards named by model.safetensors.index.json);
`trident score` reads it, scores token sequences and writes d(mean loss)/d(weights) in HF
names; PyTorch autograd computes the same from the same weights. Then: import -> trident
checkpoint -> export gives the same tensors bit for bit, and HF options trident does not
compute (rope_scaling of type dynamic, a sliding window on LlamaForCausalLM) are refused by
name. (llama3 and linear rope_scaling and Mistral's window: llama3_mistral_reference_test.py.)
Usage: llama_reference_test.py /path/to/trident
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
from parity import Checks, read_safetensors, write_safetensors  # noqa: E402

BASE = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
            num_hidden_layers=2, hidden_size=32, intermediate_size=48, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=101, max_position_embeddings=24, rms_norm_eps=1e-5,
            rope_theta=500.0, rope_scaling=None, tie_word_embeddings=False, attention_bias=False,
            mlp_bias=False)


def hf_shapes(c):
    h, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    d = h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * d
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (v, h)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        linears = {"self_attn.q_proj": (h, h), "self_attn.k_proj": (kv, h),
                   "self_attn.v_proj": (kv, h), "self_attn.o_proj": (h, h),
                   "mlp.gate_proj": (f, h), "mlp.up_proj": (f, h), "mlp.down_proj": (h, f)}
        for name, shape in linears.items():
            shapes[p + name + ".weight"] = shape
            if c["attention_bias"]:
                shapes[p + name + ".bias"] = (shape[0],)
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
    return shapes


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def llama_loss(w, c, sequences):
    """Sum of next-token losses over windows of max_position_embeddings + 1 tokens."""
    h, nh, g = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    d, eps, window = h // nh, c["rms_norm_eps"], c["max_position_embeddings"]
    bias = c["attention_bias"]

    def linear(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if bias else y

    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    total, count = 0.0, 0
    for seq in sequences:
        for start in range(0, len(seq) - 1, window):
            chunk = torch.tensor(seq[start:start + window + 1])
            ids, targets = chunk[:-1], chunk[1:]
            s = len(ids)
            angles = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
            cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
            x = w["model.embed_tokens.weight"][ids]
            for i in range(c["num_hidden_layers"]):
                p = f"model.layers.{i}."
                a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
                q = linear(a, p + "self_attn.q_proj").view(s, nh, d).transpose(0, 1)
                k = linear(a, p + "self_attn.k_proj").view(s, g, d).transpose(0, 1)
                v = linear(a, p + "self_attn.v_proj").view(s, g, d).transpose(0, 1)
                q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
                k, v = k.repeat_interleave(nh // g, 0), v.repeat_interleave(nh // g, 0)
                att = (q @ k.transpose(-1, -2)) / math.sqrt(d)
                att = att.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), float("-inf"))
                y = (att.softmax(-1) @ v).transpose(0, 1).reshape(s, h)
                x = x + linear(y, p + "self_attn.o_proj")
                m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
                m = F.silu(linear(m, p + "mlp.gate_proj")) * linear(m, p + "mlp.up_proj")
                x = x + linear(m, p + "mlp.down_proj")
            x = rms_norm(x, w["model.norm.weight"], eps)
            head = w["model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"]
            total = total + F.cross_entropy(x @ head.T, targets, reduction="sum")
            count += s
    return total, count


def write_model(directory, config, weights, shards):
    os.makedirs(directory)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), weights)
        return
    names = list(weights)
    weight_map = {}
    for k in range(shards):
        part = names[k::shards]
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(directory, file), {n: weights[n] for n in part})
        weight_map.update({n: file for n in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def draw_weights(config, rng):
    weights = {}
    for name, shape in hf_shapes(config).items():
        norm = name.endswith("layernorm.weight") or name == "model.norm.weight"
        weights[name] = (1.0 + 0.1 * rng.standard_normal(shape)) if norm else 0.2 * rng.standard_normal(shape)
    return {k: v.astype(np.float32) for k, v in weights.items()}


def against_torch(check, trident, tmp, tag, config, shards, rng):
    weights = draw_weights(config, rng)
    sequences = [[int(t) for t in rng.integers(0, config["vocab_size"], n)] for n in (13, 25, 40)]
    model = os.path.join(tmp, tag)
    write_model(model, config, weights, shards)
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
    total, count = llama_loss(w, config, sequences)
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
        if err > 1e-4:
            bad.append(f"{name}: gradient differs by {err:.1e}")
    check(not bad and len(grads) == len(w),
          f"{tag}: {len(w)} gradients, worst relative error {worst:.1e} {bad[:3]}")
    return model


def main():
    trident = sys.argv[1]
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(2026)
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        # Grouped-query (G = 2), untied, no biases, weights in two shards with the index.
        model = against_torch(check, trident, tmp, "gqa_untied", BASE, 2, rng)
        # Multi-query (G = 1), tied output layer, biases everywhere, one file.
        against_torch(check, trident, tmp, "mqa_tied_bias",
                      dict(BASE, num_key_value_heads=1, tie_word_embeddings=True,
                           attention_bias=True, mlp_bias=True), 1, rng)
        if model:  # import -> checkpoint -> export: the same tensors, bit for bit
            ckpt, back = os.path.join(tmp, "ckpt"), os.path.join(tmp, "back")
            a = subprocess.run([trident, "convert", "--load-hf", model, "--save", ckpt],
                               capture_output=True, text=True)
            b = subprocess.run([trident, "convert", "--load", ckpt, "--save-hf", back],
                               capture_output=True, text=True)
            ok = a.returncode == 0 and b.returncode == 0
            if ok:
                exported = read_safetensors(os.path.join(back, "model.safetensors"))
                original = {}
                for f in os.listdir(model):
                    if f.endswith(".safetensors"):
                        original.update(read_safetensors(os.path.join(model, f)))
                ok = exported.keys() == original.keys() and all(
                    exported[n].tobytes() == original[n].tobytes() for n in original)
            check(ok, f"HF Llama -> trident checkpoint -> HF Llama: {len(original) if ok else 0} "
                      f"tensors identical {a.stderr[-500:]}{b.stderr[-500:]}")
        for key, value in (("rope_scaling", {"type": "dynamic", "factor": 2.0}), ("sliding_window", 16)):
            bad = os.path.join(tmp, "bad_" + key)
            write_model(bad, dict(BASE, **{key: value}), draw_weights(BASE, rng), 1)
            out = subprocess.run([trident, "score", "--model", bad, "--tokens",
                                  os.path.join(tmp, "gqa_untied_tokens.json")],
                                 capture_output=True, text=True)
            check(out.returncode != 0 and key in out.stderr,
                  f"config.json with {key} is refused by name: {out.stderr.strip()[:160]}")
        if model:  # a Llama flag that contradicts config.json is refused, not overwritten
            out = subprocess.run([trident, "train", "--load-hf", model, "--mock-data",
                                  "--train-iters", "1", "--normalization", "LayerNorm",
                                  "--num-query-groups", "1"], capture_output=True, text=True)
            check(out.returncode == 2 and "--normalization disagrees" in out.stderr and
                  "--num-query-groups disagrees" in out.stderr,
                  f"--load-hf with contradicting Llama flags is refused: {out.stderr.strip()[:200]}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
