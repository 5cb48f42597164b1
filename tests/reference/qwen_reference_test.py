#!/usr/bin/python3
"""trident's Qwen2 and Qwen3 against the independent float64 PyTorch model of
llama_family_reference.py (from HF's published Qwen2ForCausalLM / Qwen3ForCausalLM
definitions), on HF-layout weights.

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
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_family_reference import (convert_round_trip, draw_weights,  # noqa: E402
                                    eval_against_reference, greedy, is_qwen3,
                                    read_safetensors_raw, same_tensor_bytes, score_against_torch,
                                    serve_greedy, write_model)
from parity import MPI_ENV, Checks, read_safetensors  # noqa: E402

QWEN2 = dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_act="silu",
             num_hidden_layers=2, hidden_size=32, intermediate_size=48, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=101, max_position_embeddings=24,
             rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None, tie_word_embeddings=True,
             use_sliding_window=False, sliding_window=4, max_window_layers=2,
             torch_dtype="bfloat16", attention_dropout=0.0, bos_token_id=1, eos_token_id=2)
QWEN3 = dict(QWEN2, architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=16,
             attention_bias=False, sliding_window=None, tie_word_embeddings=False)


def make_model(tmp, tag, config, rng, shards=1, bf16=False):
    """An HF directory of random weights (F32 files say torch_dtype float32)."""
    weights = draw_weights(config, rng, bf16)
    model = os.path.join(tmp, tag)
    write_model(model, config if bf16 else dict(config, torch_dtype="float32"), weights, shards,
                bf16)
    return model, weights


def against_torch(check, trident, tmp, tag, config, rng, shards=1, bf16=False):
    if not bf16:
        config = dict(config, torch_dtype="float32")
    return score_against_torch(check, trident, tmp, tag, config, rng, shards=shards, bf16=bf16)


def round_trip(check, trident, tmp, tag, model):
    """HF -> trident checkpoint -> HF: the same tensors (bit for bit, as float32) and the
    same architecture in config.json."""
    back, errors = convert_round_trip(trident, tmp, tag, model)
    ok, n = same_tensor_bytes(model, back) if back else (False, 0)
    check(ok, f"{tag}: HF -> trident checkpoint -> HF: {n} tensors identical {errors}")
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
    """A BF16 file comes back byte for byte (BF16, torch_dtype bfloat16); exported as F32
    (--save-hf-dtype fp32), its values come back exactly."""
    back, errors = convert_round_trip(trident, tmp, "bf16", model)
    ok, n = same_tensor_bytes(model, back) if back else (False, 0)
    dtype = json.load(open(os.path.join(back, "config.json"))).get("torch_dtype") if back else None
    check(ok and dtype == "bfloat16",
          f"BF16 safetensors: HF -> checkpoint -> HF gives the same bytes of {n} BF16 tensors, "
          f"torch_dtype {dtype} {errors}")
    # train --load-hf of a BF16 directory saves BF16 too: with --lr 0 the very same bytes.
    trained = os.path.join(tmp, "bf16_trained")
    out = subprocess.run([trident, "train", "--load-hf", model, "--mock-data", "--lr", "0",
                          "--train-iters", "1", "--global-batch-size", "1", "--micro-batch-size",
                          "1", "--seq-length", "16", "--eval-iters", "0", "--save-hf", trained],
                         capture_output=True, text=True)
    ok, n = same_tensor_bytes(model, trained) if out.returncode == 0 else (False, 0)
    check(ok, f"train --load-hf BF16 --lr 0 --save-hf: the same bytes of {n} BF16 tensors "
              f"{out.stderr[-300:]}")
    back, errors = convert_round_trip(trident, tmp, "bf16_as_f32", model, ["--save-hf-dtype", "fp32"])
    ok = back is not None
    if ok:
        path = os.path.join(back, "model.safetensors")
        got, stored = read_safetensors(path), read_safetensors_raw(path)
        ok = got.keys() == weights.keys() and all(np.array_equal(got[n], weights[n]) for n in weights)
        ok = ok and all(dtype == "F32" for dtype, _, _ in stored.values())
    check(ok, f"BF16 safetensors: every value read exactly (HF -> checkpoint -> HF as F32) {errors}")


def generate(trident, tokenizer, args, ranks=1):
    cmd = [trident, "generate"] + tokenizer + args + ["--json"]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd + ["--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=240)
    if out.returncode != 0:
        print(out.stdout[-2000:], out.stderr[-2000:])
        return None
    return [json.loads(line) for line in out.stdout.splitlines()]


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
    eval_against_reference(check, trident, tokenizer, tmp, tag, model, w, config)
    serve_greedy(check, trident, tokenizer, tag, model, [r["prompt"] for r in one], 10,
                 [r["prompt_tokens"] + r["tokens"] for r in one], "generate's")
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
