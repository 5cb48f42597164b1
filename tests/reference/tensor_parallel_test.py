#!/usr/bin/python3
"""Tensor parallelism over MPI (mpirun, oversubscribed):
  * parity: t = 2 and 4 train the one-process model (losses, grad norms, final weights),
    with a vocabulary not divisible by t (301) and heads = t;
  * collective accounting: each extra layer adds 2 + 2 all-reduces of b*s*h floats per
    micro-batch (Megatron-LM, section 3);
  * replicated parameters stay bit-identical on every tensor-parallel rank;
  * a failing rank (an injected error, or kill -9) ends the whole job within seconds.
Usage: tensor_parallel_test.py TRIDENT"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks, run_parity

TINY = ["--mock-data", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
        "--vocab-size", "301", "--micro-batch-size", "4", "--global-batch-size", "8",
        "--lr", "1e-3", "--lr-warmup-iters", "2", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "5"]
check = Checks()


def mpirun(ranks, args, **kw):
    return ["mpirun", "--oversubscribe", "-np", str(ranks)] + args + ["--threads", "1"]


def collectives(trident, layers, tmp):
    metrics = os.path.join(tmp, f"c{layers}.jsonl")
    cmd = mpirun(2, [trident, "train"] + TINY + ["--num-layers", str(layers), "--train-iters", "3",
                                                 "--log-interval", "3", "--tensor-model-parallel-size", "2",
                                                 "--eval-interval", "2", "--metrics-file", metrics])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=MPI_ENV, timeout=120)
    rows = [json.loads(line) for line in open(metrics)]
    last = [r for r in rows if "collectives" in r][-1]
    return last["collectives"]["tensor"]["all-reduce"], last["iterations"], out.stdout


def main():
    trident = sys.argv[1]
    failed = run_parity(trident, TINY + ["--num-layers", "2", "--train-iters", "20", "--log-interval", "1"],
                        [("t=2, logits in 3 row chunks",
                          ["--tensor-model-parallel-size", "2", "--logits-chunk-rows", "48"], 2),
                         ("t=4", ["--tensor-model-parallel-size", "4"], 4)])
    check.add_parity(failed, 2)

    with tempfile.TemporaryDirectory() as tmp:
        one, iters, _ = collectives(trident, 1, tmp)
        two, _, log = collectives(trident, 2, tmp)
        check("replicated parameters across tensor-parallel ranks: max |difference| 0\n" in log,
              "LayerNorm, row-parallel biases and position embeddings stay identical across ranks")
        micro_batches, b, s, h = 2, 4, 32, 64
        calls = (two["calls"] - one["calls"]) / (iters * micro_batches)
        size = (two["bytes"] - one["bytes"]) / (iters * micro_batches)
        check(calls == 4 and size == 4 * b * s * h * 4,
              f"one more layer adds {calls:g} all-reduces and {size:g} bytes per micro-batch "
              f"(paper: 2 forward + 2 backward of b*s*h floats = {4 * b * s * h * 4} bytes)")
        # 1 layer: 4 per layer + embedding 1 + output layer 1 + cross-entropy 3, plus 1 for the norm
        per_iter = one["calls"] / iters
        check(per_iter == micro_batches * (4 + 5) + 1, f"{per_iter:g} all-reduces per iteration with 1 layer")

    long_run = [trident, "train"] + TINY + ["--num-layers", "2", "--train-iters", "100000",
                                            "--log-interval", "1000", "--tensor-model-parallel-size", "2"]
    start = time.time()
    out = subprocess.run(mpirun(2, long_run + ["--inject-fault-iteration", "3", "--inject-fault-rank", "1"]),
                         capture_output=True, text=True, env=MPI_ENV, timeout=60)
    check(out.returncode != 0 and "rank 1: error: injected fault at iteration 3" in out.stderr + out.stdout
          and time.time() - start < 20, f"an error on rank 1 ends the job ({time.time() - start:.1f} s)")

    proc = subprocess.Popen(mpirun(2, long_run), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=MPI_ENV, start_new_session=True)
    victim = None
    for _ in range(100):  # find a rank once training runs
        time.sleep(0.1)
        kids = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "trident"], capture_output=True, text=True)
        pids = kids.stdout.split()
        if len(pids) == 2:
            victim = int(pids[1])
            break
    time.sleep(1.0)
    killed = time.time()
    if victim:
        os.kill(victim, signal.SIGKILL)
    try:
        proc.wait(timeout=30)
        ended = time.time() - killed
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        ended = None
    check(victim is not None and ended is not None and proc.returncode != 0,
          f"kill -9 of one rank ends the job ({'never' if ended is None else f'{ended:.1f} s'})")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
