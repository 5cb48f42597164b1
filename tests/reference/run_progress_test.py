#!/usr/bin/python3
"""Runs that talk: on tiny mock-data runs, the log line's elapsed time and ETA (the ETA
recomputed here from the metrics file's iteration times: their mean times the iterations
left), the heartbeat while an injected slow step runs (and none without one), the progress of
a long validation and test, and the end-of-run summary against the metrics file (losses,
tokens = consumed samples x sequence length) and the file system (the checkpoint directory),
whose suggested `generate`, `convert` and `eval` commands are then run as printed.
Usage: run_progress_test.py /path/to/trident /path/to/source
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import MPI_ENV, Checks  # noqa: E402

TINY = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "2",
        "--seq-length", "32", "--micro-batch-size", "2", "--log-interval", "1",
        "--peak-tflops", "1", "--threads", "1"]
LOG_LINE = re.compile(r"^\s*iteration\s+(\d+)/\s*(\d+) \|.*\| elapsed: (\S+) \| ETA: (\S+) \|$")


def train(trident, extra):
    return subprocess.run([trident, "train"] + TINY + extra, capture_output=True, text=True,
                          env=MPI_ENV, timeout=300)


def duration(seconds):
    """The log's duration format, as the README describes it."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    m = round(seconds / 60)
    return f"{m // 60}h{m % 60:02d}m"


def rows_of(metrics):
    rows = [json.loads(line) for line in open(metrics)]
    return [r for r in rows if "loss" in r], [r for r in rows if "validation_loss" in r]


def check_eta(check, out, train_rows):
    text = [l for l in out.splitlines() if re.match(r"^\s*iteration\s+\d+/", l)]
    lines = [LOG_LINE.match(l) for l in text]
    check(len(lines) == 6 and all(lines), f"each of the 6 log lines ends in elapsed and ETA: "
          f"{text[-1:]}")
    elapsed = [r.get("elapsed_s", -1) for r in train_rows]
    eta = [r.get("eta_s", -1) for r in train_rows]
    check(len(elapsed) == 6 and all(b > a > 0 for a, b in zip(elapsed, elapsed[1:])),
          f"elapsed_s increases: {elapsed}")
    # Each ETA is the mean step time so far times the iterations left (checked exactly below),
    # so it falls unless a step is far slower than those before it: from 5 iterations left
    # to 2 to none, it falls unless the mean more than doubles (a machine shared by others).
    check(len(eta) == 6 and eta[0] > eta[3] > eta[5] == 0 and min(eta[:5]) > 0,
          f"eta_s decreases to 0 at the last iteration: {eta}")
    # log-interval 1: ms_per_iter is each step's own time; the window (20) holds them all.
    step_s = [r["ms_per_iter"] / 1e3 for r in train_rows]
    want = [sum(step_s[:k + 1]) / (k + 1) * (6 - (k + 1)) for k in range(6)]
    worst = max(abs(a - b) / max(b, 1e-3) for a, b in zip(eta, want)) if len(eta) == 6 else 1
    check(worst < 1e-9, f"eta_s = mean step time so far x iterations left (worst relative "
          f"difference {worst:.1e})")
    shown = [(m.group(3), m.group(4)) for m in lines if m]
    check(shown == [(duration(e), duration(t)) for e, t in zip(elapsed, eta)],
          f"the line shows the metrics file's elapsed_s and eta_s: {shown[:2]}")


def summary_field(out, name):
    m = re.search(rf"^  {name}: (.*)$", out, re.M)
    return m.group(1) if m else ""


def check_summary(check, trident, out, work, train_rows, valid_rows):
    loss = re.match(r"(\S+) \(ppl (\S+)\)", summary_field(out, "final train loss"))
    check(loss and abs(float(loss.group(1)) - train_rows[-1]["loss"]) <= 1e-6 *
          abs(train_rows[-1]["loss"]), f"summary's train loss {loss and loss.group(1)} is the "
          f"metrics file's last ({train_rows[-1]['loss']})")
    valid = re.match(r"(\S+) \(ppl (\S+)\)", summary_field(out, "validation loss"))
    want = valid_rows[-1]["validation_loss"] if valid_rows else None
    check(valid and want and abs(float(valid.group(1)) - want) <= 1e-6 * want and
          abs(float(valid.group(2)) - valid_rows[-1]["validation_perplexity"]) <=
          1e-6 * valid_rows[-1]["validation_perplexity"],
          f"summary's validation loss and ppl are the metrics file's last ({want})")
    tokens = re.match(r"(\d+) \((\d+) tokens/s\)", summary_field(out, "tokens trained"))
    step_s = sum(r["ms_per_iter"] for r in train_rows) / 1e3
    want_tokens = train_rows[-1]["consumed_samples"] * 32
    check(tokens and int(tokens.group(1)) == want_tokens and
          abs(int(tokens.group(2)) - want_tokens / step_s) <= 0.01 * want_tokens / step_s + 1,
          f"tokens trained {tokens and tokens.groups()}: consumed samples x 32 = {want_tokens}, "
          f"over the steps' {step_s:.3f} s")
    check(summary_field(out, "iterations") == "6 (1 to 6 of 6)", "6 iterations, 1 to 6")
    ckpt = summary_field(out, "checkpoint")
    check(ckpt == os.path.join(work, "ckpt", "iter_0000006") and os.path.isdir(ckpt),
          f"the checkpoint line names the saved directory: {ckpt}")
    commands = re.findall(r"^  (\S*trident \S+ .*)$", out.split("\nnext:\n")[-1], re.M)
    kinds = [shlex.split(c)[1] for c in commands]
    check(kinds == ["generate", "eval", "convert"], f"next: generate, eval, convert ({kinds})")
    for command in commands:
        argv = shlex.split(command)
        check(os.path.samefile(argv[0], trident) and os.path.join(work, "ckpt") in argv,
              f"{argv[1]} names this trident and the save directory by their real paths")
        if argv[1] == "eval":
            argv += ["--limit", "2"]  # the command as printed, on 2 documents
        run = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        check(run.returncode == 0, f"`{' '.join(argv[1:])}` runs ({run.returncode}: "
              f"{run.stderr[-300:] if run.returncode else 'ok'})")
    check(os.path.isfile(os.path.join(work, "ckpt_hf", "config.json")),
          "the suggested convert wrote the HuggingFace directory it named")


def check_eval_progress(check, trident, work):
    """trident eval's progress on stderr every 5 s: shown when the scoring runs past 5 s
    (on an idle machine this one may not; then only the absence is checked)."""
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:
        f.write("In the beginning God created the heaven and the earth.\n" * 1000)
    started = time.time()
    out = subprocess.run([trident, "eval", "--load", os.path.join(work, "ckpt"), "--tasks",
                          f"text:{text}", "--threads", "1", "--batch-size", "4",
                          "--max-step-tokens", "64"], capture_output=True, text=True, timeout=300)
    took = time.time() - started
    lines = [re.match(r"^eval: (\d+)/(\d+) requests scored, (\d+)s, about (\d+)s left$", l)
             for l in out.stderr.splitlines() if l.startswith("eval: ")]
    done = [int(m.group(1)) for m in lines if m]
    totals = {int(m.group(2)) for m in lines if m}
    check(out.returncode == 0 and all(lines) and done == sorted(set(done)) and len(totals) <= 1
          and (lines or took < 8) and (not lines or took >= 5),
          f"eval's progress lines ({len(lines)} in {took:.0f} s): "
          f"{[m.group(0) for m in lines[:2] if m]}")


def check_quiet_run(check, trident, work):
    metrics = os.path.join(work, "metrics.jsonl")
    out = train(trident, ["--train-iters", "6", "--eval-iters", "2", "--metrics-file", metrics,
                          "--save", os.path.join(work, "ckpt"), "--heartbeat-seconds", "20"])
    check(out.returncode == 0, f"a tiny run of 6 iterations ({out.returncode}: {out.stderr[-300:]})")
    if out.returncode != 0:
        return
    train_rows, valid_rows = rows_of(metrics)
    check_eta(check, out.stdout, train_rows)
    check("still running" not in out.stdout + out.stderr,
          "no heartbeat when every step is short of --heartbeat-seconds 20")
    check_summary(check, trident, out.stdout, work, train_rows, valid_rows)
    check_eval_progress(check, trident, work)


def check_slow_run(check, trident, work):
    # 1 micro-batch per step and per evaluation batch, each forward slowed by 1.5 s: the steps
    # pass the 1 s heartbeat, the 3-batch validation and test pass 2 s after their 2nd batch.
    metrics = os.path.join(work, "slow.jsonl")
    out = train(trident, ["--train-iters", "2", "--eval-iters", "3", "--inject-slow-rank", "0",
                          "--inject-slow-forward-ms", "1500", "--metrics-file", metrics,
                          "--heartbeat-seconds", "1"])
    text = out.stdout
    check(out.returncode == 0, f"a run with slowed forwards ({out.returncode}: {out.stderr[-300:]})")
    lines = text.splitlines()
    beats = [l for l in lines if "still running" in l]
    check(len(beats) >= 2 and beats[0] == "iteration 1 still running after 1 s",
          f"iteration 1 gets a heartbeat after 1 s: {beats[:2]}")
    first_step = next(r["ms_per_iter"] for r in map(json.loads, open(metrics))
                      if "ms_per_iter" in r) / 1e3 if out.returncode == 0 else 0
    second = [l for l in beats if l.startswith("iteration 2 ")]
    check(second and second[0] == f"iteration 2 still running after 1 s (the last took "
          f"{first_step:.1f} s)", f"iteration 2's names iteration 1's time ({first_step:.3f} s): "
          f"{second[:1]}")
    at = {l: i for i, l in enumerate(lines)}
    step_line = next((i for i, l in enumerate(lines) if re.match(r"^\s*iteration\s+1/", l)), -1)
    check(beats and at[beats[0]] < step_line, "the heartbeat comes before its iteration's line")
    for what in ("validation", "test"):
        progress = [l for l in lines if re.match(rf"^{what}: [12]/3 batches, \d+s, about \d+s left$",
                                                 l)]
        check(progress, f"{what} on 3 batches of 1.5 s reports its progress: {progress[:1]}")
    check("next:" not in text and summary_field(text, "checkpoint") == "none (no --save)",
          "without --save the summary says so and suggests no command")


def check_refused(check, trident, work):
    metrics = os.path.join(work, "refused.jsonl")
    out = train(trident, ["--train-iters", "2", "--heartbeat-seconds", "-1",
                          "--metrics-file", metrics])
    check(out.returncode == 2 and "--heartbeat-seconds must be >= 0" in out.stderr + out.stdout
          and not os.path.exists(metrics), "--heartbeat-seconds -1 is refused by name, exit 2")


def main():
    trident = os.path.abspath(sys.argv[1])
    os.chdir(sys.argv[2])
    check = Checks()
    with tempfile.TemporaryDirectory() as work:
        check_quiet_run(check, trident, work)
        check_slow_run(check, trident, work)
        check_refused(check, trident, work)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
