#!/usr/bin/python3
"""The Llama options (RMSNorm, RoPE, SwiGLU, grouped-query attention, untied output layer,
no biases) under tensor, pipeline, data and sequence parallelism: every layout trains the
same model as one process (losses, grad norms and final weights within 1e-5), with the
query groups split over t (G = 2, t = 2) and replicated (G = 1, t = 2), and on the ZB-H1
schedule (its deferred weight gradients sized for these layers). Then the
argument checks of the new flags.
Usage: llama_parallel_test.py /path/to/trident
"""
import subprocess
import sys

from parity import Checks, run_parity

LLAMA = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--ffn-hidden-size", "96", "--seq-length", "32", "--vocab-size", "301",
         "--micro-batch-size", "4", "--global-batch-size", "8", "--lr", "1e-3",
         "--lr-warmup-iters", "2", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "5",
         "--train-iters", "4", "--log-interval", "1",
         "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--swiglu",
         "--group-query-attention", "--untie-embeddings-and-output-weights",
         "--disable-bias-linear"]
T2 = ["--tensor-model-parallel-size", "2"]


def main():
    trident = sys.argv[1]
    check = Checks()
    layouts = [("G=2, t=2", T2, 2),
               ("G=2, t=2 sequence parallel", T2 + ["--sequence-parallel"], 2),
               ("G=2, p=2", ["--pipeline-model-parallel-size", "2"], 2),
               ("G=2, p=2 zb-h1", ["--pipeline-model-parallel-size", "2", "--pipeline-schedule",
                                   "zb-h1"], 2),
               ("G=2, d=2 distributed optimizer, full recompute",
                ["--use-distributed-optimizer", "--recompute-granularity", "full",
                 "--recompute-method", "uniform", "--recompute-num-layers", "1"], 2)]
    check.add_parity(run_parity(trident, LLAMA + ["--num-query-groups", "2"], layouts), len(layouts))
    layouts = [("G=1 (replicated keys and values), t=2", T2, 2),
               ("G=1, t=2 sequence parallel, selective recompute",
                T2 + ["--sequence-parallel", "--recompute-granularity", "selective"], 2)]
    check.add_parity(run_parity(trident, LLAMA + ["--num-query-groups", "1"],
                                layouts), len(layouts))
    # With biases linear_q and linear_kv are two products, each deferred to its own W.
    biased = [a for a in LLAMA if a != "--disable-bias-linear"] + ["--num-query-groups", "2"]
    layouts = [("G=2 with biases, t=2 p=2 zb-h1",
                T2 + ["--pipeline-model-parallel-size", "2", "--pipeline-schedule", "zb-h1"], 4)]
    check.add_parity(run_parity(trident, biased, layouts), len(layouts))

    bad = subprocess.run([trident, "train", "--mock-data", "--num-attention-heads", "4",
                          "--group-query-attention", "--num-query-groups", "3",
                          "--normalization", "BatchNorm", "--position-embedding-type", "rope",
                          "--rotary-percent", "1.5", "--train-iters", "1"],
                         capture_output=True, text=True)
    for rule in ("--num-attention-heads (4) must be divisible by --num-query-groups (3)",
                 "--normalization must be LayerNorm or RMSNorm", "--rotary-percent must be in (0, 1]"):
        check(bad.returncode == 2 and rule in bad.stderr, f"refused: {rule}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
