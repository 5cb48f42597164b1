#!/usr/bin/python3
"""Llama 3.x RoPE scaling (rope_scaling llama3 and linear), Mistral's sliding window and a
head_dim other than hidden / heads (Mistral-Nemo's) against the independent float64 PyTorch
model of llama_family_reference.py, written from HF's published definitions (transformers'
_compute_llama3_parameters / linear scaling; a token attends to keys j with i - W < j <= i).

Random weights are written as HF directories (config.json + safetensors, F32 or BF16);
`trident score` gives the loss and d(loss)/d(weights), compared with autograd's at 1e-5.
Then: `trident generate` (greedy, KV cache) beyond W tokens equals full recomputation; import
-> checkpoint -> export keeps every tensor's dtype and bytes (a BF16 file comes back BF16) and
config.json's rope_scaling / sliding_window / head_dim / torch_dtype; Qwen2-style
use_sliding_window false means no window; unsupported rope_scaling types are refused with
exit 2 naming them.
Usage: llama3_mistral_reference_test.py /path/to/trident /path/to/source
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_family_reference import (convert_round_trip, draw_weights, greedy,  # noqa: E402
                                    same_tensor_bytes, score_against_torch, write_model)
from parity import Checks  # noqa: E402

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
# Mistral-Nemo's shape in small: heads of 32 (hidden / heads = 16), q_proj [128, 64].
NEMO = dict(MISTRAL, head_dim=32, sliding_window=21, max_position_embeddings=60,
            torch_dtype="bfloat16")


def generation_against_torch(check, trident, source, tmp, tag, config, rng):
    """Greedy decoding with the KV cache past the window / original context equals full
    recomputation in float64 (GPT-2's tokenizer: vocabulary 50257)."""
    config = dict(config, vocab_size=50257, max_position_embeddings=80)
    weights = draw_weights(config, rng)
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
        want, want_lp = greedy(w, config, r["prompt_tokens"], 40, eod=50256)
        err = max((abs(a - b) for a, b in zip(r["logprobs"], want_lp)), default=0)
        total = len(r["prompt_tokens"]) + len(r["tokens"])
        check(r["tokens"] == want and err < 1e-4,
              f"{tag}: greedy generation with the KV cache to position {total} equals full "
              f"recomputation (logprob error {err:.1e})")


def round_trip(check, trident, tmp, model, keys, tag=None):
    """HF -> checkpoint -> HF: every tensor's dtype and bytes, and config.json's `keys`."""
    tag = tag or keys[0]
    back, errors = convert_round_trip(trident, tmp, tag, model)
    ok = back is not None and same_tensor_bytes(model, back)[0]
    if ok:
        written, read = (json.load(open(os.path.join(d, "config.json"))) for d in (back, model))
        ok = all(written.get(k) == read[k] for k in keys + ["model_type"])
    check(ok, f"{tag}: HF -> trident checkpoint -> HF: tensors identical (dtype and bytes) and "
              f"config.json keeps {', '.join(keys)} {errors}")


def refusals(check, trident, tmp, rng):
    tokens = os.path.join(tmp, "mistral_tokens.json")
    for kind in ("dynamic", "yarn", "longrope"):
        bad = os.path.join(tmp, "bad_" + kind)
        write_model(bad, dict(LLAMA3, rope_scaling=dict(rope_type=kind, factor=2.0)),
                    draw_weights(LLAMA3, rng), 1)
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
        llama3 = score_against_torch(check, trident, tmp, "llama3", LLAMA3, rng, (13, 69, 100))
        linear = dict(LLAMA3, rope_scaling=dict(rope_type="linear", factor=2.0),
                      tie_word_embeddings=True)
        score_against_torch(check, trident, tmp, "linear", linear, rng, (50,))
        mistral = score_against_torch(check, trident, tmp, "mistral", MISTRAL, rng, (13, 90, 150))
        # Qwen2's files carry a window that use_sliding_window switches off: full attention.
        off = dict(MISTRAL, architectures=["LlamaForCausalLM"], model_type="llama",
                   use_sliding_window=False, max_window_layers=2)
        score_against_torch(check, trident, tmp, "window_off", off, rng, (60,),
                            reference=dict(off, sliding_window=None))
        if llama3:
            round_trip(check, trident, tmp, llama3[0], ["rope_scaling"])
        if mistral:
            round_trip(check, trident, tmp, mistral[0], ["sliding_window"])
        # head_dim other than hidden / heads (Megatron's --kv-channels): Mistral-Nemo's wider
        # heads (128 with 5120 / 32) with a window, stored in BF16 as published; and narrower
        # Llama 3 heads.
        nemo = score_against_torch(check, trident, tmp, "nemo_head32_bf16", NEMO, rng, (13, 60),
                                   bf16=True)
        if nemo:
            round_trip(check, trident, tmp, nemo[0], ["head_dim", "sliding_window", "torch_dtype"],
                       "nemo_head32_bf16")
        narrow = score_against_torch(check, trident, tmp, "llama3_head8", dict(LLAMA3, head_dim=8),
                                     rng, (13, 69))
        if narrow:
            round_trip(check, trident, tmp, narrow[0], ["head_dim", "rope_scaling"], "llama3_head8")
        refusals(check, trident, tmp, rng)
        generation_against_torch(check, trident, source, tmp, "mistral_generate",
                                 dict(MISTRAL, sliding_window=9), rng)
        generation_against_torch(check, trident, source, tmp, "llama3_generate", LLAMA3, rng)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
