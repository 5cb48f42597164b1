#!/usr/bin/python3
"""trident generate against an independent PyTorch GPT-2 on the same HF weights.

Greedy tokens equal PyTorch's greedy decoder (float64, full recomputation) and are the same
under t = 1, t = 2, p = 2 and (t, p) = (2, 2); log-probabilities equal PyTorch's and
`trident score`'s; a checkpoint gives what its HF export gives; sampling repeats with a seed;
bad input is refused with exit code 2.
Usage: generation_test.py /path/to/trident /path/to/source
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_torch import forward, greedy  # noqa: E402
from parity import MPI_ENV, Checks  # noqa: E402
from torch_reference_test import hf_shapes, write_safetensors  # noqa: E402

# head_dim 32: the cached attention takes its vector form (as for GPT-2's 64).
CONFIG = dict(n_layer=4, n_embd=64, n_head=2, vocab_size=50257, n_positions=64,
              layer_norm_epsilon=1e-5, activation_function="gelu_new", model_type="gpt2")
PROMPTS = ["In the beginning God created the heaven and the earth.", "Hello", "And God said unto"]
EOD = 50256


def write_model(path):
    rng = np.random.default_rng(31)
    weights = {}
    for name, shape in hf_shapes(CONFIG).items():
        scale = 0.1 if len(shape) == 1 else 0.25
        base = 1.0 if name.endswith("weight") and len(shape) == 1 else 0.0
        weights[name] = (base + scale * rng.standard_normal(shape)).astype(np.float32)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    write_safetensors(os.path.join(path, "model.safetensors"), weights)
    return weights


def generate(trident, tokenizer, args, ranks=1):
    cmd = [trident, "generate"] + tokenizer + args + ["--json"]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks)] + cmd + ["--threads", "1"]
    try:  # a hang (a rank waiting forever) is a failure, not a stuck test
        out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=240)
    except subprocess.TimeoutExpired:
        print("timed out:", " ".join(cmd))
        return None
    if out.returncode != 0:
        print(out.stdout, out.stderr)
        return None
    return [json.loads(line) for line in out.stdout.splitlines()]


def main():
    trident, source = sys.argv[1], sys.argv[2]
    tokenizer = ["--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                 "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
    check = Checks()
    torch.set_default_dtype(torch.float64)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "hf")
        weights = write_model(model)
        w = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights.items()}
        prompt_args = [a for p in PROMPTS for a in ("--prompt", p)]
        base = ["--load-hf", model, "--greedy", "--tokens-to-generate", "12", "--logprobs",
                "--max-batch", "2"] + prompt_args
        one = generate(trident, tokenizer, base)
        check(one is not None and len(one) == 3, "generate --greedy runs (3 prompts, 2 slots)")
        if one is None:
            return check.summary()

        # Greedy tokens and their log-probabilities against PyTorch.
        for r in one:
            want, want_lp = greedy(w, CONFIG, r["prompt_tokens"], 12, eod=EOD, kv_cache=False)
            check(r["tokens"] == want, f"greedy tokens equal PyTorch's for {r['prompt']!r}")
            err = max(abs(a - b) for a, b in zip(r["logprobs"], want_lp)) if want_lp else 0
            check(err < 1e-4, f"logprobs equal PyTorch's (max error {err:.2e})")
            logits = forward(w, CONFIG, r["prompt_tokens"])
            ids = r["prompt_tokens"]
            ref = [float(logits[i].log_softmax(-1)[ids[i + 1]]) for i in range(len(ids) - 1)]
            err = max((abs(a - b) for a, b in zip(r["prompt_logprobs"], ref)), default=0)
            check(len(ref) == len(r["prompt_logprobs"]) and err < 1e-4,
                  f"prompt logprobs equal PyTorch's (max error {err:.2e})")

        # The same tokens under every layout.
        for t, p in ((2, 1), (1, 2), (2, 2)):
            args = base + ["--tensor-model-parallel-size", str(t),
                           "--pipeline-model-parallel-size", str(p)]
            got = generate(trident, tokenizer, args, ranks=t * p)
            same = got is not None and [g["tokens"] for g in got] == [r["tokens"] for r in one]
            check(same, f"greedy tokens identical under t={t} p={p}")

        # Prompt log-probabilities are what `trident score` computes for the same tokens.
        ids = one[0]["prompt_tokens"]
        with open(os.path.join(tmp, "ids.json"), "w") as f:
            json.dump(ids, f)
        out = subprocess.run([trident, "score", "--model", model, "--tokens",
                              os.path.join(tmp, "ids.json")], capture_output=True, text=True)
        loss = json.loads(out.stdout)["loss"] if out.returncode == 0 else float("nan")
        mean = -sum(one[0]["prompt_logprobs"]) / len(one[0]["prompt_logprobs"])
        check(abs(loss - mean) < 1e-5 * max(1, abs(loss)),
              f"prompt logprobs match trident score (loss {loss:.6f} vs {mean:.6f})")

        # A checkpoint of the same weights generates the same tokens.
        ckpt = os.path.join(tmp, "ckpt")
        conv = subprocess.run([trident, "convert", "--load-hf", model, "--save", ckpt],
                              capture_output=True, text=True)
        got = generate(trident, tokenizer,
                       ["--load", ckpt] + base[2:]) if conv.returncode == 0 else None
        check(got is not None and [g["tokens"] for g in got] == [r["tokens"] for r in one],
              "--load CKPT generates what --load-hf generates")

        # bf16: runs, and its first tokens mostly agree with fp32.
        got = generate(trident, tokenizer, base + ["--bf16"])
        agree = got is not None and sum(g["tokens"][:1] == r["tokens"][:1]
                                        for g, r in zip(got, one)) >= 2
        check(agree, "--bf16 generates, first tokens agreeing with fp32")

        # Sampling repeats with its seed, and differs with another.
        sample = ["--load-hf", model, "--tokens-to-generate", "16", "--top-p", "0.9",
                  "--temperature", "1.2", "--top-k", "50"] + prompt_args
        a = generate(trident, tokenizer, sample + ["--seed", "3"])
        b = generate(trident, tokenizer, sample + ["--seed", "3", "--max-batch", "1"])
        c = generate(trident, tokenizer, sample + ["--seed", "4"])
        check(a is not None and a == b, "a seed repeats the samples (whatever the batch)")
        check(a is not None and c is not None and a != c, "another seed samples differently")

        # A prompt file (plain lines and JSONL) gives what --prompt gives.
        with open(os.path.join(tmp, "prompts.txt"), "w") as f:
            f.write(PROMPTS[0] + "\n\n" + json.dumps({"prompt": PROMPTS[1]}) + "\n" +
                    json.dumps({"text": PROMPTS[2], "id": 3}) + "\n")
        got = generate(trident, tokenizer, base[:-len(prompt_args)] +
                       ["--prompt-file", os.path.join(tmp, "prompts.txt")])
        check(got is not None and [g["tokens"] for g in got] == [r["tokens"] for r in one],
              "--prompt-file (plain and JSONL lines) gives what --prompt gives")

        # A stop string ends the text where it begins.
        text = one[0]["text"]
        stop = text[len(text) // 2:len(text) // 2 + 3]
        if stop.strip() and stop not in text[:len(text) // 2]:
            got = generate(trident, tokenizer, ["--load-hf", model, "--greedy", "--prompt",
                                                PROMPTS[0], "--tokens-to-generate", "12",
                                                "--stop", stop])
            check(got is not None and got[0]["text"] == text[:text.index(stop)] and
                  got[0]["finish_reason"] == "stop", f"--stop {stop!r} cuts the text before it")

        # Bad input: a clear message and exit code 2.
        for args, message in (
                (["--load-hf", model, "--prompt", "x", "--tokens-to-generate", "100"],
                 "exceeds the maximum sequence length"),
                (["--load-hf", model, "--prompt", "x", "--top-p", "0"], "top_p must be in (0, 1]"),
                (["--load-hf", model, "--prompt-file", os.path.join(tmp, "none")], "cannot open"),
                (["--load-hf", model], "give --prompt"),
                (["--load-hf", model, "--prompt", "x", "--tensor-model-parallel-size", "2"],
                 "must equal the number of MPI ranks"),
                (["--load", os.path.join(tmp, "nothing"), "--prompt", "x"], "nothing")):
            out = subprocess.run([trident, "generate"] + tokenizer + args, capture_output=True,
                                 text=True)
            check(out.returncode == 2 and message in out.stderr,
                  f"refused with exit 2: {message} ({out.stderr.strip().splitlines()[-1:]})")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
