#!/usr/bin/python3
"""The memory check before allocation (issue 39, item 2): a 9.9B-parameter model on this
machine is refused within 5 s with exit code 2, needed vs available GiB and what would fit,
nothing written; the needed GiB is at least Megatron's 16 bytes per parameter (fp32
weights, gradients and Adam moments, counted here by hand) and equals the plan printed
with the refusal; the available GiB is /proc/meminfo's MemAvailable (read here) over the
ranks on the node; under mpirun -np 2 both ranks exit 2 with one report; gpt-tiny is
accepted, its check equal to the plan it then allocates, and trains; --no-memory-check
skips the check.
Usage: memory_check_test.py /path/to/trident
"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import MPI_ENV, Checks  # noqa: E402

GIB = 1 << 30
# 48 layers, h 4096, 32 heads, seq 2048, GPT-2's vocabulary padded to 50304 (Megatron's
# multiple of 128), learned positions, tied output layer: Megatron's parameter count.
BIG = ["--num-layers", "48", "--hidden-size", "4096", "--num-attention-heads", "32",
       "--seq-length", "2048"]
H, L, V, S = 4096, 48, 50304, 2048
BIG_PARAMETERS = V * H + S * H + L * (12 * H * H + 13 * H) + 2 * H
COMMON = ["--mock-data", "--train-iters", "2", "--eval-iters", "1", "--peak-tflops", "1",
          "--threads", "1", "--log-interval", "1"]


def mem_available():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def gib(text):
    """'12.34 GiB' / '567.8 MiB' / '9.0 KiB' -> GiB."""
    value, unit = text.split()
    return float(value) * {"GiB": 1, "MiB": 1 / 1024, "KiB": 1 / 1024 ** 2}[unit]


SIZE = r"([0-9.]+ [KMG]iB)"


def plan_totals(stdout):
    """The totals of every memory plan printed (each '  total X')."""
    return [gib(m) for m in re.findall(r"^  total " + SIZE + "$", stdout, re.M)]


def run(cmd, env=None, timeout=120):
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return p, time.monotonic() - start


def check_refusal(check, trident, tmp):
    save = os.path.join(tmp, "ckpt")
    p, seconds = run([trident, "train"] + BIG + COMMON + ["--save", save])
    print(f"9.9B model ({BIG_PARAMETERS / 1e9:.2f}B parameters): exit {p.returncode} in "
          f"{seconds:.2f} s\n{p.stderr.strip()}")
    check(p.returncode == 2, "a 9.9B model on this machine: exit code 2")
    check(seconds < 5, f"refused within 5 s ({seconds:.2f} s)")
    check(not os.path.exists(save), "nothing written: no --save directory")
    check("bad_alloc" not in p.stderr, "no std::bad_alloc")
    check(f"{BIG_PARAMETERS} parameters" in p.stdout, "the layout counts Megatron's parameters")
    m = re.search(r"needs " + SIZE + r" per rank, " + SIZE + r" available \(1 rank on this node\)",
                  p.stderr)
    check(m, "the message names needed vs available GiB and the ranks on the node")
    if not m:
        return
    needed, available = gib(m.group(1)), gib(m.group(2))
    check(needed >= 16 * BIG_PARAMETERS / GIB,
          f"needs {needed:.2f} GiB >= 16 bytes x parameters = {16 * BIG_PARAMETERS / GIB:.2f}")
    totals = plan_totals(p.stdout)
    check(totals and abs(sum(totals) - needed) <= 0.01 * len(totals),
          f"needed = the printed plan's total ({' + '.join(f'{t:.2f}' for t in totals)})")
    check(abs(available + 0.25 - mem_available() / GIB) < 1,
          f"available {available:.2f} GiB = MemAvailable {mem_available() / GIB:.2f} - 0.25")
    remedies = re.findall(r"^  (--.*): " + SIZE + " per rank$", p.stderr, re.M)
    check(remedies, f"{len(remedies)} remedies listed")
    check(all(gib(size) <= available for _, size in remedies), "each remedy fits what is available")
    check(any("--bf16" in flags or "--pipeline-model-parallel-size" in flags
              for flags, _ in remedies), "the remedies name a flag to change")


def check_mpi_refusal(check, trident):
    p, seconds = run(["mpirun", "--oversubscribe", "-np", "2", trident, "train"] + BIG + COMMON,
                     env=MPI_ENV, timeout=120)
    print(f"mpirun -np 2: exit {p.returncode} in {seconds:.2f} s")
    check(p.returncode == 2, "under mpirun -np 2 the job exits 2")
    check(p.stderr.count("needs ") == 1, "one report, by rank 0")
    check("MPI_ABORT" not in p.stderr and "MPI_Abort" not in p.stderr, "no rank aborted the job")
    m = re.search(SIZE + r" available \(2 ranks on this node\)", p.stderr)
    check(m and abs(gib(m.group(1)) + 0.25 - mem_available() / GIB / 2) < 1,
          "the node's MemAvailable is split between its 2 ranks")


def check_accepted(check, trident, tmp):
    save = os.path.join(tmp, "tiny")
    # gpt-tiny's shape on shorter sequences, so that its two steps are quick.
    tiny = ["--model-preset", "gpt-tiny", "--seq-length", "64", "--micro-batch-size", "1"]
    p, _ = run([trident, "train", "--save", save] + tiny + COMMON, timeout=600)
    check(p.returncode == 0, f"gpt-tiny trains (exit {p.returncode}) {p.stderr[-300:]}")
    m = re.search(r"memory check: needs " + SIZE + r" per rank .*: fits", p.stdout)
    check(m, "its memory check fits")
    totals = plan_totals(p.stdout)
    if m:
        check(totals and abs(sum(totals) - gib(m.group(1))) <= 0.05 * (len(totals) + 1) / 1024,
              f"the check's {m.group(1)} = the allocated plans' totals {totals}")
    check(re.search(r"iteration\s+2/", p.stdout), "it reaches iteration 2")
    check(os.path.isdir(save), "and saves its checkpoint")
    p, _ = run([trident, "train", "--no-memory-check", "--train-iters", "1"] + tiny + COMMON[:1] +
               COMMON[3:], timeout=600)
    check(p.returncode == 0 and "memory check: off (--no-memory-check)" in p.stdout,
          "--no-memory-check skips the check")


def main():
    trident = sys.argv[1]
    check = Checks()
    if mem_available() > 120 * GIB:
        print("this machine has more than 120 GiB available: a 9.9B model would fit")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            check_refusal(check, trident, tmp)
        check_mpi_refusal(check, trident)
    with tempfile.TemporaryDirectory() as tmp:
        check_accepted(check, trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
