#!/usr/bin/python3
"""trident's loss and every gradient against an independent GPT-2 written in PyTorch.

The weights are drawn here with numpy and written as a HuggingFace GPT-2 directory by
this script's own safetensors writer; trident reads them, scores token sequences and
writes d(mean loss)/d(weights); PyTorch autograd computes the same from the same file.
Usage: torch_reference_test.py /path/to/trident
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

CONFIG = dict(n_layer=2, n_embd=32, n_head=4, vocab_size=101, n_positions=24,
              layer_norm_epsilon=1e-5, activation_function="gelu_new", model_type="gpt2")


def hf_shapes(c):
    h, v, p = c["n_embd"], c["vocab_size"], c["n_positions"]
    shapes = {"wte.weight": (v, h), "wpe.weight": (p, h), "ln_f.weight": (h,), "ln_f.bias": (h,)}
    for i in range(c["n_layer"]):
        pre = f"h.{i}."
        shapes.update({
            pre + "ln_1.weight": (h,), pre + "ln_1.bias": (h,),
            pre + "attn.c_attn.weight": (h, 3 * h), pre + "attn.c_attn.bias": (3 * h,),
            pre + "attn.c_proj.weight": (h, h), pre + "attn.c_proj.bias": (h,),
            pre + "ln_2.weight": (h,), pre + "ln_2.bias": (h,),
            pre + "mlp.c_fc.weight": (h, 4 * h), pre + "mlp.c_fc.bias": (4 * h,),
            pre + "mlp.c_proj.weight": (4 * h, h), pre + "mlp.c_proj.bias": (h,)})
    return shapes


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", e
        b, t = e["data_offsets"]
        out[name] = np.frombuffer(raw[base + b:base + t], dtype="<f4").reshape(e["shape"])
    return out


def gpt2_loss(w, c, sequences):
    """Sum of next-token losses over windows of n_positions + 1 tokens, and their count."""
    h, nh = c["n_embd"], c["n_head"]
    hd = h // nh
    eps = c["layer_norm_epsilon"]
    total, count = 0.0, 0
    for seq in sequences:
        for start in range(0, len(seq) - 1, c["n_positions"]):
            chunk = torch.tensor(seq[start:start + c["n_positions"] + 1])
            ids, targets = chunk[:-1], chunk[1:]
            s = len(ids)
            x = w["wte.weight"][ids] + w["wpe.weight"][:s]
            for i in range(c["n_layer"]):
                p = lambda k: w[f"h.{i}.{k}"]
                a = F.layer_norm(x, (h,), p("ln_1.weight"), p("ln_1.bias"), eps)
                qkv = a @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
                q, k, v = (t.view(s, nh, hd).transpose(0, 1) for t in qkv.split(h, dim=-1))
                att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
                att = att.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), float("-inf"))
                y = (att.softmax(-1) @ v).transpose(0, 1).reshape(s, h)
                x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
                m = F.layer_norm(x, (h,), p("ln_2.weight"), p("ln_2.bias"), eps)
                m = F.gelu(m @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate="tanh")
                x = x + m @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
            x = F.layer_norm(x, (h,), w["ln_f.weight"], w["ln_f.bias"], eps)
            logits = x @ w["wte.weight"].T
            total = total + F.cross_entropy(logits, targets, reduction="sum")
            count += s
    return total, count


def main():
    trident = sys.argv[1]
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(2024)
    weights = {}
    for name, shape in hf_shapes(CONFIG).items():
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            weights[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            weights[name] = 0.2 * rng.standard_normal(shape)
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    # Sequences shorter than, equal to, and longer than one window (n_positions = 24).
    sequences = [list(rng.integers(0, CONFIG["vocab_size"], n)) for n in (13, 25, 40)]
    sequences = [[int(t) for t in s] for s in sequences]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        os.makedirs(model)
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(CONFIG, f)
        # The optional "transformer." prefix of some HF checkpoints must be accepted too.
        write_safetensors(os.path.join(model, "model.safetensors"),
                          {"transformer." + k: v for k, v in weights.items()})
        with open(os.path.join(tmp, "tokens.json"), "w") as f:
            json.dump(sequences, f)
        out = subprocess.run([trident, "score", "--model", model, "--tokens",
                              os.path.join(tmp, "tokens.json"), "--save-grads",
                              os.path.join(tmp, "grads")], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stdout, out.stderr)
            return 1
        result = json.loads(out.stdout)
        grads = read_safetensors(os.path.join(tmp, "grads", "model.safetensors"))

    w = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in weights.items()}
    total, count = gpt2_loss(w, CONFIG, sequences)
    loss = total / count
    loss.backward()
    failures = []
    if result["tokens"] != count:
        failures.append(f"token count {result['tokens']} != {count}")
    rel = abs(result["loss"] - loss.item()) / loss.item()
    print(f"loss: trident {result['loss']:.8f} torch {loss.item():.8f} (rel {rel:.2e})")
    if rel > 1e-5:
        failures.append(f"loss differs by {rel:.2e}")
    worst = 0.0
    for name, t in w.items():
        ref = t.grad.numpy()
        got = grads[name]
        if got.shape != ref.shape:
            failures.append(f"{name}: shape {got.shape} != {ref.shape}")
            continue
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-3)
        worst = max(worst, err)
        if err > 1e-4:
            failures.append(f"{name}: gradient differs by {err:.2e}")
    print(f"gradients: {len(w)} tensors, worst relative error {worst:.2e}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(w) + 1 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
