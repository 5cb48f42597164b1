#!/usr/bin/python3
"""--async-save against the synchronous save and an uninterrupted run, on one process and on
4 ranks (p = 2, d = 2, distributed optimizer; t = 2, d = 2): every asynchronous checkpoint's
files are byte-identical to the synchronous save's and its manifest equal, and a run resumed
from one logs the uninterrupted run's losses bit for bit. kill -9 while a writer is stalled
mid-file (and training has gone on past the save) leaves the previous checkpoint `latest`,
intact and resuming bit for bit. A write that fails on one rank (another than 0) fails the
run on every rank, non-zero, with nothing committed. The memory plan shows the snapshot and
the log the blocked and write times.
Usage: async_save_test.py TRIDENT"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks, metrics_by_iteration

MODEL = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", "32", "--vocab-size", "301", "--log-interval", "1", "--eval-iters", "0",
         "--peak-tflops", "1", "--seed", "5", "--threads", "1", "--micro-batch-size", "2",
         "--lr", "1e-3", "--lr-warmup-iters", "2", "--train-iters", "12"]
LAYOUTS = [("one process", 1, ["--global-batch-size", "4"]),
           ("4 ranks p=2 d=2, distributed optimizer", 4,
            ["--global-batch-size", "8", "--pipeline-model-parallel-size", "2",
             "--use-distributed-optimizer"]),
           ("4 ranks t=2 d=2, distributed optimizer", 4,
            ["--global-batch-size", "8", "--tensor-model-parallel-size", "2",
             "--use-distributed-optimizer"])]


def command(trident, ranks, args):
    cmd = [trident, "train"] + MODEL + args
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + cmd \
        if ranks > 1 else cmd


def run(trident, ranks, args):
    return subprocess.run(command(trident, ranks, args), capture_output=True, text=True,
                          env=MPI_ENV, timeout=300)


losses = metrics_by_iteration  # iteration -> (loss, grad norm, lr)


def same_checkpoint(a, b):
    """Byte-identical safetensors files and equal manifests (their file lists in any order)."""
    files = sorted(f for f in os.listdir(a) if f.endswith(".safetensors"))
    if not files or files != sorted(f for f in os.listdir(b) if f.endswith(".safetensors")):
        return False
    if any(open(os.path.join(a, f), "rb").read() != open(os.path.join(b, f), "rb").read()
           for f in files):
        return False
    ma, mb = (json.load(open(os.path.join(d, "manifest.json"))) for d in (a, b))
    for m in (ma, mb):
        m["files"] = sorted(m["files"], key=lambda f: f["file"])
    return ma == mb


def resumes_exactly(trident, tmp, check):
    for label, ranks, layout in LAYOUTS:
        tag = os.path.join(tmp, label.split(",")[0].replace(" ", "_").replace("=", ""))
        sync = run(trident, ranks, layout + ["--save", tag + "_sync", "--save-interval", "4",
                                             "--metrics-file", tag + "_sync.jsonl"])
        out = run(trident, ranks, layout + ["--save", tag + "_async", "--save-interval", "4",
                                            "--async-save", "--metrics-file", tag + "_async.jsonl"])
        reference = losses(tag + "_sync.jsonl")
        identical = all(same_checkpoint(f"{tag}_async/iter_{i:07d}", f"{tag}_sync/iter_{i:07d}")
                        for i in (4, 8, 12))
        check(sync.returncode == 0 and out.returncode == 0 and identical and
              losses(tag + "_async.jsonl") == reference,
              f"{label}: asynchronous checkpoints of iterations 4, 8, 12 are byte for byte the "
              f"synchronous save's, the run's losses unchanged")
        logged = out.stdout.count("snapshot taken, writing in the background (the step was "
                                  "blocked") == 3 and out.stdout.count("in the background, ") == 3
        check(logged and "--async-save snapshot: weights, exp_avg, exp_avg_sq" in out.stdout,
              f"{label}: each save logs the blocked and the write time; the memory plan shows "
              f"the snapshot")
        resumed = run(trident, ranks, layout + ["--load", tag + "_async", "--ckpt-step", "4",
                                                "--metrics-file", tag + "_resumed.jsonl"])
        rows = losses(tag + "_resumed.jsonl")
        check(resumed.returncode == 0 and sorted(rows) == list(range(5, 13)) and
              all(rows[i] == reference[i] for i in rows),
              f"{label}: resumed from the asynchronous checkpoint of iteration 4, losses and grad "
              f"norms 5-12 bit-identical to the uninterrupted run")


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline and not predicate():
        time.sleep(0.01)
    return predicate()


def killed_while_writing(trident, tmp, check, label, ranks, layout):
    """Rank 0's writer stalls inside the second save (iteration 6); kill -9 once its file is
    being written (created, the header written; a file this small reaches the disk only at
    the end, in O_DIRECT blocks) and training has gone on to iteration 8."""
    tag = os.path.join(tmp, f"kill{ranks}")
    ckpt, metrics = tag + "_ckpt", tag + ".jsonl"
    proc = subprocess.Popen(command(trident, ranks, layout + [
        "--save", ckpt, "--save-interval", "3", "--async-save", "--inject-fault-save", "2",
        "--inject-fault-save-point", "stall-write", "--metrics-file", metrics]),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=MPI_ENV,
        start_new_session=True)
    partial = os.path.join(ckpt, "iter_0000006.tmp", "model_tp0_pp0.safetensors.tmp")
    stalled = wait_for(lambda: os.path.exists(partial) and max(losses(metrics), default=0) >= 8, 60)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    latest = open(os.path.join(ckpt, "latest")).read().strip()
    check(stalled and latest == "iter_0000003" and not os.path.exists(os.path.join(ckpt, "iter_0000006")),
          f"{label}: killed -9 with rank 0's write of iteration 6 under way and training at "
          f"iteration {max(losses(metrics), default=0)}: `latest` still names iter_0000003")
    reference = losses(os.path.join(tmp, ("one_process" if ranks == 1 else "4_ranks_p2_d2") + "_sync.jsonl"))
    resumed = run(trident, ranks, layout + ["--load", ckpt, "--save", ckpt, "--save-interval", "3",
                                            "--async-save", "--metrics-file", tag + "_resumed.jsonl"])
    rows = losses(tag + "_resumed.jsonl")
    check(resumed.returncode == 0 and sorted(rows) == list(range(4, 13)) and
          all(rows[i] == reference[i] for i in rows) and
          not os.path.exists(os.path.join(ckpt, "iter_0000006.tmp")) and
          open(os.path.join(ckpt, "latest")).read().strip() == "iter_0000012",
          f"{label}: iter_0000003 loads and the run resumes bit for bit to the end (the "
          f"unfinished iter_0000006.tmp tidied away)")


def failed_write(trident, tmp, check, label, ranks, layout):
    ckpt = os.path.join(tmp, f"fail{ranks}")
    out = run(trident, ranks, layout + ["--save", ckpt, "--save-interval", "3", "--async-save",
                                        "--inject-fault-save", "2", "--inject-fault-save-point",
                                        "write-error", "--metrics-file", ckpt + ".jsonl"])
    # The last writer of the last (t, p): with the distributed optimizer every data-parallel
    # rank writes its shard, and the last one fails: t = 0, d = 1, p = 1 is world rank 3 (t
    # fastest, then d); data-parallel rank 0 then gives up waiting for its pieces.
    writer = "3" if ranks == 4 else "0"
    latest = open(os.path.join(ckpt, "latest")).read().strip()
    check(out.returncode not in (0, 2) and latest == "iter_0000003" and
          f"checkpoint iter_0000006 was not written: the background write failed on world rank "
          f"{writer}" in out.stderr and
          (ranks > 1 or "injected failure writing the checkpoint" in out.stderr) and
          max(losses(ckpt + ".jsonl"), default=0) < 12,
          f"{label}: a background write failing on world rank {writer} fails the run at the "
          f"next save (exit {out.returncode}), nothing committed after iter_0000003")


def main():
    trident = sys.argv[1]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        resumes_exactly(trident, tmp, check)
        for label, ranks, layout in LAYOUTS[:2]:
            killed_while_writing(trident, tmp, check, label, ranks, layout)
            failed_write(trident, tmp, check, label, ranks, layout)
        out = run(trident, 1, ["--async-save", "--global-batch-size", "4"])
        check(out.returncode == 2 and "--async-save needs --save" in out.stderr,
              "--async-save without --save: exit 2")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
