#!/usr/bin/python3
"""Crash-safety: a 2-rank (t = 2) training run is killed again and again — once inside a
save (after its files are written, before the commit), then with kill -9 of a random rank
once the run has logged a random 1-4 steps past its resume point — and resumed each time
with --load; every logged loss and the final weights must equal the uninterrupted run's bit
for bit. The test also asserts that the interruptions really happened where intended: the
save death left its unfinished .tmp directory after the step it saved, and every kill -9
ended a run that had trained some steps but not the last.
Usage: checkpoint_kill_test.py TRIDENT"""
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks, read_safetensors, metrics_by_iteration

TRAIN_ITERS = 40
ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "4",
        "--seq-length", "64", "--vocab-size", "512", "--micro-batch-size", "4",
        "--global-batch-size", "8", "--train-iters", str(TRAIN_ITERS), "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--eval-interval", "10", "--peak-tflops", "1",
        "--seed", "31", "--tensor-model-parallel-size", "2", "--threads", "1"]
KILLS = 4
check = Checks()


def command(trident, extra):
    return ["mpirun", "--oversubscribe", "-np", "2", trident, "train"] + ARGS + extra


losses = metrics_by_iteration  # iteration -> (loss, grad norm, lr)


def kill_after_steps(proc, metrics, steps):
    """kill -9 of a random rank once this run has logged `steps` steps; True if it was sent
    while the run was still going."""
    deadline = time.time() + 60
    while proc.poll() is None and len(losses(metrics)) < steps and time.time() < deadline:
        time.sleep(0.005)
    ranks = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "trident"],
                           capture_output=True, text=True).stdout.split()
    if proc.poll() is not None or not ranks:
        return False
    try:
        os.kill(int(random.choice(ranks)), signal.SIGKILL)
        return True
    except ProcessLookupError:  # that rank had just finished
        return False


def main():
    trident = sys.argv[1]
    random.seed(7)
    with tempfile.TemporaryDirectory() as tmp:
        ref = subprocess.run(command(trident, ["--metrics-file", f"{tmp}/ref.jsonl", "--save-hf", f"{tmp}/ref_hf"]),
                             capture_output=True, env=MPI_ENV, timeout=300)
        if ref.returncode != 0:
            check(False, "uninterrupted run")
            return check.summary()
        ckpt, seen, attempts, completed = f"{tmp}/ckpt", {}, 0, False
        mid_run_kills = []
        while attempts < 15 and not completed:
            attempts += 1
            metrics = f"{tmp}/run{attempts}.jsonl"
            extra = ["--save", ckpt, "--save-interval", "3", "--load", ckpt,
                     "--metrics-file", metrics, "--save-hf", f"{tmp}/final_hf"]
            if attempts == 1:
                extra += ["--inject-fault-save", "2"]  # dies inside the save at iteration 6
            proc = subprocess.Popen(command(trident, extra), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=MPI_ENV, start_new_session=True)
            sent = 1 < attempts <= 1 + KILLS and kill_after_steps(proc, metrics, random.randint(1, 4))
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                check(False, "a run hung after a rank was killed")
                return check.summary()
            steps = losses(metrics)
            seen.update(steps)
            completed = proc.returncode == 0
            if attempts == 1:
                unfinished = os.path.join(ckpt, "iter_0000006.tmp")
                latest = open(os.path.join(ckpt, "latest")).read().strip()
                check(proc.returncode != 0 and max(steps, default=0) == 6 and latest == "iter_0000003" and
                      os.path.exists(os.path.join(unfinished, "manifest.json")),
                      f"the first run died inside its save of iteration 6 (exit {proc.returncode}, last step "
                      f"{max(steps, default=0)}, latest {latest}, unfinished {os.path.basename(unfinished)} left)")
            if sent:
                mid_run_kills.append(bool(steps) and max(steps) < TRAIN_ITERS and proc.returncode != 0)
                check(mid_run_kills[-1], f"kill -9 in run {attempts} interrupted it mid-training: it trained "
                                         f"{min(steps, default=0)}-{max(steps, default=0)} of {TRAIN_ITERS}, "
                                         f"exit {proc.returncode}")
        check(len(mid_run_kills) == KILLS, f"{len(mid_run_kills)} of {KILLS} kill -9 sent while a run was training")
        reference = losses(f"{tmp}/ref.jsonl")
        same_losses = completed and seen == reference
        a = read_safetensors(f"{tmp}/ref_hf/model.safetensors")
        b = read_safetensors(f"{tmp}/final_hf/model.safetensors") if completed else {}
        same_weights = completed and a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
        check(same_losses and same_weights,
              f"{attempts} attempts: every logged loss and grad norm {'equal' if same_losses else 'DIFFER'}, "
              f"final weights {'bit-identical' if same_weights else 'DIFFER'}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
