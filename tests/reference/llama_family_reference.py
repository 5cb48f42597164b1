"""An independent float64 PyTorch model of HF's Llama family, written from HF's published
definitions (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, and
the mixtures of experts MixtralForCausalLM and Qwen3MoeForCausalLM), and the HF-directory
helpers the reference tests share.

The block: RMSNorm, RoPE (rotate-half; rope_scaling of type llama3 as transformers'
_compute_llama3_parameters, or linear: frequencies / factor), grouped-query attention
(num_key_value_heads), a sliding window W (a token i attends to keys j with i - W < j <= i),
biases wherever the weights have them (Llama's attention_bias / mlp_bias, Qwen2's q, k, v
only), Qwen3's per-head RMSNorm of q and k before RoPE, an explicit head_dim, SwiGLU MLP,
tied or untied output layer. The MoE blocks (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock):
router logits x gate^T, softmax over all experts, top-k, the k weights renormalised to sum to
1 (Mixtral always, Qwen3-MoE when norm_topk_prob), each token's output the weighted sum of
its k SwiGLU experts; Qwen3-MoE's dense layers (mlp_only_layers, and layers i with
(i + 1) % decoder_sparse_step != 0) are the plain MLP of intermediate_size. Nothing here
comes from trident: the tests compare trident's
`score`, `generate`, `eval` and `serve` with it.
"""
import json
import math
import os
import subprocess

import numpy as np
import torch
import torch.nn.functional as F

from parity import read_safetensors, write_safetensors
from serve_client import Server


def head_dim(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def is_qwen3(c):
    return c.get("model_type") in ("qwen3", "qwen3_moe")  # Qwen3-MoE's attention is Qwen3's


def is_mixtral(c):
    return c.get("model_type") == "mixtral"


def is_moe_layer(c, i):
    """HF's rule: Mixtral's layers are all MoE; Qwen3MoeDecoderLayer's layer i is MoE iff it
    is not in mlp_only_layers, there are experts and (i + 1) % decoder_sparse_step == 0."""
    if is_mixtral(c):
        return True
    if c.get("model_type") != "qwen3_moe":
        return False
    return (i not in c.get("mlp_only_layers", []) and c["num_experts"] > 0
            and (i + 1) % c.get("decoder_sparse_step", 1) == 0)


def moe_names(c, i):
    """(router, [(gate, up, down) per expert]) module names of MoE layer i, without .weight."""
    if is_mixtral(c):
        p = f"model.layers.{i}.block_sparse_moe."
        return p + "gate", [(p + f"experts.{e}.w1", p + f"experts.{e}.w3", p + f"experts.{e}.w2")
                            for e in range(c["num_local_experts"])]
    p = f"model.layers.{i}.mlp."
    return p + "gate", [(p + f"experts.{e}.gate_proj", p + f"experts.{e}.up_proj",
                         p + f"experts.{e}.down_proj") for e in range(c["num_experts"])]


def expert_width(c):
    return c["intermediate_size"] if is_mixtral(c) else c["moe_intermediate_size"]


def is_qwen2(c):
    return c.get("model_type") == "qwen2"


def hf_shapes(c):
    """The tensors of an HF checkpoint of config c, name -> shape."""
    h, f, v, d = c["hidden_size"], c["intermediate_size"], c["vocab_size"], head_dim(c)
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (v, h)
    attention_bias = c.get("attention_bias", False)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        attention = {"self_attn.q_proj": (q, h), "self_attn.k_proj": (kv, h),
                     "self_attn.v_proj": (kv, h), "self_attn.o_proj": (h, q)}
        mlp = {"mlp.gate_proj": (f, h), "mlp.up_proj": (f, h), "mlp.down_proj": (h, f)}
        if is_moe_layer(c, i):
            router, experts = moe_names(c, i)
            e = expert_width(c)
            mlp = {router[len(p):]: (len(experts), h)}
            for gate, up, down in experts:
                mlp.update({gate[len(p):]: (e, h), up[len(p):]: (e, h), down[len(p):]: (h, e)})
        for name, shape in {**attention, **mlp}.items():
            shapes[p + name + ".weight"] = shape
        for name, shape in attention.items():  # Llama's attention_bias: o_proj's too
            if attention_bias or (is_qwen2(c) and name != "self_attn.o_proj"):
                shapes[p + name + ".bias"] = (shape[0],)
        for name, shape in mlp.items():
            if c.get("mlp_bias", False):
                shapes[p + name + ".bias"] = (shape[0],)
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        if is_qwen3(c):
            shapes[p + "self_attn.q_norm.weight"] = (d,)
            shapes[p + "self_attn.k_norm.weight"] = (d,)
    return shapes


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def inv_frequencies(c, d):
    """HF's rope init: default, then the llama3 or linear rule of rope_scaling."""
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    r = c.get("rope_scaling")
    if not r:
        return inv
    kind = r.get("rope_type", r.get("type"))
    if kind == "linear":
        return inv / r["factor"]
    assert kind == "llama3", kind
    factor, low, high = r["factor"], r["low_freq_factor"], r["high_freq_factor"]
    old = r["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return torch.where(medium, smoothed, scaled)


def window_of(c):
    """The sliding window HF applies to every layer (None: full causal attention)."""
    if c.get("use_sliding_window") is False:  # Qwen2's files carry a window they switch off
        return None
    return c.get("sliding_window")


def linear(w, x, name):
    y = x @ w[name + ".weight"].T
    return y + w[name + ".bias"] if name + ".bias" in w else y


def attention(w, c, p, a, cos, sin, hidden):
    """One layer's self-attention on a sequence a [s, h]; hidden: the masked (i, j) pairs."""
    s, nh, g, d, eps = a.shape[0], c["num_attention_heads"], c["num_key_value_heads"], head_dim(c), c["rms_norm_eps"]
    q = linear(w, a, p + "self_attn.q_proj").view(s, nh, d)
    k = linear(w, a, p + "self_attn.k_proj").view(s, g, d)
    v = linear(w, a, p + "self_attn.v_proj").view(s, g, d).transpose(0, 1)
    if p + "self_attn.q_norm.weight" in w:  # Qwen3: per-head RMSNorm over head_dim, before RoPE
        q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
        k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
    q, k = q.transpose(0, 1), k.transpose(0, 1)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    k, v = k.repeat_interleave(nh // g, 0), v.repeat_interleave(nh // g, 0)
    att = ((q @ k.transpose(-1, -2)) / math.sqrt(d)).masked_fill(hidden, float("-inf"))
    y = (att.softmax(-1) @ v).transpose(0, 1).reshape(s, nh * d)
    return linear(w, y, p + "self_attn.o_proj")


# The smallest gap between the k-th and (k+1)-th router logit of any token the MoE blocks
# routed since the list was last cleared: tests keep it above 1e-3 so that float32 rounding
# cannot change an expert choice.
ROUTER_MARGINS = []
# A list to collect each MoE layer's router logits [s, E] (with their graph) for a caller
# that adds the router losses to its objective; None: not collected.
ROUTER_SCORES = None


def sparse_moe(w, c, i, x):
    """HF's sparse MoE block on x [s, h]."""
    router, experts = moe_names(c, i)
    k = c["num_experts_per_tok"]
    scores = x @ w[router + ".weight"].T
    if ROUTER_SCORES is not None:
        ROUTER_SCORES.append(scores)
    ranked = scores.detach().sort(-1, descending=True).values
    ROUTER_MARGINS.append(float((ranked[:, k - 1] - ranked[:, k]).min()))
    top, idx = scores.softmax(-1).topk(k, -1)
    if is_mixtral(c) or c.get("norm_topk_prob", False):
        top = top / top.sum(-1, keepdim=True)
    y = torch.zeros_like(x)
    for e, (gate, up, down) in enumerate(experts):
        weight = (top * (idx == e)).sum(-1, keepdim=True)  # 0 for tokens not routed to e
        out = linear(w, F.silu(linear(w, x, gate)) * linear(w, x, up), down)
        y = y + weight * out
    return y


def logits(w, c, ids):
    """Full recomputation of the logits [s, vocab] of the token list ids (positions from 0)."""
    d, eps, s = head_dim(c), c["rms_norm_eps"], len(ids)
    angles = torch.outer(torch.arange(s, dtype=torch.float64), inv_frequencies(c, d))
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    hidden = (j > i) | (j <= i - (window_of(c) or s + 1))
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        x = x + attention(w, c, p, a, cos, sin, hidden)
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        if is_moe_layer(c, layer):
            x = x + sparse_moe(w, c, layer, m)
            continue
        m = F.silu(linear(w, m, p + "mlp.gate_proj")) * linear(w, m, p + "mlp.up_proj")
        x = x + linear(w, m, p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"]
    return x @ head.T


def total_loss(w, c, sequences):
    """Sum of next-token losses over windows of max_position_embeddings + 1 tokens (as
    `trident score` cuts a long sequence) and the number of predicted tokens."""
    n, total, count = c["max_position_embeddings"], 0.0, 0
    for seq in sequences:
        for start in range(0, len(seq) - 1, n):
            chunk = seq[start:start + n + 1]
            total = total + F.cross_entropy(logits(w, c, chunk[:-1]), torch.tensor(chunk[1:]),
                                            reduction="sum")
            count += len(chunk) - 1
    return total, count


def greedy(w, c, prompt, n, eod=None):
    """Greedy decoding by full recomputation of every prefix (no cache): tokens, logprobs;
    stops before eod."""
    ids, out, lps = list(prompt), [], []
    for _ in range(n):
        lp = logits(w, c, ids)[-1].log_softmax(-1)
        nxt = int(lp.argmax())
        if nxt == eod:
            break
        ids.append(nxt)
        out.append(nxt)
        lps.append(float(lp[nxt]))
    return out, lps


def continuation_logprob(w, c, context, continuation):
    """log P(continuation | context), the sum over its tokens."""
    ids = list(context) + list(continuation)
    lp = logits(w, c, ids[:-1]).log_softmax(-1)
    start = len(context) - 1
    return sum(float(lp[start + i, t]) for i, t in enumerate(continuation))


# --- HF directories -----------------------------------------------------------------------


def to_bf16(a):
    """The bf16 bits of float32 values (round to nearest even) and the values they hold."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    return rounded, (rounded.astype("<u4") << 16).view("<f4").reshape(np.shape(a))


def write_safetensors_bf16(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = to_bf16(array)[0].tobytes()
        header[name] = {"dtype": "BF16", "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def read_safetensors_raw(path):
    """name -> (dtype, shape, the tensor's bytes) as the file stores them."""
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    return {name: (e["dtype"], e["shape"], raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
            for name, e in header.items() if name != "__metadata__"}


def draw_weights(config, rng, bf16=False):
    """Random float32 weights (norm weights near 1); bf16: values a bf16 file holds exactly."""
    weights = {}
    for name, shape in hf_shapes(config).items():
        norm = name.endswith("norm.weight")
        w = (1.0 + 0.1 * rng.standard_normal(shape)) if norm else 0.2 * rng.standard_normal(shape)
        w = w.astype(np.float32)
        weights[name] = to_bf16(w)[1] if bf16 else w
    return weights


def write_model(directory, config, weights, shards=1, bf16=False):
    """config.json and the weights: model.safetensors, or `shards` files and their index."""
    os.makedirs(directory)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    write = write_safetensors_bf16 if bf16 else write_safetensors
    if shards == 1:
        write(os.path.join(directory, "model.safetensors"), weights)
        return
    names, weight_map = list(weights), {}
    for k in range(shards):
        part = names[k::shards]
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write(os.path.join(directory, file), {n: weights[n] for n in part})
        weight_map.update({n: file for n in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def read_model_weights(directory):
    """Every tensor of the directory's safetensors files, as float32 arrays."""
    out = {}
    for f in sorted(os.listdir(directory)):
        if f.endswith(".safetensors"):
            out.update(read_safetensors(os.path.join(directory, f)))
    return out


# --- trident against the reference --------------------------------------------------------


def score_against_torch(check, trident, tmp, tag, config, rng, lengths=(13, 25, 40), shards=1,
                        bf16=False, grad_tol=1e-5, reference=None, weights=None, sequences=None):
    """Writes random weights as an HF directory, runs `trident score --save-grads` on random
    sequences of `lengths` and compares the mean loss (1e-5 relative) and every gradient
    (grad_tol of the largest) with autograd's. reference: the configuration the float64
    model computes (config's meaning; config by default); weights, sequences: given instead
    of drawn. Returns (directory, weights)."""
    if weights is None:
        weights = draw_weights(config, rng, bf16)
    if sequences is None:
        sequences = [[int(t) for t in rng.integers(0, config["vocab_size"], n)] for n in lengths]
    model = os.path.join(tmp, tag)
    write_model(model, config, weights, shards, bf16)
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
        if err > grad_tol:
            bad.append(f"{name}: gradient differs by {err:.1e}")
    check(not bad and len(grads) == len(w),
          f"{tag}: {len(w)} gradients, worst relative error {worst:.1e} {bad[:3]}")
    return model, weights


def convert_round_trip(trident, tmp, tag, model, extra=()):
    """HF -> `convert --save` -> `convert --save-hf`: (exported directory or None, stderr)."""
    ckpt, back = os.path.join(tmp, tag + "_ckpt"), os.path.join(tmp, tag + "_back")
    a = subprocess.run([trident, "convert", "--load-hf", model, "--save", ckpt],
                       capture_output=True, text=True)
    b = subprocess.run([trident, "convert", "--load", ckpt, "--save-hf", back, *extra],
                       capture_output=True, text=True)
    ok = a.returncode == 0 and b.returncode == 0
    return (back if ok else None), a.stderr[-400:] + b.stderr[-400:]


def same_tensor_bytes(model, back):
    """Whether the exported directory holds the original's tensors, dtype and bytes alike;
    the number of tensors compared."""
    original, exported = {}, {}
    for directory, into in ((model, original), (back, exported)):
        for f in os.listdir(directory):
            if f.endswith(".safetensors"):
                into.update(read_safetensors_raw(os.path.join(directory, f)))
    return exported.keys() == original.keys() and all(
        exported[n] == original[n] for n in original), len(original)


GENESIS = ("In the beginning God created the heaven and the earth. And the earth was without "
           "form, and void.\n")


def eval_against_reference(check, trident, tokenizer, tmp, tag, model, w, config, text=GENESIS):
    """trident eval's log-likelihoods of a text (its rolling windows, --log-samples) equal the
    reference's within 1e-5 relative; returns the windows' context lengths."""
    path, samples = os.path.join(tmp, tag + ".txt"), os.path.join(tmp, tag + "_samples.jsonl")
    with open(path, "w") as f:
        f.write(text)
    out = subprocess.run([trident, "eval", "--load-hf", model, "--tasks", "text:" + path,
                          "--log-samples", samples] + tokenizer, capture_output=True, text=True)
    if out.returncode != 0:
        check(False, f"{tag}: eval runs {out.stderr[-500:]}")
        return []
    rows = [json.loads(line) for line in open(samples)]
    worst = 0.0
    for r in rows:
        ref = continuation_logprob(w, config, r["context_tokens"], r["continuation_tokens"])
        worst = max(worst, abs(r["logprob"] - ref) / abs(ref))
    check(rows and worst < 1e-5,
          f"{tag}: eval's log-likelihoods equal the reference's ({len(rows)} windows, rel {worst:.1e})")
    return [len(r["context_tokens"]) + len(r["continuation_tokens"]) for r in rows]


def serve_greedy(check, trident, tokenizer, tag, model, prompts, n, want, what):
    """trident serve's greedy completions of n tokens (Megatron's PUT /api, top_k 1) are
    `want` (each the prompt's ids and the generated ones); `what` says where want comes from."""
    try:
        server = Server(trident, ["--load-hf", model] + tokenizer)
    except RuntimeError as e:
        check(False, f"{tag}: serve starts {e}")
        return
    try:
        status, m = server.request("PUT", "/api", {"prompts": prompts, "tokens_to_generate": n,
                                                   "top_k": 1})
        check(status == 200 and m["tokens"] == want,
              f"{tag}: serve's greedy tokens are {what} ({status})")
    finally:
        server.stop()
