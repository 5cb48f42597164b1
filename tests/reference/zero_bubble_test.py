#!/usr/bin/python3
"""The zero-bubble pipeline schedule ZB-H1 (--pipeline-schedule zb-h1, Qi et al. 2023) under
mpirun: backward split into B (input gradients) and W (weight gradients, replayed later from
kept operands) trains the one-process model (losses, grad norms, final weights within 1e-5)
at p = 2 and 4, with t = 2 (also with sequence parallelism), with d = 2 (distributed optimizer, overlapped reduction in small
buckets that W of the last micro-batch releases), and with full and selective recomputation;
against 1F1B at p = 2 it is bit-identical in fp32 and bf16 (the same products, accumulated
in the same order), also with d = 2, where buckets start before the step ends; the memory plan lists the kept operands; v > 1 is refused.
Usage: zero_bubble_test.py TRIDENT"""
import re
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks, compare, run_parity, train

ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--train-iters", "8", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "11"]
ZB = ["--pipeline-schedule", "zb-h1"]
P2, P4 = ["--pipeline-model-parallel-size", "2"], ["--pipeline-model-parallel-size", "4"]
DP = ["--use-distributed-optimizer", "--overlap-grad-reduce", "--ddp-bucket-size", "20000"]
LAYOUTS = [("zb-h1 p=2", ZB + P2, 2),
           ("zb-h1 p=4", ZB + P4, 4),
           ("zb-h1 t=2 p=2", ZB + P2 + ["--tensor-model-parallel-size", "2"], 4),
           ("zb-h1 t=2 p=2 sequence parallel, selective recompute",
            ZB + P2 + ["--tensor-model-parallel-size", "2", "--sequence-parallel",
                       "--recompute-granularity", "selective"], 4),
           ("zb-h1 p=2 d=2 distributed optimizer, overlapped reduction", ZB + P2 + DP, 4),
           ("zb-h1 p=2 full recompute", ZB + P2 + ["--recompute-granularity", "full",
                                                   "--recompute-method", "uniform",
                                                   "--recompute-num-layers", "1"], 2),
           ("zb-h1 p=2 selective recompute", ZB + P2 + ["--recompute-granularity", "selective"], 2)]


def main():
    trident = sys.argv[1]
    check = Checks()
    check.add_parity(run_parity(trident, ARGS, LAYOUTS), len(LAYOUTS))
    with tempfile.TemporaryDirectory() as tmp:
        logs = {}
        for name, extra, ranks in (("d=2 fp32", DP, 4), ("bf16", ["--bf16"], 2)):
            logs[name] = []
            one = train(trident, ARGS + P2 + extra, ranks, tmp, "1f1b_" + name)
            zb = train(trident, ARGS + P2 + ZB + extra, ranks, tmp, "zb_" + name, logs=logs[name])
            summary, bad = compare(one, zb, 0.0)
            check(not bad, f"zb-h1 vs 1f1b at p=2, {name}: identical ({summary})")
        early = re.search(r"data parallel: (\d+) of (\d+) gradient buckets started",
                          logs["d=2 fp32"][0])
        check(early and int(early.group(1)) > 0,
              "d=2: buckets start before the step's end, released by W ("
              + (early.group(0) if early else "no data-parallel line") + ")")
        check("zb-h1: weight-gradient operands copied from B to W" in logs["bf16"][0]
              and "(held to W)" in logs["bf16"][0],
              "the memory plan lists the activations held to W and the operands copied")
        out = subprocess.run([trident, "train"] + ARGS + P2 + ZB +
                             ["--num-layers-per-virtual-pipeline-stage", "1"],
                             capture_output=True, text=True, env=MPI_ENV)
        check(out.returncode != 0 and "zb-h1 runs one model chunk per rank" in out.stderr,
              "zb-h1 with virtual stages is refused, naming the rule")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
