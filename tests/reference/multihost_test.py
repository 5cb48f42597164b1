#!/usr/bin/python3
"""Multi-host runs on network-namespace hosts (scripts/cluster/hosts.sh, launch.sh; root):
(t, d) = (2, 2) and (t, p) = (2, 2) over 2 hosts x 2 ranks train the one-process model
(every step's loss and grad norm and the final weights within 1e-5), the process grid names
each rank's host, shared memory cannot join ranks on different hosts (a run allowed only
shared memory fails to connect them), and a tensor group that would span hosts is refused
unless --allow-tensor-parallel-across-nodes; `trident plan --calibrate` over both hosts measures
a node's ranks and the hosts' link apart (a cluster file of 2 nodes of 2, read back by Python's
tomllib). The hosts are removed even when the test fails.
Usage: multihost_test.py TRIDENT"""
import os
import subprocess
import sys
import tempfile
import tomllib

from parity import MPI_ENV, Checks, compare, train

CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster")
LAUNCH = [os.path.join(CLUSTER, "launch.sh")]
ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--train-iters", "10", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "13"]
LAYOUTS = [("t=2 d=2 across 2 hosts", ["--tensor-model-parallel-size", "2"]),
           ("t=2 p=2 across 2 hosts", ["--tensor-model-parallel-size", "2",
                                       "--pipeline-model-parallel-size", "2"])]
check = Checks()


def parity(trident, tmp):
    reference = train(trident, ARGS, 1, tmp, "reference")
    for name, flags in LAYOUTS:
        logs = []
        try:
            summary, bad = compare(reference, train(trident, ARGS + flags, 4, tmp, name, LAUNCH, logs),
                                   1e-5)
        except RuntimeError as e:
            summary, bad = "run failed", [str(e)[-3000:]]
        check(not bad, f"{name} vs one process: {summary}" + "".join("\n      " + b for b in bad))
        grid = "".join(l for l in logs[0].splitlines(True) if "nodes:" in l) if logs else ""
        check("0@trident-h0 1@trident-h0 2@trident-h1 3@trident-h1" in grid,
              f"{name}: the grid names each rank's host: {grid.strip()}")


def refusals(trident):
    run = lambda cmd, **env: subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                            env=dict(MPI_ENV, **env))
    small = ARGS[:ARGS.index("--train-iters")] + ["--train-iters", "1", "--threads", "1"]
    shm_only = run(LAUNCH + ["-np", "4", trident, "train"] + small, TRIDENT_BTL="vader,self")
    check(shm_only.returncode != 0 and "unable to reach each other" in shm_only.stdout + shm_only.stderr,
          "shared memory alone cannot join ranks on different hosts (they use TCP)")
    spread = LAUNCH + ["--map-by", "node", "-np", "4", trident, "train"] + small + \
        ["--tensor-model-parallel-size", "2"]
    refused = run(spread)
    check(refused.returncode == 2 and "spans nodes" in refused.stderr and
          "--allow-tensor-parallel-across-nodes" in refused.stderr,
          f"a tensor group across hosts is refused: {refused.stderr.strip()[:300]}")
    forced = run(spread + ["--allow-tensor-parallel-across-nodes"])
    check(forced.returncode == 0 and "warning: tensor group starting at rank 0 spans nodes" in forced.stdout,
          "--allow-tensor-parallel-across-nodes runs it, with a warning")


def calibration(trident, tmp):
    out = os.path.join(tmp, "calibrated.toml")
    run = subprocess.run(LAUNCH + ["-np", "4", trident, "plan", "--calibrate", "--calibration-quick",
                                   "--output", out], capture_output=True, text=True, timeout=300,
                         env=MPI_ENV)
    check(run.returncode == 0 and os.path.exists(out),
          f"plan --calibrate runs over 2 hosts ({run.returncode}: {run.stderr.strip()[-300:]})")
    if run.returncode != 0 or not os.path.exists(out):
        return
    with open(out, "rb") as f:
        c = tomllib.load(f)
    node, net = c.get("node", {}), c.get("network", {})
    check(c.get("nodes") == 2 and node.get("devices") == 2,
          f"the cluster file has 2 nodes of 2 devices: nodes {c.get('nodes')}, {node}")
    intra = (node.get("intra_node_latency_us", 0), node.get("intra_node_bandwidth_gbs", 0))
    inter = (net.get("inter_node_latency_us", 0), net.get("inter_node_bandwidth_gbs", 0))
    check(min(intra + inter) > 0 and intra != inter,
          f"intra-node {intra} and inter-node {inter} links (latency us, GB/s) are measured apart")


def main():
    trident = sys.argv[1]
    hosts = os.path.join(CLUSTER, "hosts.sh")
    if os.geteuid() != 0 or subprocess.run(["bash", hosts, "create", "2"]).returncode != 0:
        check(False, "needs root to create network namespaces")
        return check.summary()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            parity(trident, tmp)
            calibration(trident, tmp)
        refusals(trident)
    finally:
        subprocess.run(["bash", hosts, "destroy"])
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
