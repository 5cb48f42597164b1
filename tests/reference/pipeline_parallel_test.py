#!/usr/bin/python3
"""Pipeline parallelism under mpirun: 1F1B at p = 2 and 4, interleaved at v = 2, and
(t, p) = (2, 2) train the one-process model (losses, grad norms, final weights within 1e-5);
scatter/gather on and off give identical results while the boundary bytes drop by t;
uniform recomputation in groups changes nothing.
Usage: pipeline_parallel_test.py TRIDENT"""
import json
import os
import sys
import tempfile

from parity import Checks, compare, run_parity, train

ARGS = ["--mock-data", "--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--train-iters", "20", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "9"]
LAYOUTS = [("p=2", ["--pipeline-model-parallel-size", "2"], 2),
           ("p=4", ["--pipeline-model-parallel-size", "4"], 4),
           ("p=2 v=2 (interleaved)", ["--pipeline-model-parallel-size", "2",
                                      "--num-layers-per-virtual-pipeline-stage", "2"], 2),
           ("p=4 v=2 (interleaved)", ["--pipeline-model-parallel-size", "4",
                                      "--num-layers-per-virtual-pipeline-stage", "1"], 4),
           ("t=2 p=2", ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"], 4),
           ("p=3 uneven 2+3+3", ["--pipeline-model-parallel-size", "3",
                                 "--decoder-first-pipeline-num-layers", "2"], 3)]


def pipeline_bytes(rows):
    return [r for r in rows if "pipeline_boundary_bytes" in r][-1]["pipeline_boundary_bytes"]


def main():
    trident = sys.argv[1]
    failed = run_parity(trident, ARGS, LAYOUTS)
    check = Checks()
    check.add_parity(failed, len(LAYOUTS))
    tp_pp = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]
    with tempfile.TemporaryDirectory() as tmp:
        on = train(trident, ARGS + tp_pp, 4, tmp, "sg_on")
        off = train(trident, ARGS + tp_pp + ["--no-scatter-gather"], 4, tmp, "sg_off")
        summary, bad = compare(on, off, 0.0)
        check(not bad, f"scatter/gather on vs off: identical ({summary})")
        b_on, b_off = pipeline_bytes(on[0]), pipeline_bytes(off[0])
        check(b_on > 0 and b_off == 2 * b_on,
              f"boundary bytes sent by rank 0: {b_off} without, {b_on} with scatter/gather (t = 2)")
        # Uniform recomputation in groups of 3 over 4-layer stages (groups of 3 and 1), with
        # dropout: recomputed groups end at the stage output that is sent on, bit for bit.
        p2 = ["--pipeline-model-parallel-size", "2", "--hidden-dropout", "0.1",
              "--attention-dropout", "0.1"]
        uniform = ["--recompute-granularity", "full", "--recompute-method", "uniform",
                   "--recompute-num-layers", "3"]
        summary, bad = compare(train(trident, ARGS + p2, 2, tmp, "keep"),
                               train(trident, ARGS + p2 + uniform, 2, tmp, "uniform3"), 0.0)
        check(not bad, f"p=2 uniform recompute N=3 vs none: identical ({summary})")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
