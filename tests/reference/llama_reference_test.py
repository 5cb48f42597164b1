#!/usr/bin/python3
"""trident's Llama (RMSNorm, RoPE, SwiGLU, grouped-query attention, untied output, no
biases) against the independent float64 PyTorch Llama of llama_family_reference.py, on HF-layout
weights.

The weights are drawn with numpy and written as a HuggingFace LlamaForCausalLM directory
(config.json, the weights split over two shards named by model.safetensors.index.json);
`trident score` reads it, scores token sequences and writes d(mean loss)/d(weights) in HF
names; PyTorch autograd computes the same from the same weights. Then: import -> trident
checkpoint -> export gives the same tensors bit for bit, and HF options trident does not
compute (rope_scaling of type dynamic, a sliding window on LlamaForCausalLM) are refused by
name. (llama3 and linear rope_scaling and Mistral's window: llama3_mistral_reference_test.py.)
Usage: llama_reference_test.py /path/to/trident
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_family_reference import (convert_round_trip, draw_weights, same_tensor_bytes,  # noqa: E402
                                    score_against_torch, write_model)
from parity import Checks  # noqa: E402

BASE = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
            num_hidden_layers=2, hidden_size=32, intermediate_size=48, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=101, max_position_embeddings=24, rms_norm_eps=1e-5,
            rope_theta=500.0, rope_scaling=None, tie_word_embeddings=False, attention_bias=False,
            mlp_bias=False)


def against_torch(check, trident, tmp, tag, config, shards, rng):
    got = score_against_torch(check, trident, tmp, tag, config, rng, shards=shards, grad_tol=1e-4)
    return got[0] if got else None


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
            back, errors = convert_round_trip(trident, tmp, "gqa_untied", model)
            ok, n = same_tensor_bytes(model, back) if back else (False, 0)
            check(ok, f"HF Llama -> trident checkpoint -> HF Llama: {n} tensors identical {errors}")
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
