#!/usr/bin/python3
"""A Llama 3.1-style model with RoPE scaling (--use-rope-scaling) and a sliding window
(--window-size, not a multiple of the 64-key tiles, over 80 positions so whole tiles are
skipped) trains the same model under t = 2, p = 2, d = 2 (8 ranks), sequence parallelism,
full recompute and ZB-H1 as in one process (losses, grad norms and final weights within
1e-5); then the new flags' argument checks and --help.
Usage: llama3_mistral_parallel_test.py /path/to/trident
"""
import json
import os
import subprocess
import sys
import tempfile

from parity import Checks, run_parity

MODEL = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--ffn-hidden-size", "96", "--seq-length", "80", "--vocab-size", "301",
         "--micro-batch-size", "2", "--global-batch-size", "8", "--lr", "1e-3",
         "--lr-warmup-iters", "2", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "5",
         "--train-iters", "3", "--log-interval", "1",
         "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--swiglu",
         "--group-query-attention", "--num-query-groups", "2",
         "--untie-embeddings-and-output-weights", "--disable-bias-linear",
         "--rotary-base", "500000", "--use-rope-scaling", "--rope-scaling-factor", "8",
         "--window-size", "(21,0)"]
T2 = ["--tensor-model-parallel-size", "2"]
P2 = ["--pipeline-model-parallel-size", "2"]


def main():
    trident = sys.argv[1]
    check = Checks()
    layouts = [("window + rope scaling, t=2 p=2 d=2", T2 + P2, 8),
               ("window + rope scaling, t=2 sequence parallel, full recompute",
                T2 + ["--sequence-parallel", "--recompute-granularity", "full",
                      "--recompute-method", "uniform", "--recompute-num-layers", "1"], 2),
               ("window + rope scaling, p=2 zb-h1", P2 + ["--pipeline-schedule", "zb-h1"], 2)]
    check.add_parity(run_parity(trident, MODEL, layouts), len(layouts))

    with tempfile.TemporaryDirectory() as tmp:  # the exported config.json says what was trained
        model = os.path.join(tmp, "hf")
        out = subprocess.run([trident, "train"] + MODEL + ["--train-iters", "1", "--lr-warmup-iters",
                                                           "0", "--save-hf", model], capture_output=True, text=True)
        cfg = json.load(open(os.path.join(model, "config.json"))) if out.returncode == 0 else {}
        check(cfg.get("sliding_window") == 21 and cfg.get("model_type") == "mistral" and
              cfg.get("rope_scaling", {}).get("rope_type") == "llama3" and
              cfg["rope_scaling"].get("factor") == 8 and
              cfg["rope_scaling"].get("original_max_position_embeddings") == 8192,
              f"--save-hf writes MistralForCausalLM with sliding_window and rope_scaling "
              f"{out.stderr[-300:]}")

    bad = subprocess.run([trident, "train", "--mock-data", "--window-size", "(8,4)",
                          "--train-iters", "1"], capture_output=True, text=True)
    check(bad.returncode == 2 and "right window must be 0" in bad.stderr,
          f"--window-size (8,4) refused: {bad.stderr.strip()[:200]}")
    bad = subprocess.run([trident, "train", "--mock-data", "--use-rope-scaling",
                          "--rope-scaling-factor", "-1", "--train-iters", "1"],
                         capture_output=True, text=True)
    for rule in ("--use-rope-scaling needs --position-embedding-type rope",
                 "--rope-scaling-factor must be > 0"):
        check(bad.returncode == 2 and rule in bad.stderr, f"refused: {rule}")
    alone = subprocess.run([trident, "train", "--mock-data", "--position-embedding-type", "rope",
                            "--rope-scaling-factor", "8", "--train-iters", "1"],
                           capture_output=True, text=True)
    check(alone.returncode == 2 and "--rope-scaling-factor needs --use-rope-scaling" in alone.stderr,
          f"--rope-scaling-factor alone is refused, not ignored: {alone.stderr.strip()[:200]}")
    helptext = subprocess.run([trident, "train", "--help"], capture_output=True, text=True).stdout
    check("--window-size" in helptext and "(W,0)" in helptext and "--use-rope-scaling" in helptext,
          "--help lists --window-size (W or (W,0)) and --use-rope-scaling")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
