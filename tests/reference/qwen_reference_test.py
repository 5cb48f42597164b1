#!/usr/bin/python3
"""trident's Qwen2 and Qwen3 against an independent Qwen written here in PyTorch (float64)
from HF's published Qwen2ForCausalLM / Qwen3ForCausalLM definitions, on HF-layout weights.

Qwen2 is the Llama block with biases on q_proj, k_proj and v_proj only; Qwen3 has no biases,
an RMSNorm over each query and key head (weights of head_dim, shared by the heads) applied
before RoPE, and an explicit head_dim (here 16 with hidden 32 / heads 4 = 8). The weights are
drawn with numpy and written as an HF directory (F32, or BF16 as the published files are;
tied embeddings without lm_head.weight, or untied; one file or two shards with the index);
`trident score` reads it and must give the reference's mean loss and d(loss)/d(weights) in HF
names. Then: import -> trident checkpoint -> export gives the same tensors and an equivalent
config.json, greedy generation with the KV cache equals the reference's full recomputation
(t = 1 and t = 2), and config.json values trident does not compute are refused by name with
exit code 2.
Usage: qwen_reference_test.py /path/to/trident /path/to/source
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
from llama_reference_test import write_model  # noqa: E402
from parity import MPI_ENV, Checks, read_safetensors  # noqa: E402
from serve_client import Server  # noqa: E402

QWEN2 = dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_act="silu",
             num_hidden_layers=2, hidden_size=32, intermediate_size=48, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=101, max_position_embeddings=24,
             rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None, tie_word_embeddings=True,
             use_sliding_window=False, sliding_window=4, max_window_layers=2,
             torch_dtype="bfloat16", attention_dropout=0.0, bos_token_id=1, eos_token_id=2)
QWEN3 = dict(QWEN2, architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=16,
             attention_bias=False, sliding_window=None, tie_word_embeddings=False)


def is_qwen3(c):
    return c["model_type"] == "qwen3"


def head_dim(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def hf_shapes(c):
    h, f, v, d = c["hidden_size"], c["intermediate_size"], c["vocab_size"], head_dim(c)
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (v, h)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
                       p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
                       p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
                       p + "mlp.down_proj.weight": (h, f), p + "input_layernorm.weight": (h,),
                       p + "post_attention_layernorm.weight": (h,)})
        if is_qwen3(c):
            shapes[p + "self_attn.q_norm.weight"] = (d,)
            shapes[p + "self_attn.k_norm.weight"] = (d,)
        else:
            shapes.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
    return shapes


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention(w, c, p, a, cos, sin):
    """Qwen2Attention / Qwen3Attention on one sequence a [s, h]."""
    s, nh, g, d, eps = a.shape[0], c["num_attention_heads"], c["num_key_value_heads"], head_dim(c), c["rms_norm_eps"]

    def proj(name):
        y = a @ w[p + name + ".weight"].T
        return y + w[p + name + ".bias"] if p + name + ".bias" in w else y

    q = proj("self_attn.q_proj").view(s, nh, d)
    k = proj("self_attn.k_proj").view(s, g, d)
    v = proj("self_attn.v_proj").view(s, g, d).transpose(0, 1)
    if is_qwen3(c):  # per-head RMSNorm over head_dim, before RoPE
        q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
        k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
    q, k = q.transpose(0, 1), k.transpose(0, 1)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    k, v = k.repeat_interleave(nh // g, 0), v.repeat_interleave(nh // g, 0)
    att = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    att = att.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), float("-inf"))
    y = (att.softmax(-1) @ v).transpose(0, 1).reshape(s, nh * d)
    return y @ w[p + "self_attn.o_proj.weight"].T


def logits(w, c, ids):
    """Full recomputation of one sequence's logits [s, vocab]."""
    d, eps, s = head_dim(c), c["rms_norm_eps"], len(ids)
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = x + attention(w, c, p, rms_norm(x, w[p + "input_layernorm.weight"], eps), cos, sin)
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        m = F.silu(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)
        x = x + m @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"]
    return x @ head.T


def qwen_loss(w, c, sequences):
    """Sum of next-token losses over windows of max_position_embeddings + 1 tokens."""
    window, total, count = c["max_position_embeddings"], 0.0, 0
    for seq in sequences:
        for start in range(0, len(seq) - 1, window):
            chunk = seq[start:start + window + 1]
            total = total + F.cross_entropy(logits(w, c, chunk[:-1]), torch.tensor(chunk[1:]),
                                            reduction="sum")
            count += len(chunk) - 1
    return total, count


def to_bf16(a):
    """The bf16 bits of float32 values (round to nearest even) and the values they hold."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    return rounded, (rounded.astype("<u4") << 16).view("<f4")


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


def draw_weights(config, rng, bf16=False):
    weights = {}
    for name, shape in hf_shapes(config).items():
        norm = name.endswith("norm.weight")
        w = (1.0 + 0.1 * rng.standard_normal(shape)) if norm else 0.2 * rng.standard_normal(shape)
        w = w.astype(np.float32)
        weights[name] = to_bf16(w)[1].reshape(shape) if bf16 else w
    return weights


def make_model(tmp, tag, config, rng, shards=1, bf16=False):
    weights = draw_weights(config, rng, bf16)
    model = os.path.join(tmp, tag)
    if bf16:
        os.makedirs(model)
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(config, f)
        write_safetensors_bf16(os.path.join(model, "model.safetensors"), weights)
    else:
        write_model(model, dict(config, torch_dtype="float32"), weights, shards)
    return model, weights


def against_torch(check, trident, tmp, tag, config, rng, shards=1, bf16=False):
    model, weights = make_model(tmp, tag, config, rng, shards, bf16)
    sequences = [[int(t) for t in rng.integers(0, config["vocab_size"], n)] for n in (13, 25, 40)]
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
    total, count = qwen_loss(w, config, sequences)
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


def round_trip(check, trident, tmp, tag, model):
    """HF -> trident checkpoint -> HF: the same tensors (bit for bit, as float32) and the
    same architecture in config.json."""
    ckpt, back = os.path.join(tmp, tag + "_ckpt"), os.path.join(tmp, tag + "_back")
    a = subprocess.run([trident, "convert", "--load-hf", model, "--save", ckpt],
                       capture_output=True, text=True)
    b = subprocess.run([trident, "convert", "--load", ckpt, "--save-hf", back],
                       capture_output=True, text=True)
    ok = a.returncode == 0 and b.returncode == 0
    original, exported = {}, {}
    if ok:
        exported = read_safetensors(os.path.join(back, "model.safetensors"))
        for f in os.listdir(model):
            if f.endswith(".safetensors"):
                original.update(read_safetensors(os.path.join(model, f)))
        ok = exported.keys() == original.keys() and all(
            exported[n].tobytes() == original[n].tobytes() for n in original)
    check(ok, f"{tag}: HF -> trident checkpoint -> HF: {len(original)} tensors identical "
              f"{a.stderr[-400:]}{b.stderr[-400:]}")
    if not ok:
        return
    before = json.load(open(os.path.join(model, "config.json")))
    after = json.load(open(os.path.join(back, "config.json")))
    keys = ["architectures", "model_type", "hidden_act", "num_hidden_layers", "hidden_size",
            "intermediate_size", "num_attention_heads", "num_key_value_heads",
            "max_position_embeddings", "vocab_size", "rms_norm_eps", "rope_theta",
            "tie_word_embeddings", "use_sliding_window"]
    keys += ["head_dim", "attention_bias"] if is_qwen3(before) else []
    differ = [k for k in keys if not (after.get(k) == before.get(k) or
                                      (isinstance(before.get(k), float) and
                                       abs(after.get(k, 0) - before[k]) <= 1e-6 * abs(before[k])))]
    check(not differ, f"{tag}: exported config.json agrees on {len(keys)} keys {differ}")


def read_back_bf16(check, trident, tmp, model, weights):
    """A BF16 file's values come back exactly (exported as float32)."""
    ckpt, back = os.path.join(tmp, "bf16_ckpt"), os.path.join(tmp, "bf16_back")
    a = subprocess.run([trident, "convert", "--load-hf", model, "--save", ckpt], capture_output=True)
    b = subprocess.run([trident, "convert", "--load", ckpt, "--save-hf", back], capture_output=True)
    ok = a.returncode == 0 and b.returncode == 0
    if ok:
        got = read_safetensors(os.path.join(back, "model.safetensors"))
        ok = got.keys() == weights.keys() and all(np.array_equal(got[n], weights[n]) for n in weights)
    check(ok, "BF16 safetensors: every value read exactly (HF -> checkpoint -> HF as F32)")


def generate(trident, tokenizer, args, ranks=1):
    cmd = [trident, "generate"] + tokenizer + args + ["--json"]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd + ["--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=240)
    if out.returncode != 0:
        print(out.stdout[-2000:], out.stderr[-2000:])
        return None
    return [json.loads(line) for line in out.stdout.splitlines()]


def greedy(w, c, prompt, n):
    """Greedy decoding by full recomputation of every prefix (no cache)."""
    ids, lps = list(prompt), []
    for _ in range(n):
        lp = logits(w, c, ids)[-1].log_softmax(-1)
        nxt = int(lp.argmax())
        ids.append(nxt)
        lps.append(float(lp[nxt]))
    return ids[len(prompt):], lps


def generation(check, trident, source, tmp, tag, config, rng):
    """KV-cache generation (trident) against full recomputation (the reference)."""
    config = dict(config, vocab_size=50304, max_position_embeddings=48)  # GPT-2's tokenizer
    model, weights = make_model(tmp, tag, config, rng)
    w = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights.items()}
    tokenizer = ["--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                 "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
    base = ["--load-hf", model, "--greedy", "--tokens-to-generate", "10", "--logprobs",
            "--max-batch", "2", "--prompt", "In the beginning God created", "--prompt", "Hello"]
    one = generate(trident, tokenizer, base)
    check(one is not None and len(one) == 2, f"{tag}: generate runs")
    if one is None:
        return
    for r in one:
        want, want_lp = greedy(w, config, r["prompt_tokens"], 10)
        err = max(abs(a - b) for a, b in zip(r["logprobs"], want_lp))
        check(r["tokens"] == want and err < 1e-4,
              f"{tag}: KV-cache greedy tokens equal full recomputation's for {r['prompt']!r} "
              f"(logprob error {err:.1e})")
    got = generate(trident, tokenizer, base + ["--tensor-model-parallel-size", "2"], ranks=2)
    check(got is not None and [g["tokens"] for g in got] == [r["tokens"] for r in one],
          f"{tag}: the same tokens under t = 2")
    evaluate(check, trident, tokenizer, tmp, tag, model, w, config)
    serve(check, trident, tokenizer, tag, model, one)
    # Training from the HF directory: config.json sets the Qwen options; flags that
    # contradict it are refused by name.
    out = subprocess.run([trident, "train", "--load-hf", model, "--mock-data", "--train-iters", "2",
                          "--global-batch-size", "2", "--micro-batch-size", "1", "--seq-length",
                          "16", "--eval-iters", "1"], capture_output=True, text=True)
    check(out.returncode == 0 and "final train loss" in out.stdout,
          f"{tag}: train --load-hf runs {out.stderr[-300:]}")
    flip = "--add-qkv-bias" if is_qwen3(config) else "--qk-layernorm"
    out = subprocess.run([trident, "train", "--load-hf", model, "--mock-data", "--train-iters", "1",
                          "--kv-channels", "12", flip], capture_output=True, text=True)
    check(out.returncode == 2 and "--kv-channels disagrees" in out.stderr and
          f"{flip} disagrees" in out.stderr,
          f"{tag}: --load-hf with contradicting Qwen flags is refused: {out.stderr.strip()[:200]}")


def serve(check, trident, tokenizer, tag, model, greedy_runs):
    """trident serve's greedy completions (Megatron's PUT /api) are generate's tokens."""
    try:
        server = Server(trident, ["--load-hf", model] + tokenizer)
    except RuntimeError as e:
        check(False, f"{tag}: serve starts {e}")
        return
    try:
        prompts = [r["prompt"] for r in greedy_runs]
        status, m = server.request("PUT", "/api", {"prompts": prompts, "tokens_to_generate": 10,
                                                   "top_k": 1})
        want = [r["prompt_tokens"] + r["tokens"] for r in greedy_runs]
        check(status == 200 and m["tokens"] == want,
              f"{tag}: serve's greedy tokens are generate's ({status})")
    finally:
        server.stop()


def evaluate(check, trident, tokenizer, tmp, tag, model, w, config):
    """trident eval's log-likelihood of a text (one rolling window) equals the reference's."""
    text, samples = os.path.join(tmp, tag + ".txt"), os.path.join(tmp, tag + "_samples.jsonl")
    with open(text, "w") as f:
        f.write("In the beginning God created the heaven and the earth. And the earth was "
                "without form, and void.\n")
    out = subprocess.run([trident, "eval", "--load-hf", model, "--tasks", "text:" + text,
                          "--log-samples", samples] + tokenizer, capture_output=True, text=True)
    if out.returncode != 0:
        check(False, f"{tag}: eval runs {out.stderr[-500:]}")
        return
    rows = [json.loads(line) for line in open(samples)]
    worst = 0.0
    for r in rows:
        ids = r["context_tokens"] + r["continuation_tokens"]
        lp = logits(w, config, ids[:-1]).log_softmax(-1)
        start = len(r["context_tokens"]) - 1
        ref = sum(float(lp[start + i, t]) for i, t in enumerate(r["continuation_tokens"]))
        worst = max(worst, abs(r["logprob"] - ref) / abs(ref))
    check(rows and worst < 1e-5,
          f"{tag}: eval's log-likelihoods equal the reference's ({len(rows)} windows, rel {worst:.1e})")


def refusals(check, trident, tmp, rng):
    """config.json values trident does not compute: exit 2, the key named."""
    tokens = os.path.join(tmp, "ids.json")
    with open(tokens, "w") as f:
        json.dump([[1, 2, 3, 4]], f)
    cases = [("use_sliding_window", QWEN2, dict(use_sliding_window=True)),
             ("head_dim", QWEN3, dict(head_dim="wide")),
             ("attention_bias", QWEN3, dict(attention_bias=True)),
             ("layer_types", QWEN3, dict(layer_types=["sliding_attention", "full_attention"]))]
    for key, base, change in cases:
        bad = os.path.join(tmp, "bad_" + key)
        write_model(bad, dict(base, **change), draw_weights(base, rng), 1)
        out = subprocess.run([trident, "score", "--model", bad, "--tokens", tokens],
                             capture_output=True, text=True)
        check(out.returncode == 2 and key in out.stderr,
              f"config.json with a bad {key} is refused by name: {out.stderr.strip()[:160]}")
    # q_norm weights of the wrong width (config head_dim 16, file 8): the tensor is named.
    bad = os.path.join(tmp, "bad_q_norm")
    weights = draw_weights(QWEN3, rng)
    weights["model.layers.0.self_attn.q_norm.weight"] = np.ones(8, np.float32)
    write_model(bad, QWEN3, weights, 1)
    out = subprocess.run([trident, "score", "--model", bad, "--tokens", tokens],
                         capture_output=True, text=True)
    check(out.returncode == 2 and "q_norm.weight" in out.stderr,
          f"a q_norm weight of the wrong shape is refused by name: {out.stderr.strip()[:160]}")


def main():
    trident, source = sys.argv[1], sys.argv[2]
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(2027)
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        # Qwen2: tied (no lm_head.weight), BF16, sliding_window present but off.
        got = against_torch(check, trident, tmp, "qwen2_tied_bf16", QWEN2, rng, bf16=True)
        if got:
            read_back_bf16(check, trident, tmp, *got)
        # Qwen2 untied, multi-query (G = 1), two shards.
        got = against_torch(check, trident, tmp, "qwen2_untied_mqa",
                            dict(QWEN2, tie_word_embeddings=False, num_key_value_heads=1), rng, 2)
        if got:
            round_trip(check, trident, tmp, "qwen2_untied_mqa", got[0])
        # Qwen3: head_dim 16 (hidden / heads = 8), untied, G = 2.
        got = against_torch(check, trident, tmp, "qwen3_head16", QWEN3, rng)
        if got:
            round_trip(check, trident, tmp, "qwen3_head16", got[0])
        # Qwen3 tied, head_dim 8 = hidden / heads written explicitly, G = 4 (plain multi-head).
        got = against_torch(check, trident, tmp, "qwen3_tied_mha",
                            dict(QWEN3, head_dim=8, tie_word_embeddings=True, num_key_value_heads=4),
                            rng)
        if got:
            round_trip(check, trident, tmp, "qwen3_tied_mha", got[0])
        generation(check, trident, source, tmp, "qwen2_generate", QWEN2, rng)
        generation(check, trident, source, tmp, "qwen3_generate", QWEN3, rng)
        refusals(check, trident, tmp, rng)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
