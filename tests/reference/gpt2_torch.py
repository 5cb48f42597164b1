"""An independent GPT-2 in PyTorch on HuggingFace-layout weights (Conv1D [in, out]), for the
generation tests and benchmarks: the full forward pass, and greedy decoding with a KV cache."""
import math

import torch
import torch.nn.functional as F


def block(w, c, i, x, past=None):
    """One layer over x [s, h]; past: (k, v) [nh, p, hd] of earlier positions or None, or a
    preallocated [k_buffer, v_buffer, length] (written in place, like HF's StaticCache).
    Returns the output and this layer's cache including x's positions."""
    h, nh = c["n_embd"], c["n_head"]
    hd, eps, s = h // nh, c["layer_norm_epsilon"], x.shape[0]
    p = lambda k: w[f"h.{i}.{k}"]
    a = F.layer_norm(x, (h,), p("ln_1.weight"), p("ln_1.bias"), eps)
    qkv = a @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
    q, k, v = (t.view(s, nh, hd).transpose(0, 1) for t in qkv.split(h, dim=-1))
    if isinstance(past, list):  # preallocated: write this step's keys and values in place
        n0 = past[2]
        past[0][:, n0:n0 + s], past[1][:, n0:n0 + s] = k, v
        past[2] += s
        k, v = past[0][:, :n0 + s], past[1][:, :n0 + s]
    elif past is not None:
        k, v = torch.cat([past[0], k], 1), torch.cat([past[1], v], 1)
    n = k.shape[1]
    att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    # Query j (at position n - s + j) sees keys 0 .. n - s + j.
    mask = torch.ones(s, n, dtype=torch.bool).triu(n - s + 1)
    att = att.masked_fill(mask, float("-inf"))
    y = (att.softmax(-1) @ v).transpose(0, 1).reshape(s, h)
    x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
    m = F.layer_norm(x, (h,), p("ln_2.weight"), p("ln_2.bias"), eps)
    m = F.gelu(m @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate="tanh")
    return x + m @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias"), (k, v)


def forward(w, c, ids, start=0, cache=None):
    """Logits [s, vocab] of ids at positions start..; cache: per-layer (k, v) list, updated."""
    ids = torch.as_tensor(ids)
    x = w["wte.weight"][ids] + w["wpe.weight"][start:start + len(ids)]
    for i in range(c["n_layer"]):
        x, kv = block(w, c, i, x, cache[i] if cache and cache[i] is not None else None)
        if cache is not None and not isinstance(cache[i], list):
            cache[i] = kv
    x = F.layer_norm(x, (c["n_embd"],), w["ln_f.weight"], w["ln_f.bias"], c["layer_norm_epsilon"])
    return x @ w["wte.weight"].T


def greedy(w, c, prompt, n, eod=None, kv_cache=True):
    """n argmax tokens after prompt (fewer if eod comes), and their log-probabilities."""
    tokens, out, logprobs = list(prompt), [], []
    cache = [None] * c["n_layer"] if kv_cache else None
    logits = forward(w, c, tokens, 0, cache)[-1]
    for _ in range(n):
        t = int(logits.argmax())
        if t == eod:
            break
        logprobs.append(float(logits.log_softmax(-1)[t]))
        out.append(t)
        tokens.append(t)
        if kv_cache:
            logits = forward(w, c, [t], len(tokens) - 1, cache)[-1]
        else:
            logits = forward(w, c, tokens)[-1]
    return out, logprobs


def static_cache(c, positions, dtype=torch.float32):
    """Preallocated per-layer [k, v, length] buffers for forward(..., cache=)."""
    nh, hd = c["n_head"], c["n_embd"] // c["n_head"]
    return [[torch.zeros(nh, positions, hd, dtype=dtype), torch.zeros(nh, positions, hd, dtype=dtype),
             0] for _ in range(c["n_layer"])]
