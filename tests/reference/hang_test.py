#!/usr/bin/python3
"""Hang diagnostics (--distributed-timeout-minutes): a rank that stops (SIGSTOP), a rank that
loops forever, and a network link cut between two namespace hosts must each end the job
within the timeout + 30 s, with a message naming the operation, the group, the iteration,
the waiting ranks and the ranks that never arrived. The timeout is 0.1 minutes (6 s). The
cut-link case needs root and network namespaces (scripts/cluster/hosts.sh); the hosts are
removed even when the test fails.
Usage: hang_test.py TRIDENT"""
import os
import re
import subprocess
import sys
import threading
import time

from parity import MPI_ENV, Checks

TIMEOUT_MIN = 0.1
BOUND_S = TIMEOUT_MIN * 60 + 30
CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster")
ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--lr", "1e-3", "--log-interval", "1", "--eval-iters", "0",
        "--peak-tflops", "1", "--threads", "1", "--distributed-timeout-minutes", str(TIMEOUT_MIN)]
check = Checks()


def run_until_end(cmd, on_line=None):
    """Runs cmd; on_line(line) sees stdout as it comes and returns True at the fault. Returns
    (code, stdout, stderr, seconds from the fault to the end). A job still running
    BOUND_S + 60 s after the fault is ended (and fails the bound)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=MPI_ENV)
    out, err, fault = [], [], []

    def read_stdout():
        for line in proc.stdout:
            out.append(line)
            if not fault and on_line and on_line(line):
                fault.append(time.monotonic())
    readers = [threading.Thread(target=read_stdout),
               threading.Thread(target=lambda: err.extend(proc.stderr))]
    for r in readers:
        r.start()
    started = time.monotonic()
    while proc.poll() is None:
        time.sleep(0.2)
        since = time.monotonic() - (fault[0] if fault else started)
        if since > BOUND_S + 60 + (0 if fault else 120):
            err.append("\n(test: the job did not end; terminated)")
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            break
    ended = time.monotonic()
    proc.wait()
    for r in readers:
        r.join(10)
    return proc.returncode, "".join(out), "".join(err), ended - (fault[0] if fault else ended)


def logged(iteration):
    return lambda line: re.match(rf"\s*iteration\s+{iteration}/", line) is not None


def expect_diagnosis(name, code, err, seconds, group, missing):
    report = err[err.find("hang:"):] if "hang:" in err else err[-2000:]
    check(code != 0 and "hang: rank" in err, f"{name}: the job ended (exit {code}) with a hang report")
    check(re.search(rf"(of|over) the ({group}) group", report) is not None,
          f"{name}: names the group ({group})")
    check(re.search(r"at iteration \d+", report) is not None, f"{name}: names the iteration")
    check(re.search(r"waiting: rank \d+", report) is not None, f"{name}: names the waiting ranks")
    # The silent rank never arrived, or is where the chain of waits ends (a rank waiting for a
    # rank that waits for it)
    check(re.search(rf"(never arrived|silent)[^\n]*{missing}", report) is not None,
          f"{name}: names {missing} as never arrived or silent")
    check(seconds <= BOUND_S, f"{name}: ended {seconds:.1f} s after the fault (bound {BOUND_S:.0f} s)")
    print("     " + report.strip().replace("\n", "\n     ")[:1500])


def local_case(trident, name, kind, layout, group, missing_rank):
    cmd = (["mpirun", "--oversubscribe", "-np", "4", trident, "train"] + ARGS + layout +
           ["--train-iters", "1000", "--inject-fault-iteration", "3",
            "--inject-fault-rank", str(missing_rank), "--inject-fault-kind", kind])
    code, _, err, seconds = run_until_end(cmd, logged(2))
    expect_diagnosis(name, code, err, seconds, group, f"rank {missing_rank}@")


def cut_link_case(trident):
    hosts = os.path.join(CLUSTER, "hosts.sh")
    if os.geteuid() != 0 or subprocess.run(["bash", hosts, "create", "2"]).returncode != 0:
        check(False, "cut link: needs root to create network namespaces")
        return
    try:
        def cut(line):
            if logged(3)(line):
                subprocess.run(["bash", hosts, "cut", "trident-h1"], check=True)
                return True
            return False
        # A shorter timeout (3 s) here: mpirun also notices the cut (its daemon's TCP link
        # gives up after tcp_retries2, ~13 s) and ends the job with its own message; the
        # watchdog must report first.
        args = [a if a != str(TIMEOUT_MIN) else str(TIMEOUT_MIN / 2) for a in ARGS]
        cmd = ([os.path.join(CLUSTER, "launch.sh"), "-np", "4", trident, "train"] + args +
               ["--tensor-model-parallel-size", "2", "--train-iters", "1000"])
        code, _, err, seconds = run_until_end(cmd, cut)
        expect_diagnosis("cut link", code, err, seconds, "data", "rank [23]@trident-h1")
        check("no rank on host trident-h1 answered" in err, "cut link: names the silent host")
    finally:
        subprocess.run(["bash", hosts, "destroy"])


def main():
    trident = sys.argv[1]
    local_case(trident, "SIGSTOP", "stop", ["--tensor-model-parallel-size", "2"], "tensor", 1)
    # rank 0 waits for rank 2's backward (pipeline), ranks 1 and 3 for gradients (data)
    local_case(trident, "endless loop", "spin", ["--pipeline-model-parallel-size", "2"],
               "pipeline|data", 2)
    cut_link_case(trident)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
