#!/usr/bin/python3
"""fp16 runs whose steps overflow (issue 40, item 9). fp16's largest finite value is 65504,
so a constant --loss-scale 1e30 makes the scaled loss gradient infinite at every step
(IEEE 754 binary16, not a number this code produced): every iteration is skipped. Then
  * each log line whose interval was all skipped says so in words, naming the loss scale;
  * the run exits 4 (not 0), says no step updated the weights, and writes no final
    checkpoint and no --save-hf export (its weights are the initial ones);
  * under mpirun -np 2 (d = 2) both ranks agree: exit 4, no abort, one report.
And a run with dynamic loss scaling from 2^32, which skips its first steps and then trains,
still exits 0 with its checkpoint (one of 2 iterations, which skips both, exits 4 naming
--initial-loss-scale); its lines say "skipped" exactly where every step of the
interval was skipped (the metrics file's skipped_in_interval equals the interval's length).
Usage: fp16_skipped_test.py TRIDENT"""
import json
import os
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks

TINY = ["--mock-data", "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
        "--seq-length", "16", "--vocab-size", "64", "--eval-iters", "0", "--peak-tflops", "1",
        "--threads", "1", "--micro-batch-size", "2", "--global-batch-size", "4", "--fp16"]
check = Checks()


def train(trident, tmp, tag, args, ranks=1):
    metrics = os.path.join(tmp, tag + ".jsonl")
    cmd = [trident, "train"] + TINY + args + ["--metrics-file", metrics]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--allow-run-as-root", "--oversubscribe"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=120)
    rows = []
    if os.path.exists(metrics):
        rows = [r for r in map(json.loads, open(metrics)) if "ms_per_iter" in r]
    return p, rows


def test_constant_scale_overflows(trident, tmp):
    save, hf = os.path.join(tmp, "ckpt"), os.path.join(tmp, "hf")
    p, rows = train(trident, tmp, "constant", ["--loss-scale", "1e30", "--train-iters", "4",
                                               "--log-interval", "2", "--save", save,
                                               "--save-hf", hf])
    said = "all 2 iterations in this interval were skipped (fp16 gradient overflow at loss scale 1e+30)"
    check(p.stdout.count(said) == 2,
          f"each log line of an all-skipped interval says so: '{said}'\n{p.stdout[-600:]}")
    check([(r["skipped_in_interval"], r["loss"]) for r in rows] == [(2, None), (2, None)],
          "the metrics file: 2 of 2 skipped in each interval, no loss")
    check(p.returncode == 4, f"every iteration skipped: exit 4, not success (exit {p.returncode})")
    check("all 4 iterations of this run were skipped" in p.stdout and "--loss-scale 1e+30" in p.stdout
          and "Leave out --loss-scale for dynamic loss scaling" in p.stdout,
          "the error names the run's iterations, the loss scale and the remedy")
    check("no step updated the weights" in p.stderr, f"stderr says why: {p.stderr.strip()[-300:]}")
    check(not os.path.exists(os.path.join(save, "latest")) and not os.path.exists(hf),
          "no final checkpoint and no HuggingFace export of the untrained weights")

    interval = os.path.join(tmp, "interval_ckpt")
    p, _ = train(trident, tmp, "interval", ["--loss-scale", "1e30", "--train-iters", "3",
                                            "--save", interval, "--save-interval", "2"])
    check(p.returncode == 4 and "the --save-interval checkpoints (the latest: iteration 2) hold "
          "them, untrained; no final checkpoint written" in p.stdout and
          sorted(os.listdir(interval)) == ["iter_0000002", "latest"],
          f"with --save-interval 2 of 3: exit {p.returncode}, the interval's checkpoint named "
          "as untrained, none of iteration 3")

    p, _ = train(trident, tmp, "constant_mpi", ["--loss-scale", "1e30", "--train-iters", "2",
                                                "--log-interval", "1"], ranks=2)
    check(p.returncode == 4 and p.stderr.count("no step updated the weights") == 1 and
          "MPI_ABORT" not in p.stderr,
          f"mpirun -np 2 (d = 2): exit 4, one report, no abort (exit {p.returncode})\n"
          f"{p.stderr[-500:]}")


def test_dynamic_scale_recovers(trident, tmp):
    save = os.path.join(tmp, "dyn_ckpt")
    p, rows = train(trident, tmp, "dynamic", ["--train-iters", "30", "--log-interval", "3",
                                              "--save", save])
    skipped = rows[-1]["skipped_iterations"] if rows else -1
    check(p.returncode == 0 and 0 < skipped < 30 and os.path.exists(os.path.join(save, "latest")),
          f"dynamic loss scaling from 2^32 skips {skipped} steps, then trains: exit {p.returncode}, "
          "checkpoint saved")
    lines = [l for l in p.stdout.splitlines() if l.startswith(" iteration ")]
    first = next((r for r in rows if r["skipped_in_interval"] == 3), None)
    check(first is not None and first["loss"] is None,
          "at least one interval of 3 was all skipped (no loss in it)")
    consistent = len(lines) == len(rows) == 10 and all(
        ("iterations in this interval were skipped" in l) == (r["skipped_in_interval"] == 3)
        for l, r in zip(lines, rows))
    check(consistent, "a line says its interval was skipped exactly when all 3 of its steps were")
    check("were skipped: the fp16" not in p.stdout, "no error at the end of a run that trained")


def test_dynamic_scale_all_skipped(trident, tmp):
    # From 2^32 the first steps overflow (Megatron's default start, hysteresis 2): a run of
    # two iterations skips both.
    p, rows = train(trident, tmp, "dynamic_short", ["--train-iters", "2", "--log-interval", "1"])
    check(p.returncode == 4 and "(dynamic, from --initial-loss-scale 4.29497e+09)" in p.stdout
          and "A smaller --initial-loss-scale" in p.stdout and
          [r["skipped_in_interval"] for r in rows] == [1, 1],
          f"dynamic scaling that skipped all 2 iterations: exit {p.returncode}, the dynamic remedy "
          "named")


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        test_constant_scale_overflows(trident, tmp)
        test_dynamic_scale_recovers(trident, tmp)
        test_dynamic_scale_all_skipped(trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
