#!/usr/bin/python3
"""Mixed precision and dropout, end to end (one process unless said):
  * bf16 and fp16 training track the fp32 loss curve (tolerances below, and why);
  * fp16 dynamic loss scaling: an injected inf gradient is skipped, the scale halves,
    training goes on; starting at Megatron's 2^32 the scaler backs off by itself;
  * a resumed fp16 run with dropout repeats the uninterrupted one bit for bit (the loss
    scaler's state is in the checkpoint; dropout masks follow the sample index);
  * dropout masks are the same under t = 2 and p = 2 as in one process (parity);
  * bf16 under t = 2 and under the distributed optimizer (d = 2) tracks one process;
  * conflicting flags fail with a message.
Usage: mixed_precision_test.py TRIDENT"""
import json
import math
import os
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks, run_parity

MODEL = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "4",
         "--global-batch-size", "8", "--lr", "3e-3", "--lr-warmup-iters", "5", "--eval-iters", "1",
         "--peak-tflops", "1", "--seed", "7", "--log-interval", "1"]
check = Checks()


def train(trident, args, tmp, tag, ranks=1):
    metrics = os.path.join(tmp, tag + ".jsonl")
    cmd = [trident, "train"] + MODEL + args + ["--metrics-file", metrics]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd + ["--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return [r for r in (json.loads(l) for l in open(metrics)) if "lm loss" not in r and "iteration" in r
            and "ms_per_iter" in r], out.stdout


def worst_relative(rows, ref):
    return max(abs(r["loss"] - f["loss"]) / f["loss"] for r, f in zip(rows, ref)
               if r["loss"] is not None)


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        iters = ["--train-iters", "60"]
        fp32, _ = train(trident, iters, tmp, "fp32")
        bf16, _ = train(trident, iters + ["--bf16"], tmp, "bf16")
        fp16, _ = train(trident, iters + ["--fp16", "--initial-loss-scale", "4096"], tmp, "fp16")
        # bf16 keeps 8 mantissa bits (relative rounding 2^-9 = 0.2% per operand); sums are
        # fp32, so errors average over K, and the loss moves by far less than an operand. 2%
        # per step leaves room for the drift of 60 Adam steps on rounded gradients; fp16
        # (11 bits) is 8x finer: 0.5%.
        drop = fp32[0]["loss"] - fp32[-1]["loss"]
        check(drop > 1.0, f"fp32 learns: loss {fp32[0]['loss']:.3f} -> {fp32[-1]['loss']:.3f}")
        wb, wh = worst_relative(bf16, fp32), worst_relative(fp16, fp32)
        # And the low precision must be on: an fp32 run differs from another fp32 run only by
        # summation order (the parity tests measure ~1e-8 under t, p, d), far below what
        # rounding every operand to 8 (bf16) or 11 (fp16) mantissa bits does to the loss.
        floor = 1e-6
        check(floor < wb < 0.02, f"bf16 tracks fp32 over 60 steps and differs from it as bf16 must: "
                                 f"worst relative loss difference {floor:.0e} < {wb:.2e} < 2e-2")
        check(floor < wh < 0.005, f"fp16 tracks fp32 over 60 steps and differs from it as fp16 must: "
                                  f"worst relative loss difference {floor:.0e} < {wh:.2e} < 5e-3")
        first = abs(bf16[0]["loss"] - fp32[0]["loss"]) / fp32[0]["loss"]
        check(first > 1e-7, f"bf16 changes the very first loss (same weights, rounded operands): "
                            f"relative difference {first:.2e}")
        check(all(r["skipped_iterations"] == 0 for r in fp16), "fp16 at scale 4096: no overflow")

        # An injected inf gradient at iteration 6 (hysteresis 1): skipped, scale halves.
        rows, log = train(trident, ["--train-iters", "12", "--fp16", "--initial-loss-scale", "4096",
                                    "--hysteresis", "1", "--inject-grad-overflow-iteration", "6"],
                          tmp, "overflow")
        by_it = {r["iteration"]: r for r in rows}
        check(by_it[5]["loss_scale"] == 4096 and by_it[6]["loss_scale"] == 2048
              and by_it[6]["skipped_iterations"] == 1 and by_it[12]["skipped_iterations"] == 1,
              "injected overflow at iteration 6: skipped once, loss scale 4096 -> 2048")
        check(by_it[6]["loss"] is None and "number of skipped iterations:   1" in log,
              "the skipped step is reported in the log line and left out of the averages")
        check(by_it[7]["lr"] == by_it[6]["lr"] != by_it[5]["lr"],
              "as Megatron, the learning-rate schedule does not advance on the skipped step")
        ok = all(abs(by_it[i]["loss"] - fp32[i - 1]["loss"]) / fp32[i - 1]["loss"] < 0.01 for i in (5, 7))
        check(ok and by_it[12]["loss"] < by_it[7]["loss"], "training recovers after the skipped step")

        rows, _ = train(trident, ["--train-iters", "30", "--fp16"], tmp, "scale32")
        skipped = rows[-1]["skipped_iterations"]
        check(0 < skipped < 30 and rows[-1]["loss_scale"] < 2 ** 32 and rows[-1]["loss"] < rows[skipped]["loss"],
              f"from 2^32 the scaler backs off by itself ({skipped} skipped, scale {rows[-1]['loss_scale']:.0f})")

        # Resume: fp16 + dropout, 20 iterations straight vs 10 + 10 from a checkpoint.
        common = ["--fp16", "--initial-loss-scale", "65536", "--hysteresis", "1", "--loss-scale-window", "4",
                  "--inject-grad-overflow-iteration", "13", "--hidden-dropout", "0.1",
                  "--attention-dropout", "0.1", "--train-iters", "20", "--lr-decay-iters", "20"]
        straight, _ = train(trident, common, tmp, "straight")
        ckpt = os.path.join(tmp, "ckpt")
        train(trident, common + ["--save", ckpt, "--train-iters", "10"], tmp, "first")
        resumed, _ = train(trident, common + ["--load", ckpt], tmp, "resumed")
        same = [(a["loss"], a["grad_norm"], a["loss_scale"], a["skipped_iterations"]) ==
                (b["loss"], b["grad_norm"], b["loss_scale"], b["skipped_iterations"])
                for a, b in zip(resumed, straight[10:])]
        check(len(same) == 10 and all(same),
              "fp16 + dropout resumed at 10 repeats iterations 11-20 bit for bit (loss, norm, scale)")
        manifest = json.load(open(os.path.join(ckpt, "iter_0000010", "manifest.json")))
        check(manifest["loss_scaler"]["scale"] == straight[9]["loss_scale"]
              and manifest["dropout"]["generator"] == "philox4x32-10",
              "the manifest holds the loss scaler and the dropout generator")

        for flags, words in ((["--bf16", "--fp16"], "--bf16 or --fp16"),
                             (["--hidden-dropout", "1"], "--hidden-dropout must be in [0, 1)"),
                             (["--fp16", "--hysteresis", "0"], "--hysteresis must be > 0")):
            out = subprocess.run([trident, "train"] + MODEL + flags, capture_output=True, text=True,
                                 env=MPI_ENV, timeout=60)
            check(out.returncode != 0 and words in out.stdout + out.stderr, f"{' '.join(flags)}: refused")

    base = MODEL + ["--train-iters", "10"]
    dropout = ["--hidden-dropout", "0.1", "--attention-dropout", "0.1"]
    failed = run_parity(trident, base + dropout,
                        [("dropout t=2", ["--tensor-model-parallel-size", "2"], 2),
                         ("dropout p=2", ["--pipeline-model-parallel-size", "2"], 2),
                         ("dropout d=2", ["--global-batch-size", "8"], 2)])
    check.add_parity(failed, 3)
    # bf16: the same rounded operands, but sums split differently across ranks.
    failed = run_parity(trident, base + ["--bf16"],
                        [("bf16 t=2", ["--tensor-model-parallel-size", "2"], 2),
                         ("bf16 d=2 distributed optimizer", ["--use-distributed-optimizer"], 2),
                         # each bucket's bf16 copy re-rounded as its overlapped gather lands
                         ("bf16 d=2 distributed optimizer, overlapped reduce-scatter and gather",
                          ["--use-distributed-optimizer", "--overlap-grad-reduce",
                           "--overlap-param-gather", "--ddp-bucket-size", "20000"], 2)],
                        tolerance=2e-3)
    check.add_parity(failed, 3)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
