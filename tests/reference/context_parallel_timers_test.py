#!/usr/bin/python3
"""What --timing-log-level 2 shows of context parallelism, against the ring's traffic worked
by hand:
  * at c = 2 (the ring) the context group's rows (context-send, context-recv) and the ring's
    own timers (cp-ring-compute, cp-ring-wait, cp-ring-transfer) appear, and the overlap
    fraction printed for them lies in [0, 1]; at c = 1 none of them do; at c = 2 with a2a the
    context-all-to-all row appears and no ring rows;
  * the bytes the context group's counters saw sent (the end-of-run collectives in the
    metrics file) equal the ring's messages counted from the algorithm, at c = 2 and c = 4:
    per layer and micro-batch, the forward passes K and V c - 1 times (2(c - 1) blocks), the
    backward passes them again (2(c - 1)) and each block's d K and d V c times (2c), a block
    being micro-batch x heads x (seq / c) x head dim floats; receives equal sends.
Usage: context_parallel_timers_test.py TRIDENT"""
import json
import os
import re
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks

LAYERS, HEADS, HIDDEN, SEQ, MICRO, GLOBAL, ITERS = 2, 4, 64, 32, 2, 4, 3
TINY = ["--mock-data", "--hidden-size", str(HIDDEN), "--num-attention-heads", str(HEADS),
        "--seq-length", str(SEQ), "--vocab-size", "301", "--micro-batch-size", str(MICRO),
        "--global-batch-size", str(GLOBAL), "--lr", "1e-3", "--eval-iters", "0",
        "--peak-tflops", "1", "--seed", "5", "--log-interval", "1", "--num-layers", str(LAYERS),
        "--train-iters", str(ITERS), "--timing-log-level", "2", "--threads", "1"]
RING_ROWS = ["context-send", "context-recv", "cp-ring-compute", "cp-ring-wait",
             "cp-ring-transfer", "cp-ring-overlap"]
check = Checks()


def train(trident, ranks, flags, metrics):
    cmd = [trident, "train"] + TINY + flags + ["--metrics-file", metrics]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    return out.returncode, out.stdout + out.stderr


def timer_rows(log):
    """The timer names printed under '(min, max) time across ranks (ms):'."""
    return set(re.findall(r"^    ([a-z-]+) *: \(", log, re.M))


def ring_bytes_by_hand(c):
    """Bytes a rank sends around the ring in one iteration (one way; it receives as many)."""
    block = MICRO * HEADS * (SEQ // c) * (HIDDEN // HEADS) * 4
    per_layer = 2 * (c - 1) + 2 * (c - 1) + 2 * c  # forward K, V; backward K, V; d K, d V
    micro_batches = GLOBAL // MICRO  # d = 1: every micro-batch on every cp rank
    return per_layer * block * LAYERS * micro_batches


def context_collectives(metrics):
    rows = [json.loads(line) for line in open(metrics)]
    last = [r for r in rows if "collectives" in r][-1]
    return last["collectives"].get("context", {}), last["iterations"]


def rows_at(trident, tmp):
    code, log = train(trident, 2, ["--context-parallel-size", "2"], os.path.join(tmp, "c2.jsonl"))
    rows = timer_rows(log)
    check(code == 0 and all(r in rows for r in RING_ROWS),
          f"c=2 (ring): rows {RING_ROWS} are printed (got {sorted(rows)})")
    fractions = re.findall(r"cp-ring-overlap *: \(([-0-9.e]+), ([-0-9.e]+)\)", log)
    check(len(fractions) == ITERS and all(0 <= float(x) <= 1 for f in fractions for x in f),
          f"the ring's overlap fraction (min, max over ranks) lies in [0, 1]: {fractions}")
    computes = re.findall(r"cp-ring-compute *: \(([0-9.]+), ([0-9.]+)\)", log)
    check(computes and all(float(lo) > 0 for lo, _ in computes),
          f"every rank timed ring compute: {computes}")
    code, log = train(trident, 1, [], os.path.join(tmp, "c1.jsonl"))
    rows = timer_rows(log)
    check(code == 0 and "forward-compute" in rows and
          not any(r.startswith("context-") or r.startswith("cp-ring") for r in rows),
          f"c=1: no context or ring rows (got {sorted(rows)})")
    code, log = train(trident, 2, ["--context-parallel-size", "2", "--cp-comm-type", "a2a"],
                      os.path.join(tmp, "a2a.jsonl"))
    rows = timer_rows(log)
    check(code == 0 and "context-all-to-all" in rows and
          not any(r.startswith("cp-ring") for r in rows),
          f"c=2 a2a: context-all-to-all and no ring rows (got {sorted(rows)})")


def bytes_at(trident, tmp, c):
    metrics = os.path.join(tmp, f"bytes{c}.jsonl")
    code, log = train(trident, c, ["--context-parallel-size", str(c)], metrics)
    if code != 0:
        check(False, f"c={c} trains: {log[-2000:]}")
        return
    context, iterations = context_collectives(metrics)
    sent = context.get("send", {}).get("bytes", 0) / iterations
    received = context.get("recv", {}).get("bytes", 0) / iterations
    want = ring_bytes_by_hand(c)
    check(sent == want and received == want,
          f"c={c}: the context group sent {sent:.0f} and received {received:.0f} bytes per "
          f"iteration; the ring's messages by hand: {want}")


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        rows_at(trident, tmp)
        for c in (2, 4):
            bytes_at(trident, tmp, c)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
