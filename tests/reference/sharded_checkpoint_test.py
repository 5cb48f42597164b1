#!/usr/bin/python3
"""Checkpoints sharded over data parallelism (the distributed optimizer: every data-parallel
rank writes its shard of the values and both Adam moments in place in the one file) under
mpirun, at d = 2 and 4 with --use-distributed-optimizer and at d = 2 with
--data-parallel-sharding-strategy optim_grads:
  * the files are the unsharded writer's: the checkpoint loaded by one process (no_shard) and
    saved again straight away by the old whole-file path is byte for byte the sharded file;
    and that one-process checkpoint loaded at d = 4 and saved sharded again is too;
  * resumed under the same layout, every later step (loss, grad norm) and the final weights
    are bit for bit the uninterrupted run's;
  * loaded under one process (no_shard), t = 2 d = 2 and p = 2 d = 2, the next steps are
    within 1e-5 of the uninterrupted run; --finetune of a sharded checkpoint under d = 2
    trains as a one-process --finetune of it does (within 1e-5);
  * --async-save writes the same bytes as the synchronous save and resumes bit for bit;
  * world rank 0 dying before the commit leaves the previous checkpoint, which resumes bit for
    bit; a write failing on the last data-parallel rank (sync and async) fails the run on every
    rank, non-zero, without hanging, and nothing after the previous checkpoint is committed;
  * memory: the asynchronous snapshot per rank is the optimizer shard (1/d of the d = 1 one),
    as the printed memory plan says, and a synchronous sharded save adds less to the peak RSS
    than one float per parameter of the shard.
Usage: sharded_checkpoint_test.py TRIDENT"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks, compare, metrics_by_iteration, read_safetensors

# --lr-decay-iters fixed: a run of --train-iters 5 may load iteration 5 (and save it again
# at once) without changing the learning-rate schedule.
MODEL = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
         "--global-batch-size", "8", "--train-iters", "10", "--lr-decay-iters", "10",
         "--lr", "1e-3", "--lr-warmup-iters", "2", "--log-interval", "1", "--eval-iters", "0",
         "--peak-tflops", "1", "--seed", "13"]
ZERO1 = ["--use-distributed-optimizer"]
ZERO2 = ["--data-parallel-sharding-strategy", "optim_grads"]
TP2 = ["--tensor-model-parallel-size", "2"]
PP2V2 = ["--num-layers", "4", "--pipeline-model-parallel-size", "2",
         "--num-layers-per-virtual-pipeline-stage", "1"]
# name, flags, ranks; and the same (t, p) without sharding (whose writer is the whole-file one)
SHARDED = [("optim d=2", ZERO1, 2, [], 1), ("optim d=4", ZERO1, 4, [], 1),
           ("optim_grads d=2", ZERO2, 2, [], 1),
           ("t=2 d=2 optim", TP2 + ZERO1, 4, TP2, 2),
           # two chunks per rank in one file; the last stage's copy of the tied embedding
           ("p=2 v=2 d=2 optim", PP2V2 + ZERO1, 4, PP2V2, 2)]
FILE = "model_tp0_pp0.safetensors"


def run(trident, args, ranks, timeout=300):
    cmd = [trident, "train"] + MODEL + args
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + cmd + \
              ["--threads", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=timeout)


def train(trident, args, ranks, tmp, tag):
    """(metrics rows, final weights) of a run that must succeed, or (None, reason)."""
    metrics, hf = os.path.join(tmp, tag + ".jsonl"), os.path.join(tmp, tag + "_hf")
    out = run(trident, args + ["--metrics-file", metrics, "--save-hf", hf, "--save-hf-dtype", "fp32"],
              ranks)
    if out.returncode != 0:
        return None, f"exit {out.returncode}: {out.stderr[-800:]}"
    rows = [r for r in map(json.loads, open(metrics)) if "run" not in r]
    return rows, read_safetensors(os.path.join(hf, "model.safetensors"))


def steps(rows, first):
    return [(r["iteration"], r["loss"], r["grad_norm"]) for r in rows if "loss" in r and r["iteration"] >= first]


def later(rows, first=6):
    return [r for r in rows if "loss" not in r or r["iteration"] >= first]


def same_bytes(a, b):
    return os.path.exists(a) and os.path.exists(b) and open(a, "rb").read() == open(b, "rb").read()


def same_files(a, b):
    """The model_*.safetensors files of two iteration directories, byte for byte."""
    names = sorted(f for f in os.listdir(a) if f.endswith(".safetensors")) if os.path.isdir(a) else []
    return (names and os.path.isdir(b) and
            names == sorted(f for f in os.listdir(b) if f.endswith(".safetensors")) and
            all(same_bytes(os.path.join(a, f), os.path.join(b, f)) for f in names))


def resaved(trident, load, ranks, flags, save):
    """The checkpoint of iteration 5 under `load`, loaded and saved again at once (a run of
    --train-iters 5 saves its final iteration): the directory it wrote."""
    out = run(trident, flags + ["--train-iters", "5", "--load", load, "--save", save], ranks)
    return os.path.join(save, "iter_0000005") if out.returncode == 0 else None


def sharded_layouts(check, trident, tmp):
    """Each sharded layout: its files against the unsharded writer's, and its exact resume."""
    for name, flags, ranks, plain, plain_ranks in SHARDED:
        tag = name.replace(" ", "_").replace("=", "")
        ckpt = os.path.join(tmp, tag + "_ckpt")
        full = train(trident, flags + ["--save", ckpt, "--save-interval", "5"], ranks, tmp, tag)
        if full[0] is None:
            check(False, f"{name}: {full[1]}")
            continue
        sharded = os.path.join(ckpt, "iter_0000005")
        one = resaved(trident, sharded, plain_ranks, plain, os.path.join(tmp, tag + "_one"))
        files = sorted(f for f in os.listdir(sharded) if f.endswith(".safetensors"))
        check(one and same_files(one, sharded),
              f"{name}: the sharded files of iteration 5 ({', '.join(files)}) are byte for byte the "
              f"ones a load of them at d=1 ({plain_ranks} rank{'s' if plain_ranks > 1 else ''}) "
              f"saves with the whole-file writer")
        if ranks == 4 and plain_ranks == 1 and one:
            again = resaved(trident, one, 4, flags, os.path.join(tmp, tag + "_again"))
            check(again and same_files(again, sharded),
                  f"{name}: that one-process checkpoint loaded at d=4 and saved sharded again: the "
                  f"same bytes")
        resumed = train(trident, flags + ["--load", os.path.join(ckpt, "iter_0000005")], ranks, tmp,
                        tag + "_resumed")
        exact = (resumed[0] is not None and steps(resumed[0], 6) == steps(full[0], 6) and
                 len(steps(full[0], 6)) == 5 and resumed[1].keys() == full[1].keys() and
                 all((resumed[1][k] == full[1][k]).all() for k in full[1]))
        check(exact, f"{name}: resumed at 5 under the same layout: steps 6-10 (loss, grad norm) and "
                     f"the final weights bit for bit" + ("" if resumed[0] else f" ({resumed[1]})"))
    return os.path.join(tmp, "optim_d2_ckpt", "iter_0000005"), os.path.join(tmp, "optim_d2")


def other_layouts(check, trident, tmp, ckpt, reference_tag):
    """The d = 2 checkpoint under layouts other than its own, against its uninterrupted run."""
    reference = ([r for r in map(json.loads, open(reference_tag + ".jsonl")) if "run" not in r],
                 read_safetensors(reference_tag + "_hf/model.safetensors"))
    for name, flags, ranks in (("one process no_shard", [], 1),
                               ("t=2 d=2 optim", ["--tensor-model-parallel-size", "2"] + ZERO1, 4),
                               ("p=2 d=2 optim", ["--pipeline-model-parallel-size", "2"] + ZERO1, 4)):
        got = train(trident, flags + ["--load", ckpt], ranks, tmp, "to_" + name.split()[0])
        if got[0] is None:
            check(False, f"optim d=2 checkpoint loaded under {name}: {got[1]}")
            continue
        summary, bad = compare((later(reference[0]), reference[1]), (later(got[0]), got[1]), 1e-5)
        check(not bad, f"optim d=2 checkpoint at 5 loaded under {name}: steps 6-10 vs the "
                       f"uninterrupted run: {summary}" + ("; " + "; ".join(bad) if bad else ""))
    one = train(trident, ["--finetune", "--load", ckpt], 1, tmp, "finetune_one")
    two = train(trident, ZERO1 + ["--finetune", "--load", ckpt], 2, tmp, "finetune_d2")
    if one[0] is None or two[0] is None:
        check(False, f"--finetune of the optim d=2 checkpoint: {one[1] if one[0] is None else two[1]}")
        return
    summary, bad = compare(one, two, 1e-5)
    check(not bad, f"--finetune of the optim d=2 checkpoint under optim d=2 vs one process: "
                   f"{summary}" + ("; " + "; ".join(bad) if bad else ""))


def asynchronous(check, trident, tmp):
    for name, flags, ranks, _, _ in (SHARDED[0], SHARDED[2]):
        tag = os.path.join(tmp, name.replace(" ", "_").replace("=", ""))
        ckpt, metrics = tag + "_async", tag + "_async.jsonl"
        out = run(trident, flags + ["--save", ckpt, "--save-interval", "5", "--async-save",
                                    "--metrics-file", metrics], ranks)
        identical = all(same_bytes(os.path.join(ckpt, f"iter_{i:07d}", FILE),
                                   os.path.join(tag + "_ckpt", f"iter_{i:07d}", FILE)) for i in (5, 10))
        check(out.returncode == 0 and identical,
              f"{name} --async-save: the files of iterations 5 and 10 are the synchronous save's bytes")
        resumed = run(trident, flags + ["--load", ckpt, "--ckpt-step", "5", "--metrics-file",
                                        tag + "_async_resumed.jsonl"], ranks)
        rows, reference = metrics_by_iteration(tag + "_async_resumed.jsonl"), metrics_by_iteration(metrics)
        check(resumed.returncode == 0 and sorted(rows) == list(range(6, 11)) and
              all(rows[i] == reference[i] for i in rows),
              f"{name} --async-save: resumed from iteration 5, steps 6-10 bit for bit")


def dying_rank_zero(check, trident, tmp):
    """World rank 0 dies inside the second save (iteration 6) once every piece is written and
    the manifest too, before anything is renamed; the rerun resumes from iteration 3 bit for
    bit (against the uninterrupted optim d=2 run)."""
    ckpt = os.path.join(tmp, "die")
    out = run(trident, ZERO1 + ["--save", ckpt, "--save-interval", "3", "--inject-fault-save", "2",
                                "--inject-fault-save-point", "before-commit"], 2, timeout=120)
    latest = open(os.path.join(ckpt, "latest")).read().strip()
    check(out.returncode != 0 and latest == "iter_0000003" and
          not os.path.exists(os.path.join(ckpt, "iter_0000006")),
          f"optim d=2: world rank 0 dying before the commit of iteration 6 (exit {out.returncode}) "
          f"leaves iter_0000003 the latest")
    metrics = os.path.join(tmp, "die.jsonl")
    resumed = run(trident, ZERO1 + ["--load", ckpt, "--metrics-file", metrics], 2)
    rows = metrics_by_iteration(metrics)
    reference = metrics_by_iteration(os.path.join(tmp, "optim_d2.jsonl"))
    check(resumed.returncode == 0 and sorted(rows) == list(range(4, 11)) and
          all(rows[i] == reference[i] for i in rows),
          "optim d=2: resumed from that iteration 3, steps 4-10 bit for bit")


def failing_write(check, trident, tmp):
    """The last data-parallel rank's write fails in the second save (iteration 6)."""
    for mode in ([], ["--async-save"]):
        label = "async" if mode else "sync"
        ckpt = os.path.join(tmp, "fail_" + label)
        start = time.monotonic()
        out = run(trident, ZERO1 + mode + ["--save", ckpt, "--save-interval", "3",
                                           "--inject-fault-save", "2", "--inject-fault-save-point",
                                           "write-error"], 2, timeout=120)
        seconds = time.monotonic() - start
        latest = open(os.path.join(ckpt, "latest")).read().strip()
        said = ("the background write failed on world rank 1" if mode else
                "injected failure writing the checkpoint")
        check(out.returncode not in (0, 2) and latest == "iter_0000003" and said in out.stderr and
              not any(d.startswith("iter_") and d[5:12] > "0000003" and not d.endswith(".tmp")
                      for d in os.listdir(ckpt)),
              f"optim d=2 ({label}): a write failing on data-parallel rank 1 fails the run (exit "
              f"{out.returncode}, in {seconds:.1f} s, no rank hangs); `latest` stays iter_0000003, "
              f"nothing later committed")


BIG = ["--num-layers", "4", "--hidden-size", "384", "--seq-length", "64", "--train-iters", "3",
       "--lr-decay-iters", "3"]


def memory(check, trident, tmp):
    """The asynchronous snapshot's bytes per rank at d = 1, 2, 4, and rank 0's peak RSS with and
    without a synchronous save at d = 2."""
    copied, planned = {}, {}
    for d in (1, 2, 4):
        out = run(trident, BIG + ZERO1 + ["--save", os.path.join(tmp, f"mem{d}"), "--async-save"], d)
        m = re.search(r"snapshot taken.*; ([0-9.]+) MB to copy\)", out.stdout)
        plan = re.search(r"--async-save snapshot: weights, exp_avg, exp_avg_sq +(\d+) floats x +3",
                         out.stdout)
        if out.returncode != 0 or not m or not plan:
            check(False, f"d={d} --async-save: exit {out.returncode}: {out.stderr[-500:]}")
            return
        copied[d], planned[d] = float(m.group(1)), int(plan.group(1))
    print(f"     async snapshot per rank (weights + exp_avg + exp_avg_sq): d=1 {copied[1]} MB, "
          f"d=2 {copied[2]} MB, d=4 {copied[4]} MB")
    check(all(abs(copied[d] * d - copied[1]) <= 0.01 * copied[1] for d in (2, 4)),
          f"--async-save snapshot per rank is the shard: d=2 {copied[2]} MB, d=4 {copied[4]} MB "
          f"= {copied[1]} MB / d (within 1%)")
    check(all(abs(planned[d] * d - planned[1]) <= 16 * d for d in (2, 4)) and
          all(abs(planned[d] * 3 * 4 / 1e6 - copied[d]) <= 0.1 for d in (1, 2, 4)),
          f"the printed memory plan's snapshot agrees: {planned[1]}, {planned[2]}, {planned[4]} "
          f"floats x 3 at d = 1, 2, 4")
    peaks = {}
    for tag, extra in (("without a save", []), ("with a sharded save", ["--save", os.path.join(tmp, "rss")])):
        out = run(trident, BIG + ZERO1 + extra, 2)
        m = re.search(r"^peak RSS ([0-9.]+) MiB", out.stdout, re.M)
        if out.returncode != 0 or not m:
            check(False, f"d=2 peak RSS {tag}: exit {out.returncode}: {out.stderr[-500:]}")
            return
        peaks[tag] = float(m.group(1))
    extra = peaks["with a sharded save"] - peaks["without a save"]
    shard = copied[2] / 3 * 1e6 / 2**20  # one float per parameter of the shard, MiB
    print(f"     rank 0's peak RSS at d=2: {peaks['without a save']:.1f} MiB without a save, "
          f"{peaks['with a sharded save']:.1f} MiB with a synchronous sharded save "
          f"(+{extra:.1f} MiB; the gathered moments were 2 x {2 * shard:.1f} MiB)")
    check(extra < shard,
          f"a synchronous sharded save adds {extra:.1f} MiB to rank 0's peak RSS, less than one "
          f"float per parameter of its shard ({shard:.1f} MiB): nothing is gathered")


def main():
    trident = sys.argv[1]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        for part in (sharded_layouts, other_layouts, asynchronous, dying_rank_zero, failing_write,
                     memory):
            start = time.monotonic()
            if part is sharded_layouts:
                ckpt, reference_tag = part(check, trident, tmp)
            elif part is other_layouts:
                part(check, trident, tmp, ckpt, reference_tag)
            else:
                part(check, trident, tmp)
            print(f"     ({part.__name__}: {time.monotonic() - start:.1f} s)")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
