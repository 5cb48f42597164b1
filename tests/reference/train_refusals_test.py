#!/usr/bin/python3
"""What `trident train` refuses instead of training something else, end to end on tiny runs:
a config key that is no flag (named with the nearest flag and the file), a --load that names
no checkpoint, a resume whose learning-rate schedule differs from the checkpoint's (unless
--override-opt-param-scheduler, whose learning rates are checked against Megatron's cosine
formula written out here). Each refusal exits 2 and writes nothing. And what it accepts: a
--load that is also --save and holds nothing yet (a job's first start), a checkpoint named
by its directory, its `latest`, an iteration directory or --ckpt-step, a config's length
replaced from the command line (the samples and batch sizes worked out by hand).
Usage: train_refusals_test.py TRIDENT SOURCE_DIR"""
import json
import math
import os
import subprocess
import sys
import tempfile

from parity import Checks

TINY = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "2",
        "--seq-length", "32", "--vocab-size", "128", "--micro-batch-size", "2",
        "--global-batch-size", "4", "--lr", "1e-3", "--min-lr", "1e-4", "--lr-warmup-iters", "1",
        "--log-interval", "1", "--eval-iters", "0", "--peak-tflops", "1", "--threads", "1",
        "--seed", "5"]
GBS = 4
check = Checks()


class Run:
    def __init__(self, trident, tmp, tag, args, cwd=None):
        self.metrics = os.path.join(tmp, tag + ".jsonl")
        out = subprocess.run([trident, "train"] + args + ["--metrics-file", self.metrics],
                             capture_output=True, text=True, timeout=300, cwd=cwd)
        self.code, self.stdout, self.stderr = out.returncode, out.stdout, out.stderr
        lines = open(self.metrics).readlines() if os.path.exists(self.metrics) else []
        self.rows = {r["iteration"]: r for r in map(json.loads, lines) if "loss" in r}

    def tail(self):
        return (self.stderr or self.stdout).strip()[-400:]


def megatron_lr(samples, warmup, decay, max_lr=1e-3, min_lr=1e-4):
    """Megatron's OptimizerParamScheduler.get_lr, cosine style, in samples."""
    if warmup > 0 and samples <= warmup:
        return max_lr * samples / warmup
    if samples > decay:
        return min_lr
    ratio = (samples - warmup) / (decay - warmup)
    return min_lr + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (max_lr - min_lr)


def lrs_match(rows, decay_iters):
    """Each logged lr is the one of the samples consumed before its iteration."""
    return rows and all(abs(r["lr"] - megatron_lr((i - 1) * GBS, GBS, decay_iters * GBS)) <=
                        1e-6 * r["lr"] for i, r in rows.items())


def refused(run, wanted, untouched):
    """Exit 2, every wanted text in stderr, no metrics, the paths as they were."""
    missing = [w for w in wanted if w not in run.stderr]
    ok = run.code == 2 and not missing and not os.path.exists(run.metrics) and \
        all(listing(p) == before for p, before in untouched.items())
    return ok, (f"exit {run.code}, missing {missing}: {run.tail()}" if not ok else "")


def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else os.path.exists(path)


def test_config_keys(trident, tmp):
    config = os.path.join(tmp, "typo.toml")
    with open(config, "w") as f:
        f.write("hiden-size = 64\nnum_layers = 2\n[model]\nseq-length = 32\n")
    save = os.path.join(tmp, "typo_ckpt")
    run = Run(trident, tmp, "typo", ["--config", config] + TINY + ["--train-iters", "2", "--save", save])
    ok, why = refused(run, [f"{config}: 3 problems",
                            "unknown key 'hiden-size': did you mean 'hidden-size' (--hidden-size)?",
                            "unknown key 'num_layers': did you mean 'num-layers' (--num-layers)?",
                            "[model]: a table"], {save: False})
    check(ok, f"a config with a misspelled key, an underscored key and a table: exit 2 naming the file, each "
              f"key and its nearest flag; no checkpoint, no metrics {why}")


def test_load_paths(trident, tmp):
    stray = os.path.join(tmp, "stray")
    os.makedirs(os.path.join(stray, "iter_0000009"))
    with open(os.path.join(stray, "notes.txt"), "w") as f:
        f.write("not a checkpoint\n")
    missing = os.path.join(tmp, "missing")
    save = os.path.join(tmp, "other_save")
    plain = os.path.join(tmp, "plain")
    os.makedirs(plain)
    cases = [(missing, "no such file or directory"), (plain, "a directory without `latest`"),
             (stray, "a directory of iter_NNNNNNN directories none of which has manifest.json"),
             (os.path.join(stray, "iter_0000009"), "an iter_NNNNNNN directory without manifest.json"),
             (os.path.join(stray, "notes.txt"), "a file other than `latest`")]
    for path, what in cases:
        run = Run(trident, tmp, "load_" + os.path.basename(path),
                  TINY + ["--train-iters", "2", "--load", path, "--save", save])
        ok, why = refused(run, [f"--load {path}: not a checkpoint ({what})",
                                "expected a checkpoint directory (holding `latest`)"],
                          {stray: listing(stray), plain: listing(plain), save: False, missing: False})
        check(ok, f"--load {os.path.relpath(path, tmp)} ({what}): exit 2 naming it, nothing written {why}")


def test_first_start_and_schedule(trident, tmp):
    """A Slurm-style job: --load and --save the same directory, missing on the first start."""
    ckpt = os.path.join(tmp, "job")
    job = TINY + ["--load", ckpt, "--save", ckpt, "--save-interval", "2"]
    first = Run(trident, tmp, "job_first", job + ["--train-iters", "4"])
    check(first.code == 0 and sorted(first.rows) == [1, 2, 3, 4] and
          listing(ckpt) == ["iter_0000002", "iter_0000004", "latest"],
          f"--load = --save, missing: the first start trains from the initialisation and saves "
          f"(exit {first.code}, {listing(ckpt)})")
    before = listing(ckpt)
    longer = Run(trident, tmp, "job_longer", job + ["--train-iters", "6"])
    ok, why = refused(longer, ["--lr-decay-iters/-samples (the decay length in samples; by default the training "
                               "length): checkpoint 16, this run 24",
                               "--override-opt-param-scheduler resumes with this run's learning-rate schedule"],
                      {ckpt: before})
    check(ok, f"resuming with a longer --train-iters whose decay defaulted to it: exit 2 listing the decay "
              f"(16 vs 24 samples), checkpoint untouched {why}")
    over = Run(trident, tmp, "job_override", job + ["--train-iters", "6", "--override-opt-param-scheduler"])
    check(over.code == 0 and sorted(over.rows) == [5, 6] and lrs_match(over.rows, 6) and
          "warning: --override-opt-param-scheduler: --lr-decay-iters/-samples" in over.stdout,
          f"--override-opt-param-scheduler resumes at 5 with a warning, its learning rates Megatron's cosine "
          f"decaying over 24 samples: {[r['lr'] for r in over.rows.values()]} (exit {over.code})")


def test_checkpoint_forms(trident, tmp):
    """Decay given explicitly: a longer run is the same schedule and resumes."""
    ckpt = os.path.join(tmp, "explicit")
    base = TINY + ["--lr-decay-iters", "8"]
    first = Run(trident, tmp, "explicit_first", base + ["--train-iters", "4", "--save", ckpt,
                                                        "--save-interval", "2"])
    check(first.code == 0 and lrs_match(first.rows, 8), f"a 4-iteration run with --lr-decay-iters 8 (exit {first.code})")
    runs = {}
    for tag, load, step in (("dir", ckpt, []), ("latest", os.path.join(ckpt, "latest"), []),
                            ("iter", os.path.join(ckpt, "iter_0000002"), []), ("step", ckpt, ["--ckpt-step", "2"])):
        runs[tag] = Run(trident, tmp, "form_" + tag, base + ["--train-iters", "6", "--load", load] + step)
    for tag, first_it in (("dir", 5), ("latest", 5), ("iter", 3), ("step", 3)):
        r = runs[tag]
        check(r.code == 0 and sorted(r.rows) == list(range(first_it, 7)) and lrs_match(r.rows, 8) and
              f"(iteration {first_it - 1}," in r.stdout,
              f"--load as {tag}: resumes at iteration {first_it} with the same schedule (exit {r.code}) "
              f"{'' if r.code == 0 else r.tail()}")
    steps = {tag: {i: (r["loss"], r["grad_norm"], r["lr"]) for i, r in runs[tag].rows.items()}
             for tag in ("iter", "step")}
    check(steps["iter"] and steps["iter"] == steps["step"],
          "--ckpt-step 2 trains exactly as --load DIR/iter_0000002 (loss, grad norm, lr)")
    absent = Run(trident, tmp, "form_absent", base + ["--train-iters", "6", "--load", ckpt, "--ckpt-step", "3"])
    ok, why = refused(absent, ["--ckpt-step 3: ", "no checkpoint of iteration 3 (iter_0000003); it holds "
                               "iter_0000002, iter_0000004"], {ckpt: listing(ckpt)})
    check(ok, f"--ckpt-step 3: exit 2 naming the iterations there {why}")


def test_config_lengths(trident, tmp, source):
    """configs/mt-nlg-scaled.toml: batch 4 -> 32 in 7 steps over 640 samples, one step per
    91.43 samples: batch 4 for iterations 1-23 (92 samples), then 8."""
    common = ["--config", "configs/mt-nlg-scaled.toml", "--mock-data", "--eval-iters", "0",
              "--log-interval", "1", "--peak-tflops", "1", "--threads", "2",  # and a smaller model:
              "--num-layers", "1", "--hidden-size", "64", "--num-attention-heads", "2", "--seq-length", "32"]
    short = Run(trident, tmp, "scaled_48", common + ["--train-samples", "48"], cwd=source)
    last = short.rows.get(max(short.rows, default=0), {})
    check(short.code == 0 and sorted(short.rows) == list(range(1, 13)) and last.get("consumed_samples") == 48,
          f"--train-samples 48 over the config's 4320: 12 iterations of batch 4, 48 samples "
          f"(exit {short.code}, {len(short.rows)} iterations, {last.get('consumed_samples')} samples)")
    iters = Run(trident, tmp, "scaled_30", common + ["--train-iters", "30"], cwd=source)
    batches = [iters.rows[i]["global_batch_size"] for i in sorted(iters.rows)]
    last = iters.rows.get(30, {})
    check(iters.code == 0 and batches == [4] * 23 + [8] * 7 and last.get("consumed_samples") == 148 and
          "note: --train-iters on the command line replaces train-samples = 4320" in iters.stdout,
          f"--train-iters 30 replaces the config's train-samples: 23 iterations of 4 and 7 of 8, 148 samples, "
          f"with a note (exit {iters.code}{': ' + iters.tail() if iters.code else ''})")


def main():
    trident, source = os.path.abspath(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        test_config_keys(trident, tmp)
        test_load_paths(trident, tmp)
        test_first_start_and_schedule(trident, tmp)
        test_checkpoint_forms(trident, tmp)
        test_config_lengths(trident, tmp, source)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
