#!/usr/bin/python3
"""Resuming compares the run settings in the checkpoint's manifest with this run's (Megatron's
checkpoint-args check): a changed seed, global or micro batch size, sequence length, data
path, blend weights, split or LR schedule ends the run with exit 2 and names every
difference at once; --override-checkpoint-config resumes anyway with a warning per
difference; --finetune loads only the weights (iteration, data position, optimizer and loss
scale afresh), which must give the same steps as starting from the same weights exported as
a HuggingFace model; the distributed optimizer (d = 2) loads the checkpoint and checks too.
Usage: checkpoint_run_config_test.py TRIDENT"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from dataset_reference_test import write_dataset
from parity import MPI_ENV, Checks, relative

ARGS = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--max-position-embeddings", "64", "--vocab-size", "301",
        "--micro-batch-size", "2", "--global-batch-size", "8", "--lr", "1e-3", "--min-lr", "1e-4",
        "--lr-warmup-iters", "1", "--lr-decay-iters", "8", "--log-interval", "1", "--eval-iters", "0",
        "--peak-tflops", "1", "--seed", "21", "--threads", "1"]
# Each setting changed on resume: (flag, value, the line naming it). The warm-up and decay
# are compared as the run uses them, in samples: iterations x the global batch 8.
CHANGES = [("--seed", "22", "--seed: checkpoint 21, this run 22"),
           ("--global-batch-size", "16", "--global-batch-size: checkpoint 8, this run 16"),
           ("--micro-batch-size", "4", "--micro-batch-size: checkpoint 2, this run 4"),
           ("--seq-length", "64", "--seq-length: checkpoint 32, this run 64"),
           ("--lr", "0.002", "--lr: checkpoint 0.001, this run 0.002"),
           ("--min-lr", "0", "--min-lr: checkpoint 0.0001, this run 0"),
           ("--lr-decay-style", "linear", "--lr-decay-style: checkpoint cosine, this run linear"),
           ("--lr-warmup-iters", "2", "--lr-warmup-iters/-samples/-fraction (the warm-up in samples): "
                                      "checkpoint 8, this run 16"),
           ("--lr-decay-iters", "10", "--lr-decay-iters/-samples (the decay length in samples; by default "
                                      "the training length): checkpoint 64, this run 80")]
check = Checks()


def train(trident, tmp, tag, extra, ranks=1):
    """Returns the process and its metrics rows by iteration."""
    metrics = os.path.join(tmp, tag + ".jsonl")
    cmd = [trident, "train"] + ARGS + extra + ["--metrics-file", metrics]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    rows = [json.loads(line) for line in open(metrics)] if os.path.exists(metrics) else []
    return out, {r["iteration"]: r for r in rows if "loss" in r}


def steps(rows, keys=("loss", "grad_norm", "lr")):
    return {i: tuple(r[k] for k in keys) for i, r in rows.items()}


def refused(out, rows, lines):
    """Exit 2 before any step, every expected line in the message."""
    missing = [line for line in lines if line not in out.stderr]
    return out.returncode == 2 and not rows and not missing, missing


def make_datasets(tmp):
    rng = np.random.default_rng(3)
    prefixes = []
    for name in ("a", "b"):
        prefix = os.path.join(tmp, name)
        write_dataset(prefix, [[list(rng.integers(0, 301, 100))] for _ in range(40)], 8)
        prefixes.append(prefix)
    return prefixes


def test_mock_changes(trident, tmp, ckpt):
    for flag, value, line in CHANGES:
        out, rows = train(trident, tmp, "change" + flag, ["--mock-data", "--train-iters", "6", "--load", ckpt, flag, value])
        ok, missing = refused(out, rows, [line])
        check(ok, f"{flag} {value}: exit {out.returncode}, named with both values{'' if ok else ': ' + out.stderr[-400:]}")
    extra = ["--seed", "22", "--global-batch-size", "16", "--lr-decay-style", "linear"]
    out, rows = train(trident, tmp, "several", ["--mock-data", "--train-iters", "6", "--load", ckpt] + extra)
    # A global batch of 16 also doubles the warm-up and decay in samples (Megatron's scheduler
    # compares them so too): 5 settings.
    ok, missing = refused(out, rows, ["5 settings", "--seed: checkpoint 21, this run 22",
                                      "--global-batch-size: checkpoint 8, this run 16",
                                      "--lr-decay-style: checkpoint cosine, this run linear"])
    check(ok, f"three flags changed at once: exit {out.returncode}, all named in one message {missing}")


def test_data_changes(trident, tmp):
    a, b = make_datasets(tmp)
    ckpt = os.path.join(tmp, "data_ckpt")
    base = ["--split", "90,10,0", "--train-iters", "6"]
    out, _ = train(trident, tmp, "data_base", ["--data-path", "1", a, "1", b, "--train-iters", "4", "--split", "90,10,0",
                                               "--save", ckpt])
    check(out.returncode == 0, "a run on a blend of two datasets saves a checkpoint")
    cases = [(["--data-path", a], f"--data-path: checkpoint 0.5 {a} 0.5 {b}, this run 1 {a}"),
             (["--data-path", "1", a, "3", b], f"--data-path: checkpoint 0.5 {a} 0.5 {b}, this run 0.25 {a} 0.75 {b}")]
    for extra, line in cases:
        out, rows = train(trident, tmp, "data_" + str(len(extra)), extra + base + ["--load", ckpt])
        ok, _ = refused(out, rows, [line])
        check(ok, f"--data-path {' '.join(extra[1:])}: exit {out.returncode}, '{line}'{'' if ok else ': ' + out.stderr[-400:]}")
    out, rows = train(trident, tmp, "data_split", ["--data-path", "1", a, "1", b, "--split", "80,20,0",
                                                   "--train-iters", "6", "--load", ckpt])
    ok, _ = refused(out, rows, ["--split: checkpoint 90,10,0, this run 80,20,0"])
    check(ok, f"--split 80,20,0: exit {out.returncode}, named with both values")
    out, rows = train(trident, tmp, "data_same", ["--data-path", "2", a, "2", b] + base + ["--load", ckpt])
    check(out.returncode == 0 and sorted(rows) == [5, 6],
          "the same blend given as weights 2 a 2 b resumes (weights are compared normalised)")
    return a


def test_finetune(trident, tmp, ckpt, hf, reference):
    changed = ["--mock-data", "--seed", "99", "--lr", "5e-4", "--global-batch-size", "4", "--train-iters", "3"]
    out, tuned = train(trident, tmp, "finetune", changed + ["--load", ckpt, "--finetune"])
    _, from_hf = train(trident, tmp, "from_hf", changed + ["--load-hf", hf])
    check(out.returncode == 0 and sorted(tuned) == [1, 2, 3] and tuned[1]["consumed_samples"] == 4,
          f"--finetune with other settings starts at iteration 1 with no samples consumed (exit {out.returncode})")
    check(steps(tuned) == steps(from_hf) and len(tuned) == 3,
          "--finetune's steps (loss, grad norm, lr) equal those from the same weights exported as HuggingFace "
          "GPT-2 and loaded with --load-hf: the saved weights, a fresh optimizer and a fresh LR schedule")
    check(tuned[1]["loss"] < reference[1]["loss"],
          f"and they are trained weights: first loss {tuned[1]['loss']:.4f} < {reference[1]['loss']:.4f} of the initialisation")


def test_finetune_loss_scale(trident, tmp):
    fp16 = ["--mock-data", "--fp16", "--initial-loss-scale", "1024", "--loss-scale-window", "2"]
    ckpt, hf = os.path.join(tmp, "fp16_ckpt"), os.path.join(tmp, "fp16_hf")
    out, _ = train(trident, tmp, "fp16_base", fp16 + ["--train-iters", "4", "--save", ckpt, "--save-hf", hf])
    saved = json.load(open(os.path.join(ckpt, "iter_0000004", "manifest.json")))["loss_scaler"]["scale"]
    _, tuned = train(trident, tmp, "fp16_finetune", fp16 + ["--train-iters", "2", "--load", ckpt, "--finetune"])
    _, from_hf = train(trident, tmp, "fp16_from_hf", fp16 + ["--train-iters", "2", "--load-hf", hf])
    keys = ("loss", "grad_norm", "loss_scale")
    check(out.returncode == 0 and saved > 1024 and len(tuned) == 2 and steps(tuned, keys) == steps(from_hf, keys),
          f"fp16 --finetune starts a fresh loss scale (checkpoint's {saved:.0f}; steps equal --load-hf's, "
          f"scale {[r['loss_scale'] for r in tuned.values()]})")


def test_distributed_optimizer(trident, tmp, ckpt, reference):
    dist = ["--mock-data", "--use-distributed-optimizer", "--train-iters", "6", "--load", ckpt]
    out, rows = train(trident, tmp, "dist", dist, ranks=2)
    close = out.returncode == 0 and sorted(rows) == [5, 6] and all(
        relative(rows[i][k], reference[i][k]) < 1e-5 for i in (5, 6) for k in ("loss", "grad_norm"))
    check(close, f"-np 2 with the distributed optimizer (d = 2) resumes at 5 and matches the uninterrupted "
                 f"steps 5-6 (exit {out.returncode}{': ' + out.stderr[-400:] if out.returncode else ''})")
    out, rows = train(trident, tmp, "dist_seed", dist + ["--seed", "22"], ranks=2)
    ok, _ = refused(out, rows, ["--seed: checkpoint 21, this run 22"])
    check(ok, f"and refuses a changed --seed there (exit {out.returncode})")


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, hf = os.path.join(tmp, "ckpt"), os.path.join(tmp, "hf")
        out, reference = train(trident, tmp, "reference", ["--mock-data", "--train-iters", "6"])
        check(out.returncode == 0 and sorted(reference) == list(range(1, 7)), "the uninterrupted 6-iteration run")
        out, _ = train(trident, tmp, "base", ["--mock-data", "--train-iters", "4", "--save", ckpt, "--save-hf", hf])
        check(out.returncode == 0, "a 4-iteration run saves a checkpoint")
        run = json.load(open(os.path.join(ckpt, "iter_0000004", "manifest.json"))).get("run", {})
        check(run.get("seed") == 21 and run.get("global_batch_size") == 8 and run.get("data_path") == "mock",
              f"the manifest records the run settings: {run}")

        out, rows = train(trident, tmp, "same", ["--mock-data", "--train-iters", "6", "--load", ckpt])
        check(out.returncode == 0 and steps(rows) == {i: steps(reference)[i] for i in (5, 6)},
              "unchanged settings (and a longer --train-iters) resume to the uninterrupted steps 5-6 bit for bit")
        test_mock_changes(trident, tmp, ckpt)
        a = test_data_changes(trident, tmp)
        out, rows = train(trident, tmp, "mock_to_data", ["--data-path", a, "--train-iters", "6", "--load", ckpt])
        ok, _ = refused(out, rows, [f"--data-path: checkpoint mock, this run 1 {a}"])
        check(ok, f"--data-path instead of --mock-data: exit {out.returncode}, named")

        override = ["--mock-data", "--seed", "22", "--global-batch-size", "16", "--train-iters", "6", "--load", ckpt,
                    "--override-checkpoint-config"]
        out, rows = train(trident, tmp, "override", override)
        warned = all(w in out.stdout for w in ("warning: --override-checkpoint-config: --seed: checkpoint 21, this run 22",
                                               "--global-batch-size: checkpoint 8, this run 16"))
        check(out.returncode == 0 and warned and sorted(rows) == [5, 6] and rows[5]["consumed_samples"] == 4 * 8 + 16,
              f"--override-checkpoint-config resumes at 5 from 32 consumed samples, warning of each difference "
              f"(exit {out.returncode})")

        old = os.path.join(tmp, "old_ckpt")
        shutil.copytree(ckpt, old)
        manifest = os.path.join(old, "iter_0000004", "manifest.json")
        m = json.load(open(manifest))
        m.pop("run", None)
        json.dump(m, open(manifest, "w"))
        out, rows = train(trident, tmp, "old", ["--mock-data", "--seed", "22", "--train-iters", "6", "--load", old])
        check(out.returncode == 0 and "records no run settings" in out.stdout and sorted(rows) == [5, 6],
              "a manifest without run settings resumes with a note")

        test_finetune(trident, tmp, ckpt, hf, reference)
        test_finetune_loss_scale(trident, tmp)
        test_distributed_optimizer(trident, tmp, ckpt, reference)

        for extra, message in ((["--finetune"], "--finetune needs --load"),
                               (["--override-checkpoint-config"], "--override-checkpoint-config needs --load"),
                               (["--load", ckpt, "--finetune", "--override-checkpoint-config"], "not both"),
                               (["--load", os.path.join(tmp, "none"), "--finetune"],
                                "none: not a checkpoint (no such file or directory)")):
            out, _ = train(trident, tmp, "flags", ["--mock-data", "--train-iters", "6"] + extra)
            check(out.returncode == 2 and message in out.stderr, f"{' '.join(extra[-2:])}: exit 2, '{message}'")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
