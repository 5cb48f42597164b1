#!/usr/bin/python3
"""`trident eval` and `trident serve` on Mistral's sliding window and Llama 3.x RoPE scaling,
against the float64 PyTorch model of llama_family_reference.py (HF's definitions).

For a Mistral model with a window W = 9 and a Llama model with rope_scaling llama3 (its
original context 32 shorter than the text), random weights written as HF directories:
  * eval's log-likelihood of every rolling window of a text longer than W (and than the
    original context) equals the reference's within 1e-5 relative;
  * serve's greedy completions (PUT /api, top_k 1) of a prompt longer than W and of a short
    one are the reference's greedy decoding by full recomputation of every prefix.
Usage: llama3_mistral_serving_test.py /path/to/trident /path/to/source
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama3_mistral_reference_test import LLAMA3, MISTRAL  # noqa: E402
from llama_family_reference import (GENESIS, draw_weights, eval_against_reference,  # noqa: E402
                                    greedy, serve_greedy, window_of, write_model)
from parity import Checks  # noqa: E402

EOD = 50256  # GPT-2's <|endoftext|>
PROMPTS = ["And God said, Let there be light: and there was light. And God saw the light, "
           "that it was good: and God divided the light from the darkness.", "Hello"]
# About 110 tokens: more than the 80 positions, so eval scores it in two rolling windows.
TEXT = GENESIS + ("And darkness was upon the face of the deep. And the Spirit of God moved upon "
                  "the face of the waters. And God said, Let there be light: and there was "
                  "light. And God saw the light, that it was good: and God divided the light "
                  "from the darkness. And God called the light Day, and the darkness he called "
                  "Night.\n")


def token_ids(trident, tokenizer, tmp, texts):
    """GPT-2's ids of each text (`trident tokenize --jsonl`, itself checked against GPT-2's
    tokenizer by the tokenizer tests)."""
    path = os.path.join(tmp, "prompts.jsonl")
    with open(path, "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    out = subprocess.run([trident, "tokenize", "--jsonl", "--input", path] + tokenizer,
                         capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def one_model(check, trident, tokenizer, tmp, tag, config, rng, long_past):
    """eval and serve of one model; long_past: the length the long prompt and the text must
    pass (the window, or the original context of the scaling)."""
    weights = draw_weights(config, rng)
    model = os.path.join(tmp, tag)
    write_model(model, config, weights)
    w = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights.items()}
    lengths = eval_against_reference(check, trident, tokenizer, tmp, tag, model, w, config, TEXT)
    check(len(lengths) > 1 and max(lengths) > long_past,
          f"{tag}: eval scored {len(lengths)} windows, up to {max(lengths, default=0)} tokens at "
          f"once, past {long_past}")
    prompts = token_ids(trident, tokenizer, tmp, PROMPTS)
    check(len(prompts[0]) > long_past, f"{tag}: the long prompt has {len(prompts[0])} tokens, "
                                       f"past {long_past}")
    n = 12
    want = [ids + greedy(w, config, ids, n, eod=EOD)[0] for ids in prompts]
    serve_greedy(check, trident, tokenizer, tag, model, PROMPTS, n, want,
                 "the reference's greedy decoding by full recomputation")


def main():
    trident, source = sys.argv[1], sys.argv[2]
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(2031)
    check = Checks()
    tokenizer = ["--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                 "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
    gpt2_shape = dict(vocab_size=50257, max_position_embeddings=80)
    mistral = dict(MISTRAL, sliding_window=9, **gpt2_shape)
    llama3 = dict(LLAMA3, **gpt2_shape)
    with tempfile.TemporaryDirectory() as tmp:
        one_model(check, trident, tokenizer, tmp, "mistral_window9", mistral, rng,
                  window_of(mistral))
        one_model(check, trident, tokenizer, tmp, "llama3_scaled", llama3, rng,
                  llama3["rope_scaling"]["original_max_position_embeddings"])
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
