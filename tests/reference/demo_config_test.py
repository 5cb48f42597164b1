#!/usr/bin/python3
"""The demo's configuration (configs/kjv-demo.toml, run by scripts/demo.sh) on the data
setup.sh prepares: a few steps of it train the Llama-style block it names with the KJV
tokenizer, print a sample, save a checkpoint that carries the tokenizer; and the held-out
bits per byte that demo.sh prints is lm-evaluation-harness's: minus the summed
log-likelihood of the rolling windows over ln 2 and the UTF-8 bytes of the text, recomputed
here from `eval --log-samples`. Exits 77 (skipped) where setup.sh has not prepared the data.
Usage: demo_config_test.py TRIDENT SOURCE_DIR"""
import json
import math
import os
import subprocess
import sys
import tempfile

from parity import Checks


def main():
    trident, source = sys.argv[1], sys.argv[2]
    heldout = os.path.join(source, "data/kjv/heldout_chapters.txt")
    if not os.path.exists(os.path.join(source, "data/kjv/kjv_bpe4096_text_document.idx")):
        print("skipped: run scripts/setup.sh --no-demo to prepare the demo's data")
        return 77
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "ckpt")
        run = subprocess.run([trident, "train", "--config", "configs/kjv-demo.toml",
                              "--train-iters", "4", "--lr-warmup-iters", "1", "--sample-interval", "4",
                              "--eval-iters", "0",
                              "--save", ckpt, "--save-interval", "4", "--threads", "1"],
                             cwd=source, capture_output=True, text=True, timeout=300)
        check(run.returncode == 0, f"the demo's config trains (exit {run.returncode})\n"
                                   f"{run.stderr[-2000:]}")
        out = run.stdout
        check("model: 4 layers, hidden 256, 4 heads, ffn 640, seq 256, vocab 4096" in out,
              "its shape, with the 4096-piece tokenizer's vocabulary")
        check("RMSNorm" in out and "rope" in out and "SwiGLU" in out and "no biases" in out,
              "the Llama-style block")
        check("sample at iteration 4: And God said unto Moses," in out, "a sample is printed")
        log = os.path.join(tmp, "samples.jsonl")
        result = os.path.join(tmp, "result.json")
        ev = subprocess.run([trident, "eval", "--load", ckpt, "--tasks", f"text:{heldout}",
                             "--log-samples", log, "--output", result, "--threads", "1"],
                            capture_output=True, text=True, timeout=300)
        check(ev.returncode == 0, f"eval from the checkpoint's own tokenizer (exit "
                                  f"{ev.returncode}) {ev.stderr[-1000:]}")
        if ev.returncode != 0:
            return check.summary()
        reported = next(iter(json.load(open(result))["results"].values()))["bits_per_byte,none"]
        with open(log) as f:
            windows = [json.loads(line) for line in f]
        with open(heldout, "rb") as f:
            text_bytes = len(f.read())
        expected = -sum(w["logprob"] for w in windows) / math.log(2) / text_bytes
        check(abs(reported - expected) <= 1e-9 * expected,
              f"bits per byte {reported:.6f} = -sum(log p) / ln 2 / {text_bytes} bytes "
              f"= {expected:.6f} over {len(windows)} windows")
        check(2.0 < reported < 4.0, f"after 4 steps it is within 2-4 bits per byte (a uniform "
                                    f"model: {math.log2(4096) / 4.04:.2f} at ~4.04 bytes/piece)")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
