#!/usr/bin/python3
"""Sequence parallelism (--sequence-parallel, Korthikanti et al. 2022) over MPI:
  * parity with one process (losses, grad norms, final weights; 1e-5) at t = 2 and 4, with
    p = 2, with d = 2 and the distributed optimizer, with full (uniform and block) and
    selective recomputation, with dropout (blocks of half a sequence at t = 4), and bf16
    at t = 2 (2e-3, as the other bf16 layouts);
  * LayerNorm weights stay identical across the tensor group (their partial gradients are
    all-reduced before the step);
  * pipeline boundary bytes equal scatter/gather's (the local block is the 1/t slice);
  * collectives: one more layer adds 0 all-reduces, 6 all-gathers and 4 reduce-scatters of
    b*s*h/t floats per micro-batch (forward: 2 gathers, 2 reduce-scatters; backward: the
    conjugates plus the 2 LayerNorm outputs gathered again for the weight gradients);
  * the printed memory plan: activations with SP = U + S/t (see plan_check);
  * checkpoints saved under SP resume with it bit for bit, and without it;
  * the config rules: b*s not divisible by t is refused naming the flag; t = 1 warns.
Usage: sequence_parallel_test.py TRIDENT"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from parity import MPI_ENV, Checks, relative, run_parity, train

TINY = ["--mock-data", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
        "--vocab-size", "301", "--micro-batch-size", "4", "--global-batch-size", "8",
        "--lr", "1e-3", "--lr-warmup-iters", "2", "--eval-iters", "1", "--peak-tflops", "1",
        "--seed", "5", "--log-interval", "1"]
SP = ["--sequence-parallel"]
T2, T4 = ["--tensor-model-parallel-size", "2"], ["--tensor-model-parallel-size", "4"]
P2 = ["--pipeline-model-parallel-size", "2"]
check = Checks()


def mpirun(ranks, args):
    return ["mpirun", "--oversubscribe", "-np", str(ranks)] + args + ["--threads", "1"]


def run(trident, ranks, args, tmp=None, tag="run"):
    """trident train on `ranks` ranks; returns (exit code, stdout + stderr, metrics rows)."""
    metrics = os.path.join(tmp, f"{tag}.jsonl") if tmp else None
    cmd = [trident, "train"] + args + (["--metrics-file", metrics] if metrics else [])
    cmd = mpirun(ranks, cmd) if ranks > 1 else cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=120)
    rows = [json.loads(line) for line in open(metrics)] if metrics and os.path.exists(metrics) else []
    return out.returncode, out.stdout + out.stderr, rows


def parity(trident):
    # 4 layers so full recomputation has groups; b = 4: t = 2 splits at a sample boundary.
    base = TINY + ["--num-layers", "4", "--train-iters", "12"]
    layouts = [("sp t=2", T2 + SP, 2),
               ("sp t=4", T4 + SP, 4),
               ("sp t=2 p=2", T2 + P2 + SP, 4),
               ("sp t=2 d=2 distributed optimizer, overlapped",
                T2 + SP + ["--micro-batch-size", "2", "--use-distributed-optimizer",
                           "--overlap-grad-reduce", "--ddp-bucket-size", "20000"], 4),
               ("sp t=2 full recompute (uniform, 2)",
                T2 + SP + ["--recompute-granularity", "full", "--recompute-method", "uniform",
                           "--recompute-num-layers", "2"], 2),
               ("sp t=2 p=2 full recompute (block, 1)",
                T2 + P2 + SP + ["--recompute-granularity", "full", "--recompute-method", "block",
                                "--recompute-num-layers", "1"], 4),
               ("sp t=2 selective recompute", T2 + SP + ["--recompute-granularity", "selective"], 2)]
    check.add_parity(run_parity(trident, base, layouts), len(layouts))
    # Dropout with b = 2: at t = 4 each rank's block is half a sequence, so the masks of
    # local rows must be drawn at their offset in the micro-batch.
    dropout = TINY + ["--num-layers", "2", "--train-iters", "8", "--micro-batch-size", "2",
                      "--hidden-dropout", "0.1", "--attention-dropout", "0.1"]
    layouts = [("sp t=4 dropout (half-sequence blocks)", T4 + SP, 4),
               ("sp t=2 p=2 dropout, full recompute",
                T2 + P2 + SP + ["--recompute-granularity", "full", "--recompute-method", "uniform",
                                "--recompute-num-layers", "1"], 4)]
    check.add_parity(run_parity(trident, dropout, layouts), len(layouts))
    # bf16: LayerNorm outputs are kept and gathered in bf16; sums split differently.
    bf16 = TINY + ["--num-layers", "2", "--train-iters", "8", "--bf16"]
    check.add_parity(run_parity(trident, bf16, [("sp t=2 bf16", T2 + SP, 2)], tolerance=2e-3), 1)


def pipelines_and_collectives(trident, tmp):
    args = TINY + ["--num-layers", "2", "--train-iters", "3", "--micro-batch-size", "2"]
    on = train(trident, args + T2 + P2 + SP, 4, tmp, "pp_sp")
    off = train(trident, args + T2 + P2, 4, tmp, "pp_sg")
    sent = [[r["pipeline_boundary_bytes"] for r in rows if "pipeline_boundary_bytes" in r][-1]
            for rows, _ in (on, off)]
    check(sent[0] == sent[1] > 0,
          f"pipeline boundary bytes with SP {sent[0]} = with scatter/gather {sent[1]}")

    def counts(layers):
        code, log, rows = run(trident, 2, TINY + T2 + SP + ["--num-layers", str(layers),
                                                           "--train-iters", "3"], tmp, f"c{layers}")
        last = [r for r in rows if "collectives" in r][-1]
        return last["collectives"]["tensor"], last["iterations"], log

    one, iters, _ = counts(1)
    two, _, log = counts(2)
    check("replicated parameters across tensor-parallel ranks: max |difference| 0\n" in log,
          "LayerNorm weights, row-parallel biases and position embeddings stay identical")
    micro_batches, b, s, h, t = 2, 4, 32, 64, 2
    per = {k: {f: (two[k][f] - one[k][f]) / (iters * micro_batches) for f in ("calls", "bytes")}
           for k in ("all-reduce", "all-gather", "reduce-scatter")}
    block = b * s * h // t * 4
    # The counters take an all-gather's bytes as the block a rank sends and a
    # reduce-scatter's as the whole buffer it reduces (t blocks).
    ok = (per["all-reduce"]["calls"] == 0 and per["all-gather"]["calls"] == 6
          and per["reduce-scatter"]["calls"] == 4 and per["all-gather"]["bytes"] == 6 * block
          and per["reduce-scatter"]["bytes"] == 4 * t * block)
    check(ok, f"one more layer adds per micro-batch: {per['all-reduce']['calls']:g} all-reduces, "
              f"{per['all-gather']['calls']:g} all-gathers ({per['all-gather']['bytes']:g} B), "
              f"{per['reduce-scatter']['calls']:g} reduce-scatters ({per['reduce-scatter']['bytes']:g} B)"
              f" (expected 0, 6 ({6 * block}), 4 ({4 * t * block}))")


def plan_of(log):
    """Rank 0's printed plan: {group: {buffer name: floats x copies}}."""
    plan, group = {}, None
    for line in log.splitlines():
        g = re.match(r"^  (\w+) \(", line)
        if g:
            group = plan.setdefault(g.group(1), {})
            continue
        m = re.match(r"^    (.+?)\s+(\d+) floats(?: x\s+(\d+))?", line)
        if m and group is not None:
            group[m.group(1)] = int(m.group(2)) * int(m.group(3) or 1)
    return plan


# Buffers inside the tensor-parallel region (already [tokens, * / t] without SP) and the
# per-token losses every rank computes for all tokens: unchanged by sequence parallelism.
UNSPLIT = ("qkv", "attention out", "attention log-sum-exp", "fc1 out (pre-GeLU)", "GeLU out",
           "per-token loss")


def unsplit(name):
    base = name.removeprefix("recompute: ").removesuffix(" (bf16)")
    return base in UNSPLIT


def plan_check(trident, tmp):
    """Activation floats per rank with SP = U + S/t, where U (qkv, attention out and
    log-sum-exp, fc1 and GeLU out, per-token losses) is what the layer keeps inside the
    tensor-parallel region and S (LayerNorm outputs and statistics, residuals, layer
    outputs, embedding output, final LayerNorm and its gradient) the [tokens, h] rest, both
    read off the plan printed without SP. Per layer and micro-batch of b*s tokens that is
    U = b*s*(3h + h + 2f)/t + b*a*s/t and S = b*s*(4h + 4) (Megatron's sbh(10 + 24/t + ...)
    becoming sbh(34 + ...)/t, here in fp32 and with flash attention's log-sum-exp in place
    of the s x s scores)."""
    t = 2
    for name, extra in (("no recompute", []),
                        ("full recompute", ["--recompute-granularity", "full", "--recompute-method",
                                            "uniform", "--recompute-num-layers", "2"]),
                        ("selective, bf16", ["--recompute-granularity", "selective", "--bf16"])):
        args = TINY + T2 + ["--num-layers", "4", "--train-iters", "3"] + extra
        code_off, log_off, _ = run(trident, 2, args)
        code_on, log_on, _ = run(trident, 2, args + SP)
        off, on = plan_of(log_off).get("activations", {}), plan_of(log_on).get("activations", {})
        u = sum(v for k, v in off.items() if unsplit(k))
        s = sum(v for k, v in off.items() if not unsplit(k))
        each = all(on.get(k) == (v if unsplit(k) else v // t) for k, v in off.items())
        total = sum(on.values())
        check(code_off == 0 and code_on == 0 and off and each and total == u + s // t,
              f"plan, {name}: activations with SP {total * 4} B = U + S/t = {u * 4} + "
              f"{s * 4}/{t} (without SP {(u + s) * 4} B; saving {100 * (1 - total / (u + s)):.0f}%)")


def checkpoints(trident, tmp):
    """A checkpoint saved under SP resumes under SP bit for bit, and without SP to within
    rounding (SP changes no parameter layout, only which rows a rank computes)."""
    args = TINY + T2 + ["--num-layers", "2", "--train-iters", "8"]
    full_rows, full_w = train(trident, args + SP + ["--save", f"{tmp}/ck", "--save-interval", "4"],
                              2, tmp, "ck_full")
    resume = os.path.join(tmp, "ck_at_4")
    shutil.copytree(f"{tmp}/ck", resume)
    with open(os.path.join(resume, "latest"), "w") as f:
        f.write("iter_0000004\n")
    later = lambda rows: [r for r in rows if "loss" in r and r["iteration"] > 4]
    for name, flags, exact in (("with SP", SP, True), ("without SP", [], False)):
        rows, w = train(trident, args + flags + ["--load", resume], 2, tmp, "ck_" + name.replace(" ", "_"))
        a, b = later(full_rows), later(rows)
        if exact:
            ok = [(x["loss"], x["grad_norm"]) for x in a] == [(x["loss"], x["grad_norm"]) for x in b] \
                and all((w[k] == full_w[k]).all() for k in full_w)
        else:
            ok = len(a) == len(b) == 4 and all(relative(y["loss"], x["loss"]) < 1e-5 for x, y in zip(a, b)) \
                and all(np.abs(w[k] - full_w[k]).max() < 1e-5 for k in full_w)
        worst = max((relative(y["loss"], x["loss"]) for x, y in zip(a, b)), default=1.0)
        check(ok, f"a checkpoint saved at 4 under SP resumes {name}: iterations 5-8 "
                  f"{'bit for bit' if exact else 'within 1e-5'} (loss {worst:.1e}, {len(b)} steps)")


def config_rules(trident):
    code, log, _ = run(trident, 2, TINY + T2 + SP + ["--num-layers", "1", "--train-iters", "3",
                                                     "--micro-batch-size", "1", "--seq-length", "31",
                                                     "--global-batch-size", "1"])
    check(code == 2 and "--sequence-parallel needs --micro-batch-size x --seq-length (1 x 31) "
          "divisible by --tensor-model-parallel-size (2)" in log,
          "b*s not divisible by t: refused (exit 2) naming the flags")
    code, log, _ = run(trident, 1, TINY + SP + ["--num-layers", "1", "--train-iters", "3"])
    check(code == 0 and "warning: --sequence-parallel has no effect" in log,
          "t = 1: a warning, and training runs without it (Megatron's behaviour)")


def main():
    trident = sys.argv[1]
    parity(trident)
    with tempfile.TemporaryDirectory() as tmp:
        pipelines_and_collectives(trident, tmp)
        plan_check(trident, tmp)
        checkpoints(trident, tmp)
    config_rules(trident)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
