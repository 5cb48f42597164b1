#!/usr/bin/python3
"""Stopping before train_iters (train/early_stop.h), against an uninterrupted run of the same
command: the losses, grad norms and learning rates of every iteration must be equal bit for
bit after the stopped run is resumed.
- SIGTERM at a random iteration of a one-process run (with a second SIGTERM volleyed during
  the stop): exit 0 within one iteration of the signal, a checkpoint of that iteration, and
  the same command without --load resumes it (--load defaults to --save);
- 4 ranks, (t, p, d) = (2, 2, 1) with every rank signalled (as Slurm does), and
  (1, 2, 2) with the distributed optimizer and --async-save where only rank 3 gets SIGUSR1
  (the stop waits for the background write to commit): all ranks stop
  after the same iteration, nobody hangs;
- --exit-interval and --exit-duration-in-mins stop with a checkpoint and exit 0;
- a --finetune run that stopped resumes its own checkpoint, not the weights it began from;
- a --save directory without `latest` resumes its newest complete iteration;
- SIGTERM during start-up (once main holds the signals, before MPI starts) stops the run
  after its first iteration with a checkpoint, exit 0;
- without the handler SIGTERM ends the process as before; in a Slurm job with --save the
  handler is on by default; bad values exit 2 naming the flag.
Usage: early_stop_test.py TRIDENT"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks, metrics_by_iteration

ITERS = 60
ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--train-iters", str(ITERS), "--lr", "1e-3",
        "--lr-warmup-iters", "5", "--log-interval", "1", "--eval-iters", "1",
        "--peak-tflops", "1", "--seed", "13", "--threads", "1",
        # Slow enough steps that a signal lands mid-run: --inject-slow-* delays rank 0.
        "--inject-slow-rank", "0", "--inject-slow-forward-ms", "10"]
LAYOUTS = {
    "tp2pp2": ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"],
    "pp2dp2": ["--pipeline-model-parallel-size", "2", "--use-distributed-optimizer"],
}
check = Checks()


def command(trident, ranks, extra):
    cmd = [trident, "train"] + ARGS + extra
    return ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd if ranks > 1 else cmd


rows = metrics_by_iteration


def run(cmd, env=MPI_ENV):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    return done.returncode, done.stdout + done.stderr


def rank_pids(mpirun):
    """World rank -> pid of the ranks mpirun started."""
    out = {}
    for pid in subprocess.run(["pgrep", "-P", str(mpirun.pid)], capture_output=True,
                              text=True).stdout.split():
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                out[int(kv.split(b"=")[1])] = int(pid)
    return out


def signal_at(proc, metrics, iteration, targets, signum):
    """Once `metrics` logs `iteration`, sends `signum` to the targets (pids, or None: the
    process itself), twice with 10 ms between (a second signal during the stop); returns
    the last iteration logged when the first was sent."""
    deadline = time.time() + 120
    while proc.poll() is None and max(rows(metrics), default=0) < iteration:
        if time.time() > deadline:
            break
        time.sleep(0.002)
    seen = max(rows(metrics), default=0)
    for _ in range(2):
        for pid in targets or [proc.pid]:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    return seen


def stopped_at(log):
    for line in log.splitlines():
        if line.startswith("stopping after iteration "):
            return int(line.split()[3])
    return None


def stop_and_resume(trident, tmp, name, ranks, layout, reference, signalled, signum):
    """Signal a run of `layout` at a random iteration, then resume it; checks both halves."""
    ckpt, metrics = f"{tmp}/{name}_ckpt", f"{tmp}/{name}.jsonl"
    saving = ["--async-save"] if signum == signal.SIGUSR1 else []
    cmd = command(trident, ranks, layout + saving + ["--save", ckpt, "--exit-signal-handler",
                                                     "--metrics-file", metrics])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=MPI_ENV, start_new_session=True)
    target = random.randint(5, ITERS - 20)
    time.sleep(0.5 if ranks > 1 else 0)
    pids = None
    if ranks > 1:
        deadline = time.time() + 30
        while len(pids := rank_pids(proc)) < ranks and time.time() < deadline:
            time.sleep(0.05)
        pids = [pids[r] for r in signalled if r in pids]
    seen = signal_at(proc, metrics, target, pids, signum)
    try:
        log, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        check(False, f"{name}: a rank hung after {signal.Signals(signum).name}")
        return
    stop = stopped_at(log)
    latest = open(f"{ckpt}/latest").read().strip() if os.path.exists(f"{ckpt}/latest") else None
    whom = "every rank" if not pids or len(signalled) == ranks else f"rank {signalled[0]} only"
    check(proc.returncode == 0 and stop is not None and seen <= stop <= seen + 2 and
          latest == f"iter_{stop:07d}" and max(rows(metrics)) == stop,
          f"{name}: {signal.Signals(signum).name} to {whom} after iteration {seen}: exit "
          f"{proc.returncode}, stopped after iteration {stop}, latest {latest}" +
          ("" if proc.returncode == 0 else "\n" + log[-2000:]))
    code, log = run(command(trident, ranks, layout + ["--save", ckpt, "--metrics-file",
                                                      f"{tmp}/{name}_resumed.jsonl"]))
    resumed = rows(f"{tmp}/{name}_resumed.jsonl")
    both = {**{k: v for k, v in rows(metrics).items() if k <= (stop or 0)}, **resumed}
    check(code == 0 and "--load defaults to --save" in log and min(resumed, default=0) == (stop or 0) + 1
          and both == reference,
          f"{name}: the same command resumed from iteration {min(resumed, default=0)}; every loss, "
          f"grad norm and lr {'bit-identical' if both == reference else 'DIFFER'} to the "
          f"uninterrupted run" + ("" if code == 0 else "\n" + log[-2000:]))


def budgets(trident, tmp, reference):
    ckpt = f"{tmp}/interval_ckpt"
    code, log = run(command(trident, 1, ["--save", ckpt, "--exit-interval", "7",
                                         "--metrics-file", f"{tmp}/interval.jsonl"]))
    check(code == 0 and stopped_at(log) == 7 and os.path.isdir(f"{ckpt}/iter_0000007")
          and rows(f"{tmp}/interval.jsonl") == {k: v for k, v in reference.items() if k <= 7},
          f"--exit-interval 7: exit {code}, stopped after {stopped_at(log)} with its checkpoint")
    ckpt, metrics = f"{tmp}/duration_ckpt", f"{tmp}/duration.jsonl"
    minutes = 0.05  # 3 s
    slow = ["--train-iters", "100000", "--lr-decay-iters", str(ITERS)]
    code, log = run(command(trident, 1, slow + ["--save", ckpt, "--exit-duration-in-mins",
                                                str(minutes), "--metrics-file", metrics]))
    stop = stopped_at(log)
    steps = [json.loads(l) for l in open(metrics) if '"elapsed_s"' in l] if os.path.exists(metrics) else []
    last_elapsed = steps[-1]["elapsed_s"] if steps else None
    # The run stops when the next step, taken to last as long as the one just done, would end
    # past the budget; so the last step ends within the budget plus by how much it outran the
    # step before it, which is less than the last step's own time (--log-interval 1).
    slack = steps[-1]["ms_per_iter"] / 1e3 if steps else 0
    check(code == 0 and stop is not None and os.path.isdir(f"{ckpt}/iter_{stop:07d}") and
          "exit-duration-in-mins" in log and last_elapsed is not None and
          last_elapsed <= minutes * 60 + slack,
          f"--exit-duration-in-mins {minutes}: exit {code}, stopped after iteration {stop} at "
          f"{last_elapsed} s of {minutes * 60:.0f} (+ the last step's {slack:.3f} s) with its "
          f"checkpoint")


def finetune_restart(trident, tmp):
    """A --finetune run stopped by --exit-interval resumes its own checkpoint when run again."""
    base = f"{tmp}/base_ckpt"
    run(command(trident, 1, ["--save", base, "--train-iters", "5", "--lr-warmup-iters", "1"]))
    ft = f"{tmp}/ft_ckpt"
    extra = ["--finetune", "--load", base, "--save", ft, "--metrics-file", f"{tmp}/ft.jsonl"]
    first, _ = run(command(trident, 1, extra + ["--exit-interval", "4"]))
    code, log = run(command(trident, 1, extra + ["--metrics-file", f"{tmp}/ft2.jsonl"]))
    resumed = rows(f"{tmp}/ft2.jsonl")
    check(first == 0 and code == 0 and min(resumed, default=0) == 5 and "--load defaults to --save" in log,
          f"--finetune stopped at 4 and run again: resumed its own checkpoint from iteration "
          f"{min(resumed, default=0)} (exit {first}, {code})")


def restart_without_latest(trident, tmp):
    """A --save directory whose `latest` is gone (a first save that died before writing it)
    resumes from its newest complete iteration; one whose iterations all lack manifest.json
    is refused, never trained over from the initialisation."""
    ckpt = f"{tmp}/no_latest_ckpt"
    run(command(trident, 1, ["--save", ckpt, "--save-interval", "4", "--exit-interval", "10"]))
    os.remove(f"{ckpt}/latest")
    code, log = run(command(trident, 1, ["--save", ckpt, "--metrics-file", f"{tmp}/no_latest.jsonl"]))
    resumed = rows(f"{tmp}/no_latest.jsonl")
    check(code == 0 and "has no `latest`" in log and min(resumed, default=0) == 11,
          f"`latest` removed: the run resumed from the newest complete iteration (first step "
          f"{min(resumed, default=0)}, exit {code})")
    damaged = f"{tmp}/damaged_ckpt"
    os.makedirs(f"{damaged}/iter_0000008")
    code, log = run(command(trident, 1, ["--save", damaged]))
    check(code == 2 and "none of which has manifest.json" in log and
          os.listdir(damaged) == ["iter_0000008"],
          f"iterations without manifest.json: exit {code}, nothing written")


def blocked_signals(pid):
    """The signal mask of a process's main thread (/proc/PID/status SigBlk), 0 if gone."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("SigBlk:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def signal_during_startup(trident, tmp):
    ckpt = f"{tmp}/startup_ckpt"
    proc = subprocess.Popen(command(trident, 1, ["--save", ckpt, "--exit-signal-handler"]),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=MPI_ENV)
    deadline = time.time() + 10
    while not blocked_signals(proc.pid) & (1 << (signal.SIGTERM - 1)) and time.time() < deadline:
        time.sleep(0.001)
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=120)
    latest = open(f"{ckpt}/latest").read().strip() if os.path.exists(f"{ckpt}/latest") else None
    check(proc.returncode == 0 and stopped_at(log) == 1 and latest == "iter_0000001" and
          "start-up:" in log.split("stopping after")[0],
          f"SIGTERM during start-up: exit {proc.returncode}, stopped after iteration "
          f"{stopped_at(log)}, latest {latest}" + ("" if proc.returncode == 0 else "\n" + log[-2000:]))


def defaults_and_refusals(trident, tmp):
    proc = subprocess.Popen(command(trident, 1, ["--save", f"{tmp}/plain_ckpt", "--metrics-file",
                                                 f"{tmp}/plain.jsonl"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=MPI_ENV)
    signal_at(proc, f"{tmp}/plain.jsonl", 3, None, signal.SIGTERM)
    proc.wait(timeout=60)
    check(proc.returncode == -signal.SIGTERM and not os.path.exists(f"{tmp}/plain_ckpt/latest"),
          f"without --exit-signal-handler SIGTERM ends the run as before (exit {proc.returncode})")
    slurm_env = dict(MPI_ENV, SLURM_JOB_ID="4242")
    ckpt = f"{tmp}/slurm_ckpt"
    proc = subprocess.Popen(command(trident, 1, ["--save", ckpt, "--metrics-file", f"{tmp}/slurm.jsonl"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=slurm_env)
    signal_at(proc, f"{tmp}/slurm.jsonl", 3, None, signal.SIGTERM)
    proc.wait(timeout=60)
    check(proc.returncode == 0 and os.path.exists(f"{ckpt}/latest"),
          f"in a Slurm job (SLURM_JOB_ID set) with --save, SIGTERM saves and exits 0 by default "
          f"(exit {proc.returncode})")
    for flags, needle in ((["--exit-duration-in-mins", "-1"], "--exit-duration-in-mins"),
                          (["--exit-interval", "-3"], "--exit-interval"),
                          (["--exit-signal-handler", "--no-exit-signal-handler"], "not both")):
        code, log = run(command(trident, 1, flags))
        check(code == 2 and needle in log, f"{' '.join(flags)}: exit {code}, names {needle}")


def main():
    trident = sys.argv[1]
    seed = int(os.environ.get("EARLY_STOP_SEED", time.time()))
    random.seed(seed)
    print(f"seed {seed} (EARLY_STOP_SEED repeats it)")
    with tempfile.TemporaryDirectory() as tmp:
        code, log = run(command(trident, 1, ["--metrics-file", f"{tmp}/ref.jsonl"]))
        check(code == 0, "uninterrupted one-process run" + ("" if code == 0 else "\n" + log[-2000:]))
        reference = rows(f"{tmp}/ref.jsonl")
        stop_and_resume(trident, tmp, "one process", 1, [], reference, [0], signal.SIGTERM)
        for name, layout in LAYOUTS.items():
            code, log = run(command(trident, 4, layout + ["--metrics-file", f"{tmp}/{name}_ref.jsonl"]))
            check(code == 0, f"{name}: uninterrupted run" + ("" if code == 0 else "\n" + log[-2000:]))
            signalled = [0, 1, 2, 3] if name == "tp2pp2" else [3]
            signum = signal.SIGTERM if name == "tp2pp2" else signal.SIGUSR1
            stop_and_resume(trident, tmp, name, 4, layout, rows(f"{tmp}/{name}_ref.jsonl"),
                            signalled, signum)
        budgets(trident, tmp, reference)
        finetune_restart(trident, tmp)
        restart_without_latest(trident, tmp)
        signal_during_startup(trident, tmp)
        defaults_and_refusals(trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
