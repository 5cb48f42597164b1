#!/usr/bin/python3
"""MoE layers in fp16 (issue 32): the experts' and shared experts' products take their operands
rounded through fp16 (the weights' fp16 copies, the rows, the output gradients) and multiply
in fp32, as the dense fp16 path; fp32 master weights, the router fp32, Megatron's dynamic loss
scaler, whose overflow verdict reads the expert gradients too (their norm, summed over the
expert-data and expert groups, so every rank reaches the same verdict). On the 4-layer model of
moe_bf16_test.py (3 MoE layers of top-2 of 4 experts, gated shared experts, aux and z losses),
--mock-data:
  * one process in fp16 at loss scale 4096 (no overflow) tracks the fp32 loss curve over 30
    steps and differs from it as fp16 must (mixed_precision_test.py's fp16 tolerance:
    1e-6 < worst relative loss difference < 5e-3);
  * fp16 at EP 2 (d 2) tracks fp16 in one process: within 1e-5 over the first 5 steps and the
    low-precision parity tolerance 1e-3 over all 30 (the layouts differ only by fp32 summation
    order, which now and then flips a rounding);
  * from a loss scale of 2^24 (hysteresis 1) the first steps overflow in fp16 (inf in the
    rounded operands) and are skipped; at EP 2 every rank skips them: the per-iteration loss
    scale and skipped count equal one process's, and the steps taken track it within 1e-3.
Usage: moe_fp16_test.py TRIDENT"""
import json
import os
import subprocess
import sys
import tempfile

from moe_bf16_test import MODEL
from parity import MPI_ENV, Checks

EP = ["--expert-model-parallel-size", "2"]
check = Checks()


def rows_of(trident, tmp, tag, args, ranks=1, iterations=30):
    metrics = os.path.join(tmp, tag + ".jsonl")
    model = list(MODEL)
    model[model.index("--train-iters") + 1] = str(iterations)
    cmd = [trident, "train"] + model + args + ["--metrics-file", metrics, "--threads", "1"]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    if out.returncode != 0:
        check(False, f"{tag} runs: {out.stdout[-1500:]}{out.stderr[-1500:]}")
        return None
    return [r for r in map(json.loads, open(metrics)) if "iteration" in r and "lr" in r]


def losses(rows):
    return [r["loss"] for r in rows]


def relative(rows, ref):
    return [abs(a - b) / abs(b) for a, b in zip(rows, ref)]


def check_overflow(trident, tmp):
    """12 steps from the loss scale 2^24 (hysteresis 1), in one process and at EP 2."""
    args = ["--fp16", "--initial-loss-scale", str(2 ** 24), "--hysteresis", "1"]
    one = rows_of(trident, tmp, "scale24", args, iterations=12)
    ep2 = rows_of(trident, tmp, "scale24_ep2", args + EP, 2, iterations=12)
    if one is None or ep2 is None:
        return
    state = lambda rows: [(r["iteration"], r["loss_scale"], r["skipped_iterations"]) for r in rows]
    skipped = one[-1]["skipped_iterations"]
    check(0 < skipped < 12 and state(ep2) == state(one),
          f"from 2^24 the first {skipped} fp16 steps overflow and are skipped on every rank at "
          f"EP 2 (loss scale and skipped count per iteration as one process: {state(ep2)[-1]})")
    taken = [(a["loss"], b["loss"]) for a, b in zip(ep2, one) if b["loss"] is not None]
    off = max((abs(a - b) / abs(b) for a, b in taken), default=float("inf"))
    check(len(taken) == 12 - skipped and off <= 1e-3,
          f"after the skipped steps EP 2 tracks one process within 1e-3 (worst {off:.1e})")


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = rows_of(trident, tmp, "fp32", [])
        fp16 = rows_of(trident, tmp, "fp16", ["--fp16", "--initial-loss-scale", "4096"])
        if fp32 is None or fp16 is None:
            return check.summary()
        check(len(fp32) == len(fp16) == 30 and fp32[0]["loss"] - fp32[-1]["loss"] > 0.3,
              f"fp32 MoE learns: loss {fp32[0]['loss']:.3f} -> {fp32[-1]['loss']:.3f}")
        check(all(r["skipped_iterations"] == 0 for r in fp16), "fp16 at scale 4096: no overflow")
        worst = max(relative(losses(fp16), losses(fp32)))
        check(1e-6 < worst < 5e-3, f"fp16 MoE tracks fp32 over 30 steps and differs from it as "
                                   f"fp16 must: 1e-6 < {worst:.2e} < 5e-3")
        ep2 = rows_of(trident, tmp, "fp16_ep2", ["--fp16", "--initial-loss-scale", "4096"] + EP, 2)
        if ep2 is not None:
            off = relative(losses(ep2), losses(fp16))
            check(len(off) == 30 and max(off[:5]) <= 1e-5 and max(off) <= 1e-3,
                  f"fp16 EP 2 tracks fp16 in one process: first 5 steps within 1e-5 (worst "
                  f"{max(off[:5]):.1e}), all 30 within 1e-3 (worst {max(off):.1e})")
        check_overflow(trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
