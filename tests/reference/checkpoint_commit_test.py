#!/usr/bin/python3
"""Crash safety of the commit when a save writes an iteration that already exists (a run
resumed at its last iteration saves it again): killed before the commit, and killed in the
middle of it (after the committed directory is moved aside, before the new one is in place),
the checkpoint directory must still load and resume to exactly the steps of a run that was
never interrupted; the next save leaves nothing behind but committed checkpoints.
Usage: checkpoint_commit_test.py TRIDENT"""
import json
import os
import subprocess
import sys
import tempfile

from parity import Checks

ARGS = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "4", "--lr", "1e-3", "--lr-warmup-iters", "1", "--lr-decay-iters", "6",
        "--log-interval", "1", "--eval-iters", "0", "--peak-tflops", "1", "--seed", "5",
        "--threads", "1"]
check = Checks()


def train(trident, tmp, tag, extra):
    metrics = os.path.join(tmp, tag + ".jsonl")
    out = subprocess.run([trident, "train"] + ARGS + extra + ["--metrics-file", metrics],
                         capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in open(metrics)] if os.path.exists(metrics) else []
    return out, {r["iteration"]: (r["loss"], r["grad_norm"]) for r in rows if "loss" in r}


def latest(ckpt):
    with open(os.path.join(ckpt, "latest")) as f:
        return f.read().strip()


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        ref_out, reference = train(trident, tmp, "reference", ["--train-iters", "6"])
        check(ref_out.returncode == 0 and sorted(reference) == list(range(1, 7)),
              "the uninterrupted 6-iteration run")
        for point in ("before-commit", "mid-commit"):
            ckpt = os.path.join(tmp, point)
            first, _ = train(trident, tmp, point + "_first",
                             ["--train-iters", "4", "--save", ckpt, "--save-interval", "2"])
            check(first.returncode == 0 and latest(ckpt) == "iter_0000004",
                  f"{point}: a run saves iterations 2 and 4")
            # Resumed at its last iteration, the run only saves iteration 4 again: dies there.
            again, rows = train(trident, tmp, point + "_again",
                                ["--train-iters", "4", "--load", ckpt, "--save", ckpt,
                                 "--inject-fault-save", "1", "--inject-fault-save-point", point])
            check(again.returncode == 9 and not rows,
                  f"{point}: the resumed run trains nothing and dies inside its save of "
                  f"iteration 4 (exit {again.returncode})")
            check(latest(ckpt) == "iter_0000004",
                  f"{point}: latest still names iter_0000004; directory holds {sorted(os.listdir(ckpt))}")
            resumed, rows = train(trident, tmp, point + "_resumed",
                                  ["--train-iters", "6", "--load", ckpt, "--save", ckpt])
            check(resumed.returncode == 0 and "(iteration 4," in resumed.stdout and
                  rows == {i: reference[i] for i in (5, 6)},
                  f"{point}: the next run loads iteration 4 and repeats the uninterrupted steps 5-6 "
                  f"bit for bit (exit {resumed.returncode}{': ' + resumed.stderr.strip()[-300:] if resumed.returncode else ''})")
            check(sorted(os.listdir(ckpt)) == ["iter_0000002", "iter_0000004", "iter_0000006", "latest"]
                  and latest(ckpt) == "iter_0000006",
                  f"{point}: after its save only committed checkpoints remain: {sorted(os.listdir(ckpt))}")
        # A save of an existing iteration that is not interrupted replaces it cleanly.
        ckpt = os.path.join(tmp, "before-commit")
        again, _ = train(trident, tmp, "resave", ["--train-iters", "6", "--load", ckpt, "--save", ckpt])
        check(again.returncode == 0 and latest(ckpt) == "iter_0000006" and
              sorted(os.listdir(ckpt)) == ["iter_0000002", "iter_0000004", "iter_0000006", "latest"],
              f"saving iteration 6 again replaces it and leaves no copy: {sorted(os.listdir(ckpt))}")
        _, rows = train(trident, tmp, "after_resave", ["--train-iters", "6", "--load", ckpt,
                                                       "--save-hf", os.path.join(tmp, "hf")])
        check(os.path.exists(os.path.join(tmp, "hf", "model.safetensors")) and not rows,
              "and it loads (nothing left to train at iteration 6)")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
