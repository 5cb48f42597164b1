#!/usr/bin/python3
"""Absurd model sizes are refused before anything is built (issue 40, item 9): each run below
exits 2 with the peak RSS of a program that built nothing (one process, and under mpirun
-np 2 with one report and no abort),
nothing written, with the needed and available memory in GiB and the flags to change. Before,
--num-layers 100000 took 14 s to refuse, and --num-layers 200000000 and --micro-batch-size
10^9 grew to 24 GB and were killed while sizing memory plans.
The needed GiB is checked against Megatron's parameter count, written out here from the
PTD-P paper (Narayanan et al. 2021, section 5.1): P = 12 l h^2 (1 + 13/(12 h) + (V + s)/(12 l h))
(plus the final LayerNorm's 2 h), at 16 bytes per parameter for fp32 weights, gradients and
Adam's two moments: the message's figure is at least that. Models whose count overflows a
64-bit integer (l = 1000, h = 5 x 10^8: 3 x 10^21 parameters) are refused the same way.
Usage: size_refusals_test.py TRIDENT"""
import os
import re
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks

GIB = 1 << 30
V, S = 50304, 128  # GPT-2's vocabulary padded to a multiple of 128; the default --seq-length
COMMON = ["--mock-data", "--train-iters", "2", "--threads", "1", "--peak-tflops", "1"]
SIZE = r"([0-9.]+) GiB"
RSS_LIMIT_MIB = 256


def megatron_parameters(l, h, v=V, s=S):
    return 12 * l * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l * h)) + 2 * h


def run(cmd, cwd):
    """The finished process, its wall time, and the peak RSS in MiB of it and every descendant
    it waited for (wait4's rusage; mpirun waits for its ranks)."""
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=MPI_ENV, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())
    return done, time.monotonic() - start, usage.ru_maxrss / 1024


def refused(check, trident, tmp, name, flags, layers, hidden, ranks=1):
    save = os.path.join(tmp, "ckpt")
    cmd = [trident, "train"] + COMMON + flags + ["--save", save]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--allow-run-as-root", "--oversubscribe"] + cmd
    p, seconds, peak_mib = run(cmd, tmp)
    # Refused before anything is built: the peak RSS is the program's own, not a model's or a
    # memory plan's (these sizes once grew to 24 GB). The wall-time limit is loose on purpose:
    # CI runs two tests at a time on 2 cores, and mpirun itself takes a second or two to start.
    limit = 20 if ranks == 1 else 40
    check(p.returncode == 2 and seconds < limit and peak_mib < RSS_LIMIT_MIB,
          f"{name}: exit {p.returncode} in {seconds:.2f} s (< {limit} s), peak RSS "
          f"{peak_mib:.0f} MiB (< {RSS_LIMIT_MIB})" +
          ("" if p.returncode == 2 else "\n" + (p.stdout + p.stderr)[-800:]))
    check(not os.path.exists(save) and os.listdir(tmp) == [], f"{name}: nothing written")
    m = re.search(r"needs? (?:at least )?" + SIZE + " per rank", p.stderr)
    # The node's memory, or, beyond the address space, the most a process can address.
    available = re.search(SIZE + r" available|can address \(" + SIZE + r"\)", p.stderr)
    named = m and available and f"--num-layers {layers} --hidden-size {hidden}" in p.stderr
    check(named, f"{name}: needed and available GiB, the flags named" +
          ("" if named else ": " + p.stderr.strip()[-400:]))
    if m:
        floor = 16 * megatron_parameters(layers, hidden) / GIB
        check(float(m.group(1)) >= floor * (1 - 1e-6),
              f"{name}: needs {float(m.group(1)):.6g} GiB >= 16 bytes x Megatron's "
              f"P = {floor:.6g} GiB")
    if ranks > 1:
        check(p.stderr.count("trident train:") == 1 and "MPI_ABORT" not in p.stderr,
              f"{name}: one report, no rank aborted")


def main():
    trident = sys.argv[1]
    check = Checks()
    cases = [
        ("--num-layers 100000", ["--num-layers", "100000"], 100000, 128),  # h: the default
        ("--hidden-size 1000000", ["--hidden-size", "1000000", "--num-attention-heads", "1"],
         2, 1000000),
        ("--num-layers 100000 --hidden-size 100000",
         ["--num-layers", "100000", "--hidden-size", "100000", "--num-attention-heads", "1"],
         100000, 100000),
        ("--num-layers 200000000 --hidden-size 64",
         ["--num-layers", "200000000", "--hidden-size", "64", "--num-attention-heads", "1"],
         200000000, 64),
        ("--num-layers 100000000 --hidden-size 4 (what would fit not searched)",
         ["--num-layers", "100000000", "--hidden-size", "4", "--num-attention-heads", "1"],
         100000000, 4),
        ("--micro-batch-size 10^9",
         ["--micro-batch-size", "1000000000", "--global-batch-size", "1000000000"], 2, 128),
        ("--num-layers 1000 --hidden-size 500000000 (beyond a 64-bit count)",
         ["--num-layers", "1000", "--hidden-size", "500000000", "--num-attention-heads", "1"],
         1000, 500000000),
    ]
    for name, flags, layers, hidden in cases:
        with tempfile.TemporaryDirectory() as tmp:
            refused(check, trident, tmp, name, flags, layers, hidden)
    for name, flags, layers, hidden in cases[:4:3] + cases[2:3]:
        with tempfile.TemporaryDirectory() as tmp:
            refused(check, trident, tmp, "mpirun -np 2, " + name, flags, layers, hidden, ranks=2)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
