#!/usr/bin/python3
"""Samples while training (--sample-interval, --sample-prompt) against trident generate.

Each sample printed at iteration N is the continuation `trident generate` gives from the
checkpoint saved at iteration N with the same sampling (top-p 0.9, temperature 0.8, seed
--seed + N): the sample shows the model as it was at that iteration, under one process and
under a pipeline of two. A sample without a tokenizer or a prompt is refused (exit 2).
Usage: sample_test.py /path/to/trident /path/to/source
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import MPI_ENV, Checks  # noqa: E402

TRIDENT, SRC = sys.argv[1], sys.argv[2]
VOCAB = [f"--vocab-file={SRC}/data/gpt2/encoder.json", f"--merge-file={SRC}/data/gpt2/vocab.bpe"]
PROMPT, TOKENS, SEED = "And God said", 12, 5
MODEL = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "2",
         "--seq-length", "64", "--micro-batch-size", "2", "--global-batch-size", "4",
         "--data-path", f"{SRC}/data/kjv/kjv_text_document", "--eval-iters", "0",
         "--log-interval", "3", "--seed", str(SEED)] + VOCAB
check = Checks()


def train(save, extra, ranks=1):
    cmd = [TRIDENT, "train"] + MODEL + ["--train-iters", "6", "--sample-interval", "3",
                                        "--sample-prompt", PROMPT, "--sample-tokens", str(TOKENS),
                                        "--save", save, "--save-interval", "3"] + extra
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    samples = dict((int(it), text) for it, text in
                   re.findall(r"^ sample at iteration (\d+): " + PROMPT + r"(.*)$", out.stdout, re.M))
    return out.returncode, samples, out.stdout + out.stderr


def generated(save, iteration):
    """trident generate from the checkpoint of `iteration` (a copy whose latest names it)."""
    copy = save + f"-at-{iteration}"
    shutil.copytree(save, copy)
    with open(os.path.join(copy, "latest"), "w") as f:
        f.write(f"iter_{iteration:07d}\n")
    out = subprocess.run([TRIDENT, "generate", "--load", copy, "--prompt", PROMPT,
                          "--tokens-to-generate", str(TOKENS), "--temperature", "0.8",
                          "--top-p", "0.9", "--seed", str(SEED + iteration), "--json"] + VOCAB,
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.splitlines()[-1])["text"] if out.returncode == 0 else None


with tempfile.TemporaryDirectory() as tmp:
    for name, extra, ranks in [("one process", [], 1),
                               ("p = 2", ["--pipeline-model-parallel-size", "2"], 2)]:
        save = os.path.join(tmp, name.replace(" ", "").replace("=", ""))
        rc, samples, log = train(save, extra, ranks)
        check(rc == 0 and sorted(samples) == [3, 6],
              f"{name}: trains and prints samples at iterations 3 and 6 (rc {rc}, "
              f"{sorted(samples)}){'' if rc == 0 else log[-800:]}")
        for it in sorted(samples):
            want = generated(save, it)
            check(want is not None and samples[it] == want,
                  f"{name}: the sample at iteration {it} is trident generate's continuation from "
                  f"that iteration's checkpoint ({samples[it]!r} vs {want!r})")

    refused = subprocess.run([TRIDENT, "train", "--mock-data", "--num-layers", "2",
                              "--hidden-size", "64", "--num-attention-heads", "2",
                              "--seq-length", "32", "--train-iters", "2", "--sample-interval", "1",
                              "--sample-prompt", "x", "--save", os.path.join(tmp, "never")],
                             capture_output=True, text=True, timeout=60)
    check(refused.returncode == 2 and "--sample-interval needs a tokenizer" in refused.stderr
          + refused.stdout and not os.path.exists(os.path.join(tmp, "never")),
          f"a sample without a tokenizer is refused, exit 2, nothing written "
          f"(rc {refused.returncode})")
    no_prompt = subprocess.run([TRIDENT, "train"] + MODEL + ["--train-iters", "2",
                                                             "--sample-interval", "1"],
                               capture_output=True, text=True, timeout=60)
    check(no_prompt.returncode == 2 and "--sample-interval needs --sample-prompt" in
          no_prompt.stderr + no_prompt.stdout, "a sample without a prompt is refused, exit 2")

    no_interval = subprocess.run([TRIDENT, "train"] + MODEL + ["--train-iters", "2",
                                                               "--sample-prompt", PROMPT],
                                 capture_output=True, text=True, timeout=60)
    check(no_interval.returncode == 2 and "--sample-prompt needs --sample-interval" in
          no_interval.stderr + no_interval.stdout,
          "a prompt without --sample-interval is refused, exit 2 (it would print nothing)")

sys.exit(check.summary())
