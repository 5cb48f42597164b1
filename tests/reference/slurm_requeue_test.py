#!/usr/bin/python3
"""Long runs on Slurm come back by themselves (scripts/cluster/train.sbatch): on a real Slurm
(scripts/cluster/slurm.sh; root) a (t, p, d) = (2, 2, 2) job of 8 ranks over 2 hosts is
- requeued by `scontrol requeue` while it trains: every rank gets SIGTERM, saves and exits 0,
  Slurm puts the job back, and its second start resumes from --save by itself;
- sent the time limit's SIGUSR1 (`scancel --signal=USR1 --batch`, what --signal=B:USR1@120
  sends) while it saves asynchronously every 5 iterations (--async-save): the script passes
  it to the ranks, they save and exit 0, the script requeues the job, and it resumes;
and each finishes with every loss, grad norm and learning rate bit-identical to an
uninterrupted job of the same layout. (Slurm holds a requeued job 120 s before it may start
again; the test moves its start time to 5 s after the requeue.) Slurm and the hosts are stopped even on failure.
Usage: slurm_requeue_test.py TRIDENT"""
import glob
import os
import re
import subprocess
import sys
import time

from parity import Checks, metrics_by_iteration
from slurm_cluster import SBATCH, SlurmCluster, available

ITERS = 28  # an interruption after iteration 8 still leaves most of the run to resume
ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--train-iters", str(ITERS), "--lr", "1e-3",
        "--lr-warmup-iters", "2", "--log-interval", "1", "--eval-iters", "1", "--peak-tflops", "1",
        "--seed", "13", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
        "--threads", "1", "--inject-slow-rank", "0", "--inject-slow-forward-ms", "20"]
check = Checks()


rows = metrics_by_iteration


def sbatch(cluster, name, extra, wait):
    out = os.path.join(cluster.work, f"{name}.out")
    cmd = ["sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=4", f"--output={out}"] + \
          (["--wait"] if wait else []) + [SBATCH, cluster.trident, "train"] + ARGS + \
          ["--metrics-file", os.path.join(cluster.work, f"{name}.jsonl")] + extra
    done = subprocess.run(cmd, capture_output=True, text=True, env=cluster.env, timeout=300)
    return done.returncode, done.stdout.strip().split(";")[0], out


def job_field(env, job, field):
    text = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True,
                          env=env).stdout
    m = re.search(rf"\b{field}=(\S+)", text)
    return m.group(1) if m else None


def slurm_logs(job):
    """What slurmctld and the slurmds said of `job`, for a failure's diagnosis."""
    lines = []
    for log in sorted(glob.glob("/var/tmp/trident-slurm/*.log")):
        lines += [os.path.basename(log) + ": " + l.rstrip() for l in open(log, errors="replace")
                  if re.search(rf"\b(JobId=|job_id=|job |StepId=){job}\b", l)]
    return "\n".join(lines[-60:])


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def interrupted_job(cluster, reference, name, interrupt, how, saving=()):
    """Submits a saving job, interrupts it once it trained a few steps, and checks that it
    came back, resumed and ended with the uninterrupted losses."""
    env, work = cluster.env, cluster.work
    metrics, save = os.path.join(work, f"{name}.jsonl"), os.path.join(work, f"{name}_ckpt")
    code, job, out = sbatch(cluster, name, ["--save", save] + list(saving), wait=False)
    if code != 0 or not wait_for(lambda: max(rows(metrics), default=0) >= 8, 120):
        check(False, f"{name}: job {job} did not start training")
        return
    at = max(rows(metrics))
    subprocess.run(interrupt + [job], capture_output=True, env=env)
    # Slurm holds a requeued job for 120 s (its BeginTime); the test lets it start after 5 s
    # (sooner, the nodes may still be revoking its first start's credential, and the batch
    # launch fails: "Job credential revoked").
    requeued = wait_for(lambda: job_field(env, job, "Restarts") == "1", 60)
    pending = lambda: (job_field(env, job, "JobState"), job_field(env, job, "Reason")) == \
        ("PENDING", "BeginTime")
    if requeued and wait_for(pending, 30):
        subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now+5"], env=env)
    done = wait_for(lambda: job_field(env, job, "JobState") in ("COMPLETED", "FAILED", "CANCELLED"), 240)
    log = open(out).read() if os.path.exists(out) else ""
    stop = re.search(r"stopping after iteration (\d+)", log)
    state, restarts = job_field(env, job, "JobState"), job_field(env, job, "Restarts")
    check(done and state == "COMPLETED" and restarts == "1" and stop and
          at <= int(stop.group(1)) < ITERS and "--load defaults to --save" in log,
          f"{name}: {how} after iteration {at}; the ranks stopped after iteration "
          f"{stop.group(1) if stop else None}, the job came back (restarts {restarts}), resumed "
          f"and ended {state}" + ("" if done and state == "COMPLETED" else "\n" + log[-3000:]))
    if not (done and state == "COMPLETED"):
        print(slurm_logs(job))
    got = rows(metrics)
    check(got == reference, f"{name}: {len(got)} iterations, every loss, grad norm and lr "
                            f"{'bit-identical' if got == reference else 'DIFFER'} to the uninterrupted job")
    return log


def main():
    trident = os.path.abspath(sys.argv[1])
    if not available():
        print("needs root and Debian's slurmctld/slurmd/munge (scripts/setup.sh installs them)")
        return 77
    with SlurmCluster(trident, prefix="slurm_requeue_test_") as cluster:
        check(cluster.env is not None, "Slurm starts on 2 namespace hosts" +
              ("" if cluster.env else ": " + cluster.error))
        if cluster.env is None:
            return check.summary()
        code, job, out = sbatch(cluster, "uninterrupted", [], wait=True)
        reference = rows(os.path.join(cluster.work, "uninterrupted.jsonl"))
        check(code == 0 and len(reference) == ITERS, f"uninterrupted job {job}: exit {code}, "
                                                     f"{len(reference)} iterations")
        if code != 0:
            print(open(out).read()[-3000:] if os.path.exists(out) else "")
            return check.summary()
        interrupted_job(cluster, reference, "requeued", ["scontrol", "requeue"], "scontrol requeue")
        log = interrupted_job(cluster, reference, "time_limit", ["scancel", "--signal=USR1", "--batch"],
                              "the time limit's SIGUSR1 to the batch script",
                              ["--async-save", "--save-interval", "5"])
        check(log is not None and "requeueing job" in log,
              "time_limit: the batch script requeued the job itself")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
