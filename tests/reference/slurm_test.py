#!/usr/bin/python3
"""Slurm: configures and starts a real Slurm (munge, slurmctld, one slurmd per namespace host:
scripts/cluster/slurm.sh; root), submits scripts/cluster/train.sbatch with sbatch, and checks
that the PTD-P job — (t, p, d) = (2, 2, 2), 8 ranks over 2 hosts, started by srun through
PMIx — trains the one-process model (losses, grad norms and weights within 1e-5) and that
its grid names both hosts. Slurm and the hosts are stopped and removed even on failure.
Usage: slurm_test.py TRIDENT"""
import json
import os
import subprocess
import sys

from parity import Checks, compare, read_safetensors, train
from slurm_cluster import SBATCH, SlurmCluster, available

ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--train-iters", "10", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "13"]
LAYOUT = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--threads", "1"]
check = Checks()


def submit(cluster):
    """sbatch --wait; returns (exit code, job output, metrics file, model directory)."""
    work = cluster.work
    metrics, model = os.path.join(work, "slurm.jsonl"), os.path.join(work, "slurm_model")
    out = os.path.join(work, "job.out")
    cmd = ["sbatch", "--wait", "--nodes=2", "--ntasks-per-node=4", f"--output={out}", SBATCH,
           cluster.trident, "train"] + ARGS + LAYOUT + ["--metrics-file", metrics, "--save-hf", model]
    done = subprocess.run(cmd, capture_output=True, text=True, env=cluster.env, timeout=240)
    log = open(out).read() if os.path.exists(out) else ""
    return done.returncode, done.stdout + done.stderr + log, metrics, model


def main():
    trident = os.path.abspath(sys.argv[1])
    if not available():
        print("needs root and Debian's slurmctld/slurmd/munge (scripts/setup.sh installs them)")
        return 77
    with SlurmCluster(trident) as cluster:
        check(cluster.env is not None, "Slurm starts on 2 namespace hosts" +
              ("" if cluster.env else ": " + cluster.error))
        if cluster.env is None:
            return check.summary()
        code, log, metrics, model = submit(cluster)
        check(code == 0, f"sbatch --wait: job exit {code}" + ("" if code == 0 else "\n" + log[-3000:]))
        grid = [l for l in log.splitlines() if "nodes:" in l]
        check(grid and "0@trident-h0" in grid[0] and "7@trident-h1" in grid[0],
              f"the grid names the hosts: {grid[0].strip() if grid else 'no grid printed'}")
        if code == 0:
            rows = [r for r in map(json.loads, open(metrics)) if "run" not in r]
            reference = train(trident, ARGS, 1, cluster.work, "reference")
            summary, bad = compare(reference, (rows, read_safetensors(
                os.path.join(model, "model.safetensors"))), 1e-5)
            check(not bad, f"(t, p, d) = (2, 2, 2) under Slurm vs one process: {summary} {bad}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
