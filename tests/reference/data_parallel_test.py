#!/usr/bin/python3
"""Data parallelism under mpirun against the one-process run with the same global batch:
d = 2 and 4, with and without the distributed optimizer, with overlapped bucketed
all-reduce / reduce-scatter and parameter all-gather, and the whole stack (t, p, d) =
(2, 2, 2) with v = 2 on 8 ranks: every step's loss and grad norm and the final weights
within 1e-5. Also: buckets start during backward, with and without the distributed
optimizer.
Usage: data_parallel_test.py TRIDENT"""
import subprocess
import sys

from parity import MPI_ENV, Checks, run_parity

ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--train-iters", "20", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "13"]
OVERLAP = ["--overlap-grad-reduce", "--ddp-bucket-size", "20000"]
DIST_OVERLAP = OVERLAP + ["--overlap-param-gather"]
LAYOUTS = [("d=2", OVERLAP, 2),
           ("d=4", OVERLAP, 4),
           ("d=2 distributed optimizer", ["--use-distributed-optimizer"], 2),
           ("d=4 distributed optimizer", ["--use-distributed-optimizer"], 4),
           ("d=2 distributed optimizer, overlapped", ["--use-distributed-optimizer"] + DIST_OVERLAP, 2),
           ("d=4 distributed optimizer, overlapped", ["--use-distributed-optimizer"] + DIST_OVERLAP, 4),
           ("t=2 p=2 d=2 v=2", ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                                "--num-layers-per-virtual-pipeline-stage", "1"] + OVERLAP, 8),
           ("t=2 p=2 d=2 v=2 distributed optimizer",
            ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
             "--num-layers-per-virtual-pipeline-stage", "1", "--use-distributed-optimizer"], 8),
           # the tied embedding's bucket waits for the sum across stages, the others overlap
           ("t=2 p=2 d=2 v=2 distributed optimizer, overlapped",
            ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
             "--num-layers-per-virtual-pipeline-stage", "1", "--use-distributed-optimizer"] + DIST_OVERLAP, 8)]


def main():
    trident = sys.argv[1]
    failed = run_parity(trident, ARGS, LAYOUTS)
    check = Checks()
    check.add_parity(failed, len(LAYOUTS))
    for name, flags in (("all-reduce", OVERLAP), ("distributed optimizer",
                                                  ["--use-distributed-optimizer"] + DIST_OVERLAP)):
        out = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", trident, "train"] + ARGS + flags +
                             ["--threads", "1"], capture_output=True, text=True, env=MPI_ENV, timeout=120)
        line = [l for l in out.stdout.splitlines() if l.startswith("data parallel:")]
        early = int(line[0].split()[2]) if line else 0
        check(out.returncode == 0 and early > 0, f"overlap, {name}: {line[0] if line else 'no report'}")
    out = subprocess.run([trident, "train"] + ARGS + ["--overlap-param-gather"], capture_output=True,
                         text=True, timeout=60)
    check(out.returncode == 2 and "--overlap-param-gather needs --use-distributed-optimizer" in out.stderr,
          "--overlap-param-gather without the distributed optimizer is refused")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
