#!/usr/bin/python3
"""ZeRO-2 and ZeRO-3 (--data-parallel-sharding-strategy optim_grads: gradients
reduce-scattered after every micro-batch, only the rank's shard kept; optim_grads_params: the
weights too, each unit all-gathered before it runs) under mpirun:
  * parity with the one-process run (every logged loss and grad norm, and the final weights,
    within 1e-5) at d = 2 and 4, overlapped, with t = 2, with p = 2 (the tied embedding),
    interleaved p = 2 v = 2, full and selective recomputation; under bf16 and fp16 with
    dynamic loss scaling against a one-process run in the same precision, within those
    formats' tolerances (the same steps skipped at the same loss scales in fp16);
  * memory at d = 4: the peak RSS (the largest of the data-parallel ranks') and the printed
    memory check are ordered no_shard > optim > optim_grads > optim_grads_params, each peak
    RSS is within 15% of its printed plan, and ZeRO-3's is at most 0.45x the one-process run's
    (its output layer and input embedding never whole: vocabulary blocks, rows by token);
  * checkpoints: an optim_grads and an optim_grads_params checkpoint resumed with the same
    flags repeat the uninterrupted run bit for bit (log lines, metrics, weights), and load
    under the other strategies, d = 2 and one process, matching each layout's uninterrupted
    run within 1e-5;
  * refusals (exit 2, naming the rule): an unknown strategy, --use-distributed-optimizer with
    no_shard, optim_grads and optim_grads_params with zb-h1;
  * the report: with m micro-batches per replica, optim_grads makes m times the
    reduce-scatter calls of optim (one per bucket per micro-batch against one per bucket).
Usage: zero_test.py TRIDENT"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks, compare, run_parity, train

ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--train-iters", "10", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "13"]
ZERO2 = ["--data-parallel-sharding-strategy", "optim_grads"]
ZERO3 = ["--data-parallel-sharding-strategy", "optim_grads_params"]
ZERO1 = ["--data-parallel-sharding-strategy", "optim"]
NO_SHARD = ["--data-parallel-sharding-strategy", "no_shard"]
OVERLAP = ["--overlap-grad-reduce", "--ddp-bucket-size", "20000", "--overlap-param-gather"]
# global batch 16, micro-batch 2: 4 micro-batches per replica at d = 2, 2 at d = 4
LAYOUTS = [("optim_grads d=2", ZERO2, 2),
           ("optim_grads d=4", ZERO2, 4),
           ("optim_grads d=2 overlapped", ZERO2 + OVERLAP, 2),
           ("optim_grads d=4 overlapped", ZERO2 + OVERLAP, 4),
           ("optim_grads t=2 d=2", ZERO2 + OVERLAP + ["--tensor-model-parallel-size", "2"], 4),
           # the tied embedding's bucket is held back until the step (summed across stages)
           ("optim_grads p=2 d=2", ZERO2 + OVERLAP + ["--pipeline-model-parallel-size", "2"], 4),
           ("optim_grads p=2 v=2 d=2", ZERO2 + OVERLAP + ["--pipeline-model-parallel-size", "2",
                                                          "--num-layers-per-virtual-pipeline-stage", "1"], 4),
           ("optim_grads d=2 full recompute", ZERO2 + OVERLAP + ["--recompute-granularity", "full", "--recompute-method", "uniform",
                               "--recompute-num-layers", "1"], 2),
           ("optim_grads d=2 selective recompute",
            ZERO2 + OVERLAP + ["--recompute-granularity", "selective"], 2),
           # ZeRO-3: every unit gathered for its forward and backward; the tied embedding
           # twice in forward on the last stage; a recomputed group of 2 gathered together
           ("optim_grads_params d=2", ZERO3, 2),
           ("optim_grads_params d=4 overlapped", ZERO3 + OVERLAP, 4),
           ("optim_grads_params t=2 d=2", ZERO3 + OVERLAP + ["--tensor-model-parallel-size", "2"], 4),
           ("optim_grads_params p=2 d=2", ZERO3 + OVERLAP + ["--pipeline-model-parallel-size", "2"], 4),
           ("optim_grads_params p=2 v=2 d=2", ZERO3 + OVERLAP + ["--pipeline-model-parallel-size", "2",
                                                                 "--num-layers-per-virtual-pipeline-stage", "1"], 4),
           ("optim_grads_params d=2 full recompute (groups of 2)",
            ZERO3 + OVERLAP + ["--recompute-granularity", "full", "--recompute-method", "uniform",
                               "--recompute-num-layers", "2"], 2),
           ("optim_grads_params d=2 selective recompute",
            ZERO3 + OVERLAP + ["--recompute-granularity", "selective"], 2),
           # the output layer in 2 blocks of 156 vocabulary rows (half of OVERLAP's bucket),
           # each gathered and reduced once per chunk of 16 rows of logits
           ("optim_grads_params d=2 four chunks of logits rows",
            ZERO3 + OVERLAP + ["--logits-chunk-rows", "16"], 2),
           ("optim_grads_params t=2 d=2 sequence parallel",
            ZERO3 + OVERLAP + ["--tensor-model-parallel-size", "2", "--sequence-parallel"], 4)]
# Llama's shape: an untied output layer (its own blocks; the input embedding only row by row)
LLAMA = ["--normalization", "RMSNorm", "--position-embedding-type", "rope", "--swiglu",
         "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--ffn-hidden-size", "96",
         "--group-query-attention"]
LLAMA_LAYOUTS = [("untied optim_grads_params d=2", ZERO3 + OVERLAP, 2),
                 ("untied optim_grads_params p=2 d=2",
                  ZERO3 + OVERLAP + ["--pipeline-model-parallel-size", "2"], 4)]
# bf16 and fp16 runs differ from one process by far more than 1e-5 under any data-parallel
# layout (a different summation order flips the rounding of some weights to 8 or 11 mantissa
# bits, and that grows), so plain data parallelism (no_shard) runs beside them to show the
# size of that, and the tolerances are those of tests/reference/mixed_precision_test.py for
# bf16 (2e-3) and half a unit of fp16's 11 bits (2^-11 / 2 = 2.4e-4 rounded up to 5e-4).
BF16_TOLERANCE, FP16_TOLERANCE = 2e-3, 5e-4
BF16_LAYOUTS = [("bf16 no_shard d=2 (plain data parallelism, for scale)", NO_SHARD, 2),
                ("bf16 optim_grads d=2", ZERO2, 2),
                ("bf16 optim_grads d=2 overlapped", ZERO2 + OVERLAP, 2),
                ("bf16 optim_grads p=2 d=2", ZERO2 + OVERLAP + ["--pipeline-model-parallel-size", "2"], 4),
                # the bf16 copy is re-rounded from each gathered unit
                ("bf16 optim_grads_params d=2 overlapped", ZERO3 + OVERLAP, 2),
                ("bf16 optim_grads_params p=2 d=2", ZERO3 + OVERLAP + ["--pipeline-model-parallel-size", "2"], 4)]
# dynamic loss scaling: the scale doubles every 3 steps from 2^20 until the step to 2^23
# overflows (iteration 10 here) and is skipped, halving it: skip and scale go through the
# sharded gradients too
FP16 = ["--fp16", "--initial-loss-scale", "1048576", "--hysteresis", "1", "--loss-scale-window", "3"]
FP16_LAYOUTS = [("fp16 no_shard d=2 (plain data parallelism, for scale)", NO_SHARD, 2),
                ("fp16 optim_grads d=2", ZERO2, 2),
                ("fp16 optim_grads d=2 overlapped", ZERO2 + OVERLAP, 2),
                ("fp16 optim_grads_params d=2 overlapped", ZERO3 + OVERLAP, 2)]

# Rank 0's peak RSS: a model whose gradients and MPI buffers are hundreds of MiB.
BIG = ["--mock-data", "--num-layers", "12", "--hidden-size", "512", "--num-attention-heads", "8",
       "--seq-length", "128", "--vocab-size", "50257", "--micro-batch-size", "1",
       "--global-batch-size", "4", "--train-iters", "2", "--ddp-bucket-size", "4000000",
       "--overlap-grad-reduce", "--eval-iters", "1", "--peak-tflops", "1", "--log-interval", "1"]


def mpirun(ranks, trident, args, timeout=120):
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks), trident, "train"] + args + ["--threads", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=timeout)


def mib(value, unit):
    return float(value) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]


def check_parity(check, trident):
    check.add_parity(run_parity(trident, ARGS, LAYOUTS), len(LAYOUTS))
    check.add_parity(run_parity(trident, ARGS + LLAMA, LLAMA_LAYOUTS), len(LLAMA_LAYOUTS))
    check.add_parity(run_parity(trident, ARGS + ["--bf16"], BF16_LAYOUTS,
                                tolerance=BF16_TOLERANCE), len(BF16_LAYOUTS))


def check_fp16(check, trident):
    """run_parity with fp16's skipped steps (logged without a loss): the same steps skipped
    at the same loss scales as one process, and the other steps within FP16_TOLERANCE."""
    args = [a if a != "10" else "12" for a in ARGS] + FP16  # --train-iters 12
    with tempfile.TemporaryDirectory() as tmp:
        ref = train(trident, args, 1, tmp, "reference")
        for name, flags, ranks in FP16_LAYOUTS:
            try:
                got = train(trident, args + flags, ranks, tmp, name.replace(" ", "_"))
            except RuntimeError as e:
                check(False, f"{name}: {str(e)[-800:]}")
                continue
            pattern = lambda rows: [(r["iteration"], r["loss_scale"], r["loss"] is None)
                                    for r in rows if "loss" in r]
            taken = lambda rows: [r for r in rows if "loss" not in r or r["loss"] is not None]
            skipped = [i for i, _, s in pattern(ref[0]) if s]
            summary, bad = compare((taken(ref[0]), ref[1]), (taken(got[0]), got[1]), FP16_TOLERANCE)
            check(skipped and pattern(got[0]) == pattern(ref[0]) and not bad,
                  f"{name} vs one process: iterations {skipped} skipped in both at the same loss "
                  f"scales; the others: {summary}" + ("; " + "; ".join(bad) if bad else ""))


STRATEGIES = ("no_shard", "optim", "optim_grads", "optim_grads_params")


def memory_run(trident, ranks, flags):
    """(peak RSS, plan, memory check's need) in MiB, or an error string."""
    out = mpirun(ranks, trident, BIG + flags, timeout=240)
    peak = re.search(r"^peak RSS ([0-9.]+) ([KMG]iB) \(plan: ([0-9.]+) ([KMG]iB)\)$", out.stdout, re.M)
    need = re.search(r"^memory check: needs ([0-9.]+) ([KMG]iB) per rank", out.stdout, re.M)
    if out.returncode != 0 or not peak or not need:
        return f"exit {out.returncode}: {out.stderr[-800:]}"
    return mib(*peak.group(1, 2)), mib(*peak.group(3, 4)), mib(*need.group(1, 2))


def check_memory(check, trident):
    peaks, needs = {}, {}
    for name in STRATEGIES:
        got = memory_run(trident, 4, ["--data-parallel-sharding-strategy", name])
        if isinstance(got, str):
            check(False, f"{name} d=4 (memory run): {got}")
            return
        rss, plan, needs[name] = got
        peaks[name] = rss
        check(abs(rss - plan) <= 0.15 * plan,
              f"{name} d=4: the largest peak RSS of the 4 ranks, {rss:.1f} MiB, within 15% of the "
              f"plan {plan:.1f} MiB ({(rss - plan) / plan:+.1%})")
    order = lambda values: " > ".join(f"{values[n]:.1f}" for n in STRATEGIES) + " MiB"
    check(all(peaks[a] > peaks[b] for a, b in zip(STRATEGIES, STRATEGIES[1:])),
          "peak RSS " + " > ".join(STRATEGIES) + ": " + order(peaks))
    check(all(needs[a] > needs[b] for a, b in zip(STRATEGIES, STRATEGIES[1:])),
          "memory check's needs " + " > ".join(STRATEGIES) + ": " + order(needs))
    one = memory_run(trident, 1, [])
    if isinstance(one, str):
        check(False, f"one process (memory run): {one}")
        return
    ratio = peaks['optim_grads_params'] / one[0]
    check(ratio <= 0.45, f"ZeRO-3 at d=4: peak RSS {peaks['optim_grads_params']:.1f} MiB = "
                         f"{ratio:.2f} x the one-process run's {one[0]:.1f} MiB (at most 0.45)")


def log_steps(stdout, first):
    """Iteration -> the ' | '-separated fields of its log line that do not depend on time."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"^ iteration +(\d+)/", line)
        if m and int(m.group(1)) >= first:
            out[int(m.group(1))] = [f.strip() for f in line.split("|")
                                    if f.strip().startswith(("lm loss", "grad norm", "learning rate",
                                                             "consumed samples"))]
    return out


def check_checkpoints(check, trident):
    # Each saved under one strategy at d = 2, loaded under the others and other (t, p, d).
    check_checkpoint_round(check, trident, "optim_grads", ZERO2,
                           (("optim d=2", ZERO1, 2), ("no_shard d=2", NO_SHARD, 2),
                            ("optim_grads_params d=2", ZERO3, 2), ("one process", [], 1)))
    check_checkpoint_round(check, trident, "optim_grads_params", ZERO3,
                           (("optim_grads d=2", ZERO2, 2), ("no_shard d=2", NO_SHARD, 2),
                            ("optim t=2 p=2", ZERO1 + ["--tensor-model-parallel-size", "2",
                                                       "--pipeline-model-parallel-size", "2"], 4),
                            ("one process", [], 1)))


def check_checkpoint_round(check, trident, strategy, flags, others):
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "ckpt")
        logs = []
        full = train(trident, ARGS + flags + ["--save", ckpt, "--save-interval", "5"], 2, tmp, "full", logs=logs)
        full_log = log_steps(logs[-1], 6)
        resume = os.path.join(tmp, "at5")
        shutil.copytree(ckpt, resume)
        with open(os.path.join(resume, "latest"), "w") as f:
            f.write("iter_0000005\n")
        logs = []
        try:
            resumed = train(trident, ARGS + flags + ["--load", resume], 2, tmp, "resumed", logs=logs)
        except RuntimeError as e:
            check(False, f"{strategy} d=2 resumed at 5: {str(e)[-800:]}")
            resumed = None
        if resumed:
            rows, w = resumed
            ref_rows = [r for r in full[0] if "loss" in r and r["iteration"] >= 6]
            got_rows = [r for r in rows if "loss" in r]
            same = (len(got_rows) == 5 and
                    [(r["iteration"], r["loss"], r["grad_norm"]) for r in got_rows] ==
                    [(r["iteration"], r["loss"], r["grad_norm"]) for r in ref_rows] and
                    w.keys() == full[1].keys() and all((w[k] == full[1][k]).all() for k in w))
            check(same, f"{strategy} d=2 resumed at 5: iterations 6-10 (loss, grad norm) and the "
                        "final weights bit for bit")
            got_log = log_steps(logs[-1], 6)
            check(len(full_log) == 5 and got_log == full_log,
                  f"{strategy} d=2 resumed at 5: the log lines of iterations 6-10 are identical "
                  f"(e.g. {' | '.join(got_log.get(10, ['none']))})")
        # The checkpoint under other layouts, against each one's uninterrupted run.
        for name, other, ranks in others:
            tag = name.replace(" ", "_").replace("=", "")
            try:
                ref = train(trident, ARGS + other, ranks, tmp, tag + "_ref")
                got = train(trident, ARGS + other + ["--load", resume], ranks, tmp, tag + "_resumed")
            except RuntimeError as e:
                check(False, f"{strategy} checkpoint loaded under {name}: {str(e)[-800:]}")
                continue
            later = lambda rows: [r for r in rows if "loss" not in r or r["iteration"] >= 6]
            summary, bad = compare((later(ref[0]), ref[1]), (later(got[0]), got[1]), 1e-5)
            steps = [r["iteration"] for r in got[0] if "loss" in r]
            check(not bad and steps == list(range(6, 11)),
                  f"{strategy} d=2 checkpoint at 5 loaded under {name}: iterations 6-10 vs its "
                  f"uninterrupted run: {summary}" + ("; " + "; ".join(bad) if bad else ""))


def check_refusals(check, trident):
    strategy = "--data-parallel-sharding-strategy"
    for flags, ranks, words in (
            ([strategy, "zero2"], 1, "--data-parallel-sharding-strategy must be no_shard, optim, "
                                     "optim_grads or optim_grads_params, got 'zero2'"),
            ([strategy, "no_shard", "--use-distributed-optimizer"], 1,
             "cannot be combined with --data-parallel-sharding-strategy no_shard"),
            ([strategy, "optim_grads", "--pipeline-schedule", "zb-h1", "--pipeline-model-parallel-size", "2"],
             4, "--pipeline-schedule zb-h1 computes weight gradients after later backwards"),
            ([strategy, "optim_grads_params", "--pipeline-schedule", "zb-h1", "--pipeline-model-parallel-size", "2"],
             4, "--pipeline-schedule zb-h1 computes weight gradients after later backwards")):
        if ranks == 1:
            out = subprocess.run([trident, "train"] + ARGS + flags, capture_output=True, text=True,
                                 env=MPI_ENV, timeout=60)
        else:
            out = mpirun(ranks, trident, ARGS + flags, timeout=60)
        check(out.returncode == 2 and words in out.stderr and "invalid argument" in out.stderr,
              f"{' '.join(flags)} ({ranks} rank{'s' if ranks > 1 else ''}): exit {out.returncode}, "
              f"'{words}'")


def collectives(stdout):
    """(group, op) -> calls per iteration, from the 'collectives of rank 0' table."""
    rows = re.findall(r"^  (\w+) +([a-z-]+) +([0-9.]+) +[0-9.]+ +[0-9.]+$", stdout, re.M)
    return {(g, op): float(calls) for g, op, calls in rows}


def check_report(check, trident):
    micro = 16 // (2 * 2)  # global batch / (micro-batch x d)
    runs = {}
    for name, flags in (("optim", ZERO1), ("optim_grads", ZERO2)):
        out = mpirun(2, trident, ARGS + flags + OVERLAP)
        line = re.search(r"^data parallel: (\d+) of (\d+) gradient buckets.*$", out.stdout, re.M)
        table = collectives(out.stdout)
        if out.returncode != 0 or not line or ("data", "reduce-scatter") not in table:
            check(False, f"{name} d=2 report: exit {out.returncode}, no 'data parallel:' line or "
                         f"no reduce-scatter row: {out.stdout[-1500:]} {out.stderr[-500:]}")
            return
        runs[name] = (int(line.group(1)), int(line.group(2)), table[("data", "reduce-scatter")])
        check(int(line.group(1)) > 0 and "reduce-scatter" in line.group(0),
              f"{name} d=2, overlapped: {line.group(0)}")
    (_, buckets1, rs1), (_, buckets2, rs2) = runs["optim"], runs["optim_grads"]
    check(buckets1 == buckets2 > 1 and rs1 == buckets1 and rs2 == micro * rs1,
          f"reduce-scatters per iteration at d=2 with {micro} micro-batches per replica and "
          f"{buckets1} buckets: optim {rs1:g}, optim_grads {rs2:g} (= {micro} x {rs1:g})")


def main():
    trident = sys.argv[1]
    check = Checks()
    for part in (check_refusals, check_report, check_parity, check_fp16, check_checkpoints,
                 check_memory):
        start = time.monotonic()
        part(check, trident)
        print(f"     ({part.__name__}: {time.monotonic() - start:.1f} s)")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
