#!/usr/bin/python3
"""--lr-decay-style WSD (its four annealing curves) and inverse-square-root against Megatron's
OptimizerParamScheduler.get_lr, written here from its published definition: the learning
rate of every iteration of short runs, counted in iterations (x the global batch) and in
samples under a batch-size ramp-up, compared with the lr trident logs. Then the flags'
refusals (exit 2, naming the flag) and a resume that changes the WSD annealing, refused.
Usage: lr_schedule_test.py TRIDENT"""
import json
import math
import os
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks

MODEL = ["--mock-data", "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
         "--seq-length", "16", "--vocab-size", "128", "--log-interval", "1", "--eval-iters", "0",
         "--peak-tflops", "1", "--seed", "3", "--threads", "1"]


# ---- Megatron's get_lr (megatron/core/optimizer_param_scheduler.py), from its definition --
def megatron_lr(n, max_lr, min_lr, warmup, decay, style, wsd_steps=None, wsd_style=None):
    """The rate after n samples: linear warm-up from 0, then the decay style until `decay`
    samples, min_lr after it."""
    if warmup > 0 and n <= warmup:
        return max_lr * n / warmup
    if style == "constant":
        return max_lr
    if n > decay:
        return min_lr
    if style == "inverse-square-root":
        return max(min_lr, max_lr * math.sqrt(max(warmup, 1)) / math.sqrt(max(n, 1)))
    if style == "WSD":
        anneal_start = decay - wsd_steps
        if n <= anneal_start:
            coeff = 1.0
        else:
            r = (n - anneal_start) / wsd_steps
            coeff = {"linear": 1.0 - r,
                     "cosine": 0.5 * (math.cos(math.pi * r) + 1.0),
                     "exponential": 2.0 * 0.5 ** r - 1.0,
                     "minus_sqrt": 1.0 - math.sqrt(r)}[wsd_style]
    else:
        ratio = (n - warmup) / (decay - warmup)
        coeff = 1.0 - ratio if style == "linear" else 0.5 * (math.cos(math.pi * ratio) + 1.0)
    return min_lr + coeff * (max_lr - min_lr)


def rampup_batch(start, increment, ramp_samples, global_batch):
    """Megatron's RampupBatchsizeNumMicroBatches: the global batch at `consumed` samples."""
    per_increment = ramp_samples / ((global_batch - start) // increment)
    return lambda consumed: (global_batch if consumed > ramp_samples
                             else start + int(consumed / per_increment) * increment)


def expected_lrs(iterations, batch_at, lr_of):
    """The lr of iterations 1..N: each update uses the rate at the samples consumed before it."""
    lrs, consumed = [], 0
    for _ in range(iterations):
        lrs.append(lr_of(consumed))
        consumed += batch_at(consumed)
    return lrs


def run(trident, args, tmp, tag):
    metrics = os.path.join(tmp, tag + ".jsonl")
    out = subprocess.run([trident, "train"] + MODEL + args + ["--metrics-file", metrics],
                         capture_output=True, text=True, env=MPI_ENV, timeout=300)
    rows = [json.loads(l) for l in open(metrics)] if os.path.exists(metrics) else []
    return out, [r for r in rows if "lr" in r]


def differs(rows, expected):
    if len(rows) != len(expected):
        return f"{len(rows)} iterations logged, expected {len(expected)}"
    for r, e in zip(rows, expected):
        if abs(r["lr"] - e) > 1e-6 * e + 1e-12:
            return f"iteration {r['iteration']}: lr {r['lr']}, Megatron's {e}"
    return ""


ITERS = ["--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "24",
         "--lr", "1e-3", "--min-lr", "1e-5", "--lr-warmup-iters", "3", "--lr-decay-iters", "20"]
# Ramp-up 2 -> 8 by 2 over 48 samples; 200 samples; warm-up 12, decay ends at 180 samples.
RAMP = (2, 2, 48, 8, 200)
SAMPLES = ["--micro-batch-size", "2", "--global-batch-size", "8", "--rampup-batch-size", "2",
           "2", "48", "--train-samples", "200", "--lr", "2e-3", "--min-lr", "1e-4",
           "--lr-warmup-samples", "12", "--lr-decay-samples", "180"]


def ramp_iterations():
    """Megatron's update_train_iters: the ramp iteration by iteration, then whole batches."""
    start, inc, ramp, gbs, samples = RAMP
    at = rampup_batch(start, inc, ramp, gbs)
    iterations = consumed = 0
    while consumed <= ramp:
        consumed += at(consumed)
        iterations += 1
    return iterations + (samples - consumed) // gbs, at


def wsd_in_iterations(trident, tmp, check):
    # The last 9 of 20 decay iterations anneal: 36 of 80 samples; min-lr after iteration 20.
    for style in ("linear", "cosine", "exponential", "minus_sqrt"):
        out, rows = run(trident, ITERS + ["--lr-decay-style", "WSD", "--lr-wsd-decay-style", style,
                                          "--lr-wsd-decay-iters", "9"], tmp, "wsd_" + style)
        lr = lambda n: megatron_lr(n, 1e-3, 1e-5, 12, 80, "WSD", 36, style)
        bad = differs(rows, expected_lrs(24, lambda c: 4, lr))
        check(out.returncode == 0 and not bad,
              f"WSD {style}, iterations: warm-up 3, stable to 11, annealing 9 to 20, floor "
              f"after: the lr of all 24 iterations is Megatron's {bad}")
    out, rows = run(trident, ITERS + ["--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "20"],
                    tmp, "wsd_default")
    lr = lambda n: megatron_lr(n, 1e-3, 1e-5, 12, 80, "WSD", 80, "exponential")
    bad = differs(rows, expected_lrs(24, lambda c: 4, lr))
    check(out.returncode == 0 and not bad and "exponential annealing over 80 samples" in out.stdout,
          f"WSD without --lr-wsd-decay-style anneals exponentially (Megatron's default), over "
          f"the whole decay (annealing from inside the warm-up) {bad}")


def wsd_in_samples(trident, tmp, check):
    iterations, at = ramp_iterations()
    for style in ("cosine", "minus_sqrt"):
        out, rows = run(trident, SAMPLES + ["--lr-decay-style", "WSD", "--lr-wsd-decay-style",
                                            style, "--lr-wsd-decay-samples", "70"], tmp,
                        "wsd_samples_" + style)
        lr = lambda n: megatron_lr(n, 2e-3, 1e-4, 12, 180, "WSD", 70, style)
        bad = differs(rows, expected_lrs(iterations, at, lr))
        check(out.returncode == 0 and not bad,
              f"WSD {style}, samples, global batch ramped 2 -> 8 over 48 samples: annealing the "
              f"last 70 of 180 samples; the lr of all {iterations} iterations is Megatron's {bad}")


def inverse_square_root(trident, tmp, check):
    out, rows = run(trident, ITERS + ["--lr-decay-style", "inverse-square-root"], tmp, "isr")
    lr = lambda n: megatron_lr(n, 1e-3, 1e-5, 12, 80, "inverse-square-root")
    bad = differs(rows, expected_lrs(24, lambda c: 4, lr))
    check(out.returncode == 0 and not bad,
          f"inverse-square-root, iterations: max_lr x sqrt(12 / samples) after the warm-up, "
          f"the floor after the decay {bad}")
    iterations, at = ramp_iterations()
    floor = ["--min-lr", "9e-4"]  # sqrt(12/n) x 2e-3 falls below it at n > 59
    out, rows = run(trident, SAMPLES + floor + ["--lr-decay-style", "inverse-square-root"], tmp,
                    "isr_samples")
    lr = lambda n: megatron_lr(n, 2e-3, 9e-4, 12, 180, "inverse-square-root")
    bad = differs(rows, expected_lrs(iterations, at, lr))
    check(out.returncode == 0 and not bad,
          f"inverse-square-root, samples under the ramp-up, held at --min-lr once below it {bad}")
    out, rows = run(trident, ITERS[:-4] + ["--lr-decay-style", "inverse-square-root"], tmp,
                    "isr_cold")
    lr = lambda n: megatron_lr(n, 1e-3, 1e-5, 0, 96, "inverse-square-root")
    bad = differs(rows, expected_lrs(24, lambda c: 4, lr))
    check(out.returncode == 0 and not bad,
          f"inverse-square-root without warm-up: max_lr / sqrt(max(samples, 1)) {bad}")


def refusals(trident, tmp, check):
    base = ["--micro-batch-size", "2", "--global-batch-size", "4"]
    cases = [(["--train-iters", "10", "--lr-decay-style", "WSD"],
              "--lr-decay-style WSD needs the length of its annealing phase"),
             (["--train-iters", "10", "--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "11"],
              "--lr-wsd-decay-iters / --lr-wsd-decay-samples (44 samples) must be <= the decay "
              "length (40 samples"),
             (["--train-samples", "40", "--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "2"],
              "takes --lr-wsd-decay-samples, not --lr-wsd-decay-iters"),
             (["--train-iters", "10", "--lr-decay-style", "WSD", "--lr-wsd-decay-samples", "8"],
              "--lr-wsd-decay-samples needs sample-based training"),
             (["--train-iters", "10", "--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "2",
               "--lr-wsd-decay-style", "step"], "--lr-wsd-decay-style must be linear, cosine, "
              "exponential or minus_sqrt (got 'step')"),
             (["--train-iters", "10", "--lr-wsd-decay-iters", "2"],
              "need --lr-decay-style WSD (got 'cosine')"),
             (["--train-iters", "10", "--lr-decay-style", "wsd"],
              "--lr-decay-style must be constant, linear, cosine, inverse-square-root or WSD")]
    for extra, rule in cases:
        out, rows = run(trident, base + extra, tmp, "bad")
        ok = out.returncode == 2 and rule in out.stderr and not rows
        check(ok, f"{' '.join(extra)}: exit 2, '{rule}'" + ("" if ok else
              f" (got exit {out.returncode}, {len(rows)} rows: {out.stderr[-600:]!r})"))


def resume_with_other_annealing(trident, tmp, check):
    ckpt = os.path.join(tmp, "ckpt")
    wsd = ITERS + ["--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "9"]
    first, _ = run(trident, wsd + ["--save", ckpt, "--train-iters", "6"], tmp, "first")
    resumed, rows = run(trident, wsd + ["--load", ckpt], tmp, "resumed")
    lr = lambda n: megatron_lr(n, 1e-3, 1e-5, 12, 80, "WSD", 36, "exponential")
    bad = differs(rows, expected_lrs(24, lambda c: 4, lr)[6:])
    check(first.returncode == 0 and resumed.returncode == 0 and not bad,
          f"a WSD run resumed at iteration 7 goes on with Megatron's rates {bad}")
    for extra, named in ((["--lr-wsd-decay-style", "linear"], "--lr-wsd-decay-style"),
                         (["--lr-wsd-decay-iters", "8"], "--lr-wsd-decay-iters/-samples")):
        out, _ = run(trident, wsd + extra + ["--load", ckpt], tmp, "changed")
        check(out.returncode == 2 and named in out.stderr,
              f"resuming with {' '.join(extra)} is refused, naming {named}")


def main():
    trident = sys.argv[1]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        wsd_in_iterations(trident, tmp, check)
        wsd_in_samples(trident, tmp, check)
        inverse_square_root(trident, tmp, check)
        refusals(trident, tmp, check)
        resume_with_other_annealing(trident, tmp, check)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
