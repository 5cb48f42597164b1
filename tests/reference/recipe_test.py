#!/usr/bin/python3
"""MT-NLG's recipe flags against an independent implementation of Megatron's formulas
written here: batch-size ramp-up (RampupBatchsizeNumMicroBatches, update_train_iters) and
the learning-rate schedule counted in samples (OptimizerParamScheduler) — the global batch,
consumed samples and learning rate of every iteration. Then a ramped run under p = 2, d = 2
(distributed optimizer) and (t, p, d) = (2, 2, 2) interleaved against one process; a ramped
run killed mid-ramp resumes bit for bit, and resumes under another layout; mixed
iteration/sample flags are refused with exit 2.
Usage: recipe_test.py TRIDENT"""
import json
import math
import os
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks, compare, read_safetensors, run_parity, train

MODEL = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", "32", "--vocab-size", "301", "--log-interval", "1", "--eval-iters", "0",
         "--peak-tflops", "1", "--seed", "5", "--threads", "1"]


# ---- Megatron's formulas, written from its documented semantics -------------------------
def rampup_batch(start, increment, ramp_samples, global_batch):
    per_increment = ramp_samples / ((global_batch - start) // increment)

    def at(consumed):
        if consumed > ramp_samples:
            return global_batch
        return start + int(consumed / per_increment) * increment
    return at


def train_iters_for(samples, batch_at, ramp_samples, global_batch):
    iterations = consumed = 0
    while consumed <= ramp_samples:
        consumed += batch_at(consumed)
        iterations += 1
    return iterations + (samples - consumed) // global_batch


def megatron_lr(steps, max_lr, min_lr, warmup, decay, style):
    if warmup > 0 and steps <= warmup:
        return max_lr * steps / warmup
    if style == "constant":
        return max_lr
    if steps > decay:
        return min_lr
    ratio = (steps - warmup) / (decay - warmup)
    coeff = 1.0 - ratio if style == "linear" else 0.5 * (math.cos(math.pi * ratio) + 1.0)
    return min_lr + coeff * (max_lr - min_lr)


def expected_rows(iterations, batch_at, lr_of):
    rows, consumed = [], 0
    for it in range(1, iterations + 1):
        gbs = batch_at(consumed)
        rows.append({"iteration": it, "global_batch_size": gbs, "lr": lr_of(consumed),
                     "consumed_samples": consumed + gbs})
        consumed += gbs
    return rows


def run(trident, args, tmp, tag, ranks=1):
    metrics = os.path.join(tmp, tag + ".jsonl")
    cmd = [trident, "train"] + MODEL + args + ["--metrics-file", metrics]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    rows = [json.loads(l) for l in open(metrics)] if os.path.exists(metrics) else []
    return out, [r for r in rows if "lr" in r]


def same_schedule(rows, expect):
    if len(rows) != len(expect):
        return f"{len(rows)} iterations, expected {len(expect)}"
    for r, e in zip(rows, expect):
        for k in ("iteration", "global_batch_size", "consumed_samples"):
            if r[k] != e[k]:
                return f"iteration {e['iteration']}: {k} {r[k]}, expected {e[k]}"
        if abs(r["lr"] - e["lr"]) > 1e-6 * max(e["lr"], 1e-12) + 1e-12:
            return f"iteration {e['iteration']}: lr {r['lr']}, expected {e['lr']}"
    return ""


def schedules(trident, tmp, check):
    # Ramp-up 2 -> 16 by 2 over 100 samples, sample-based cosine with warm-up in samples.
    start, inc, ramp, gbs, samples = 2, 2, 100, 16, 300
    at = rampup_batch(start, inc, ramp, gbs)
    iters = train_iters_for(samples, at, ramp, gbs)
    lr = lambda n: megatron_lr(n, 1e-3, 1e-4, 30, 250, "cosine")
    out, rows = run(trident, ["--micro-batch-size", "2", "--global-batch-size", str(gbs),
                              "--rampup-batch-size", str(start), str(inc), str(ramp),
                              "--train-samples", str(samples), "--lr", "1e-3", "--min-lr", "1e-4",
                              "--lr-warmup-samples", "30", "--lr-decay-samples", "250"], tmp, "ramp")
    bad = same_schedule(rows, expected_rows(iters, at, lr))
    check(out.returncode == 0 and not bad,
          f"ramp-up 2 -> 16 by 2 over 100 samples, 300 samples: {iters} iterations, global batch, "
          f"consumed samples and cosine lr of every one as Megatron's {bad}")
    check(any(f"global batch size:     {b} |" in out.stdout for b in (2, 8, 16)),
          "the log line shows the current global batch size")
    # Sample-based, warm-up as a fraction, linear decay, no ramp-up.
    lr = lambda n: megatron_lr(n, 2e-3, 0.0, 0.25 * 96, 96, "linear")
    out, rows = run(trident, ["--micro-batch-size", "2", "--global-batch-size", "8",
                              "--train-samples", "100", "--lr", "2e-3", "--lr-decay-style", "linear",
                              "--lr-warmup-fraction", "0.25", "--lr-decay-samples", "96"], tmp, "frac")
    bad = same_schedule(rows, expected_rows(12, lambda c: 8, lr))
    check(out.returncode == 0 and not bad,
          f"--train-samples 100 at batch 8: 12 iterations (the partial batch dropped), "
          f"--lr-warmup-fraction 0.25 of --lr-decay-samples 96, linear {bad}")
    # Iteration-based flags become samples at the global batch.
    lr = lambda n: megatron_lr(n, 1e-3, 1e-5, 0.2 * 8 * 4, 8 * 4, "cosine")
    out, rows = run(trident, ["--micro-batch-size", "2", "--global-batch-size", "4",
                              "--train-iters", "10", "--lr", "1e-3", "--min-lr", "1e-5",
                              "--lr-warmup-fraction", "0.2", "--lr-decay-iters", "8"], tmp, "iters")
    bad = same_schedule(rows, expected_rows(10, lambda c: 4, lr))
    check(out.returncode == 0 and not bad,
          f"iteration-based: --lr-warmup-fraction 0.2 of --lr-decay-iters 8, min-lr after it {bad}")


def refusals(trident, tmp, check):
    cases = [(["--train-iters", "5", "--train-samples", "40"], "not both"),
             (["--train-iters", "5", "--rampup-batch-size", "2", "2", "8"], "needs sample-based"),
             (["--train-samples", "40", "--lr-warmup-iters", "2"], "not --lr-warmup-iters"),
             (["--train-iters", "5", "--lr-decay-samples", "20"], "need sample-based"),
             (["--train-samples", "40", "--rampup-batch-size", "3", "2", "8"], "multiple of the increment"),
             (["--train-samples", "40", "--rampup-batch-size", "1", "1", "8"], "multiples of --micro-batch-size"),
             (["--train-samples", "40", "--lr-warmup-fraction", "0.5", "--lr-warmup-samples", "4"],
              "not both")]
    for extra, rule in cases:
        out, _ = run(trident, ["--micro-batch-size", "2", "--global-batch-size", "8"] + extra, tmp, "bad")
        ok = out.returncode == 2 and rule in out.stderr
        check(ok, f"{' '.join(extra)}: exit 2, '{rule}'" +
              ("" if ok else f" (got exit {out.returncode}: {out.stderr[-600:]!r})"))
    out, _ = run(trident, ["--micro-batch-size", "1", "--global-batch-size", "8", "--train-samples", "40",
                           "--num-layers", "4", "--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage",
                           "1", "--rampup-batch-size", "2", "3", "8"], tmp, "bad")
    check(out.returncode == 2 and "at global batch 5 of --rampup-batch-size" in out.stderr,
          "interleaving: a ramp-up size whose micro-batches are not a multiple of p is refused")


RAMP = ["--micro-batch-size", "1", "--global-batch-size", "16", "--rampup-batch-size", "4", "4", "48",
        "--train-samples", "160", "--lr", "1e-3", "--lr-warmup-samples", "16"]


def resume(trident, tmp, check):
    ref_rows, ref_w = train(trident, MODEL + RAMP, 1, tmp, "uninterrupted")
    ckpt = os.path.join(tmp, "ckpt")
    metrics = os.path.join(tmp, "killed.jsonl")
    crash = subprocess.run([trident, "train"] + MODEL + RAMP +
                           ["--save", ckpt, "--save-interval", "4", "--inject-fault-iteration", "7",
                            "--metrics-file", metrics], capture_output=True, text=True, timeout=120)
    first = [json.loads(l) for l in open(metrics)]
    stopped_mid_ramp = crash.returncode != 0 and first and first[-1]["iteration"] == 6 and \
        first[-1]["global_batch_size"] < 16
    rows, w = train(trident, MODEL + RAMP + ["--load", ckpt], 1, tmp, "resumed")
    seen = {r["iteration"]: r for r in first + rows if "loss" in r}
    keys = ("loss", "grad_norm", "lr", "global_batch_size", "consumed_samples")
    same = all(seen.get(r["iteration"], {}).get(k) == r[k] for r in ref_rows if "loss" in r for k in keys)
    same_w = w.keys() == ref_w.keys() and all((w[k] == ref_w[k]).all() for k in w)
    check(stopped_mid_ramp and rows[0]["iteration"] == 5 and same and same_w,
          f"killed at iteration 7 (global batch {first[-1]['global_batch_size'] if first else '?'}), "
          f"resumed from iteration 4: every loss, norm, lr and batch size and the final weights "
          f"bit-identical to the uninterrupted run")
    changed = [a if a != "48" else "64" for a in RAMP]
    out = subprocess.run([trident, "train"] + MODEL + changed + ["--load", ckpt], capture_output=True,
                         text=True, timeout=60)
    check(out.returncode == 2 and "--rampup-batch-size: checkpoint [4,4,48], this run [4,4,64]" in out.stderr,
          "resuming with another ramp-up is refused, naming it")
    other = train(trident, MODEL + RAMP + ["--load", ckpt, "--use-distributed-optimizer",
                                          "--pipeline-model-parallel-size", "2"], 4, tmp, "relayout")
    summary, bad = compare((ref_rows[4:], ref_w), (other[0], other[1]), 1e-5)
    check(not bad and other[0][0]["iteration"] == 5,
          f"the same checkpoint resumed under p=2 d=2 (distributed optimizer): {summary} {bad}")


def main():
    trident = sys.argv[1]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        schedules(trident, tmp, check)
        refusals(trident, tmp, check)
        resume(trident, tmp, check)
    layouts = [("ramp-up p=2 (1F1B, m = 4..16)", ["--pipeline-model-parallel-size", "2"], 2),
               ("ramp-up d=2 distributed optimizer", ["--use-distributed-optimizer"], 2),
               ("ramp-up t=2 p=2 d=2 v=2", ["--tensor-model-parallel-size", "2",
                                           "--pipeline-model-parallel-size", "2",
                                           "--num-layers-per-virtual-pipeline-stage", "1"], 8)]
    check.add_parity(run_parity(trident, MODEL + RAMP, layouts),
                     len(layouts))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
