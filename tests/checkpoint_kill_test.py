#!/usr/bin/python3
"""Crash-safety: a 2-rank (t = 2) training run is killed again and again — once inside a
save (after its files are written, before the commit), then with kill -9 of a rank at
random moments — and resumed each time with --load; every logged loss and the final
weights must equal the uninterrupted run's bit for bit.
Usage: checkpoint_kill_test.py TRIDENT"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, read_safetensors

ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "4",
        "--seq-length", "64", "--vocab-size", "512", "--micro-batch-size", "4",
        "--global-batch-size", "8", "--train-iters", "40", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--eval-interval", "10", "--peak-tflops", "1",
        "--seed", "31", "--tensor-model-parallel-size", "2", "--threads", "1"]


def command(trident, extra):
    return ["mpirun", "--oversubscribe", "-np", "2", trident, "train"] + ARGS + extra


def losses(path):
    if not os.path.exists(path):
        return {}
    return {r["iteration"]: (r["loss"], r["grad_norm"]) for r in map(json.loads, open(path)) if "loss" in r}


def main():
    trident = sys.argv[1]
    random.seed(7)
    with tempfile.TemporaryDirectory() as tmp:
        ref = subprocess.run(command(trident, ["--metrics-file", f"{tmp}/ref.jsonl", "--save-hf", f"{tmp}/ref_hf"]),
                             capture_output=True, env=MPI_ENV, timeout=300)
        if ref.returncode != 0:
            print("FAIL uninterrupted run\n0 passed, 1 failed")
            return 1
        ckpt, seen, attempts, kills, completed = f"{tmp}/ckpt", {}, 0, 0, False
        while attempts < 15 and not completed:
            attempts += 1
            extra = ["--save", ckpt, "--save-interval", "3", "--load", ckpt,
                     "--metrics-file", f"{tmp}/run{attempts}.jsonl", "--save-hf", f"{tmp}/final_hf"]
            if attempts == 1:
                extra += ["--inject-fault-save", "2"]  # dies inside the save at iteration 6
            proc = subprocess.Popen(command(trident, extra), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=MPI_ENV, start_new_session=True)
            if attempts > 1 and attempts < 6:
                time.sleep(random.uniform(0.4, 1.2))
                kids = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "trident"],
                                      capture_output=True, text=True).stdout.split()
                if kids:
                    try:
                        os.kill(int(random.choice(kids)), signal.SIGKILL)
                        kills += 1
                    except ProcessLookupError:  # that rank had already finished
                        pass
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                print("FAIL a run hung after a rank was killed\n0 passed, 1 failed")
                return 1
            seen.update(losses(f"{tmp}/run{attempts}.jsonl"))
            completed = proc.returncode == 0
        reference = losses(f"{tmp}/ref.jsonl")
        same_losses = completed and seen == reference
        a, b = read_safetensors(f"{tmp}/ref_hf/model.safetensors"), read_safetensors(f"{tmp}/final_hf/model.safetensors") if completed else {}
        same_weights = completed and a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
        ok = same_losses and same_weights and attempts > 2
        print("ok  " if ok else "FAIL",
              f"{attempts} attempts ({kills} kill -9, 1 death inside a save): every logged loss and grad norm "
              f"{'equal' if same_losses else 'DIFFER'}, final weights {'bit-identical' if same_weights else 'DIFFER'}")
        print(f"{int(ok)} passed, {int(not ok)} failed")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
