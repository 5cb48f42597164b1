#!/usr/bin/python3
"""Pipeline splits under mpirun train the one-process model (losses, grad norms, final weights
within 1e-5): the balanced default (an output layer of 2.5 layers' FLOPs: 5 + 3 at p = 2),
--pipeline-split even (4 + 4), Megatron's --account-for-loss-in-pipeline-split (3 + 3 + 2 at
p = 3) and both --account-for flags with interleaved stages (1 + 2 + 2 + 1 at p = 2, v = 2);
the printed split is the one expected. A checkpoint saved under the balanced split at
iteration 10 loads under p = 1 and under the even split, and steps 11-20 follow the
uninterrupted run.
Usage: pipeline_split_test.py TRIDENT"""
import os
import shutil
import sys
import tempfile

from parity import Checks, compare, train

# h = 64, s = 32: a layer 24 h^2 + 4 s h = 106496 FLOPs per token forward; the output layer
# 2 h V = 262144 at V = 2048 (2.46 layers). p = 2: 5 | 3 + 2.46 (5.46 at most) beats 4 | 4 +
# 2.46 (6.46) and 6 | 2 + 2.46 (6).
ARGS = ["--mock-data", "--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "2048", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--train-iters", "20", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "0", "--peak-tflops", "1", "--seed", "5"]
P2 = ["--pipeline-model-parallel-size", "2"]
LAYOUTS = [("p=2 balanced (default)", P2, 2, "5 3"),
           ("p=2 --pipeline-split even", P2 + ["--pipeline-split", "even"], 2, "4 4"),
           ("p=3 --account-for-loss-in-pipeline-split", ["--pipeline-model-parallel-size", "3",
            "--account-for-loss-in-pipeline-split"], 3, "3 3 2")]
# 6 layers + embedding + loss = 8 over p = 2 x v = 2 (N = 2): the first and last virtual
# stages build one layer fewer.
ARGS6 = ARGS[:2] + ["6"] + ARGS[3:]
LAYOUTS6 = [("p=2 v=2 --account-for-embedding/loss-in-pipeline-split",
             P2 + ["--num-layers-per-virtual-pipeline-stage", "2",
                   "--account-for-embedding-in-pipeline-split",
                   "--account-for-loss-in-pipeline-split"], 2, "1 2 2 1")]


def printed_split(log):
    lines = [l for l in log.splitlines() if l.startswith("pipeline split:")]
    return lines[0].split("stage ", 1)[1].split(" (")[0] if lines else None


def parity(trident, args, layouts, check, tmp):
    reference = train(trident, args, 1, tmp, "reference" + args[3])
    for name, flags, ranks, split in layouts:
        logs = []
        try:
            summary, bad = compare(reference, train(trident, args + flags, ranks, tmp, name, logs=logs), 1e-5)
        except RuntimeError as e:
            summary, bad = "run failed", [str(e)[-1500:]]
        check(not bad, f"{name} vs one process: {summary} {' '.join(bad)}")
        got = printed_split(logs[0]) if logs else None
        check(got == split, f"{name}: printed split {got}, expected {split}")
    return reference


def checkpoint_across_splits(trident, reference, check, tmp):
    save = os.path.join(tmp, "balanced_ckpt")
    train(trident, ARGS + P2 + ["--save", save, "--save-interval", "10"], 2, tmp, "save")
    with open(os.path.join(save, "latest"), "w") as f:  # resume from iteration 10
        f.write("iter_0000010\n")
    later = ([r for r in reference[0] if r.get("iteration", 0) >= 11], reference[1])
    for name, flags, ranks in (("p=1", [], 1), ("p=2 even", P2 + ["--pipeline-split", "even"], 2)):
        copy = os.path.join(tmp, "load_" + str(ranks))
        shutil.copytree(save, copy)
        try:
            summary, bad = compare(later, train(trident, ARGS + flags + ["--load", copy], ranks, tmp, "load" + name), 1e-5)
        except RuntimeError as e:
            summary, bad = "run failed", [str(e)[-1500:]]
        check(not bad and summary.startswith("10 steps"),
              f"saved under the balanced split at 10, loaded under {name}: steps 11-20 vs uninterrupted: {summary} {' '.join(bad)}")


def main():
    trident = sys.argv[1]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        reference = parity(trident, ARGS, LAYOUTS, check, tmp)
        parity(trident, ARGS6, LAYOUTS6, check, tmp)
        checkpoint_across_splits(trident, reference, check, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
