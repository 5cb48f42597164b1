#!/usr/bin/env python3
"""Where a training step's time goes: the matrix products against the rest.

Runs `bench_train NAME STEPS B MODE` with oneDNN's verbose log on (each primitive's own
time), keeps the timed steps (bench_train measures the GEMM peak before each, a run of one
repeated product, which is dropped; the warm-up step before the first is dropped too) and
prints, per product and shape, its time per step, its rate inside the step and that rate as
a fraction of the multiply-add loop's peak bench_train reports; then the products' share of
the step. Products outside oneDNN (attention tiles) count in the rest.

    python3 bench/step_breakdown.py [--model gpt2-small] [--steps 5] [--batch 4] [--mode bf16]
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def products_per_step(lines):
    """The verbose exec lines, grouped into the timed steps."""
    execs = [l.strip().split(",") for l in lines if l.startswith("onednn_verbose,exec")]
    keys = [(f[3], f[5], f[-2]) for f in execs]
    steps, current, i = [], None, 0
    while i < len(execs):
        j = i
        while j + 1 < len(execs) and keys[j + 1] == keys[i]:
            j += 1
        if j > i:  # a GEMM-peak measurement: the next timed step starts after it
            if current is not None:
                steps.append(current)
            current = []
        elif current is not None:
            current.append(execs[i])
        i = j + 1
    if current:
        steps.append(current)
    return steps


def flops(desc):
    m = re.match(r"mb(\d+)ic(\d+)oc(\d+)", desc)
    if m:
        rows, cols_in, cols_out = map(int, m.groups())
        return 2.0 * rows * cols_in * cols_out
    a, b = [list(map(int, d.split("x"))) for d in desc.split(":")[:2]]  # matmul AxB:BxC
    result = 2.0 * b[-1]
    for d in a:
        result *= d
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt2-small")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--mode", default="bf16", choices=["fp32", "bf16", "bf16+recompute"])
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "build", "bench", "bench_train"))
    args = ap.parse_args()
    env = dict(os.environ, DNNL_VERBOSE="1")
    out = subprocess.run([args.bench, args.model, str(args.steps), str(args.batch), args.mode],
                         env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    summary = [l for l in out if l.startswith(args.model)][-1]
    step_ms = float(re.search(r"ms/step mean (\d+)", summary).group(1))
    peak = float(re.search(r"(?:fp32|bf16) peak ([0-9.]+)", summary).group(1)) * 1e3  # GFLOP/s
    steps = products_per_step(out)
    if len(steps) != args.steps:
        sys.exit(f"found {len(steps)} timed steps in the verbose log, expected {args.steps}")
    by_kind = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for step in steps:
        for f in step:
            kind = by_kind[(f[3], f[5], f[-2])]
            kind[0] += 1
            kind[1] += float(f[-1])
            kind[2] += flops(f[-2])
    print(summary)
    print(f"{'ms/step':>8} {'calls':>5} {'GFLOP/s':>8} {'of peak':>7}  product")
    total_ms = total_flops = 0.0
    for (prim, prop, desc), (calls, ms, fl) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        rate = fl / ms / 1e6
        print(f"{ms / len(steps):8.1f} {calls // len(steps):5d} {rate:8.0f} {rate / peak:7.2f}  "
              f"{prim} {prop} {desc}")
        total_ms += ms
        total_flops += fl
    gemm_ms = total_ms / len(steps)
    rate = total_flops / total_ms / 1e6
    print(f"products: {gemm_ms:.0f} ms of the mean step's {step_ms:.0f} ({gemm_ms / step_ms:.2f}), "
          f"{rate:.0f} GFLOP/s ({rate / peak:.2f} of the loop's {peak:.0f}); "
          f"the rest {step_ms - gemm_ms:.0f} ms")


if __name__ == "__main__":
    main()
