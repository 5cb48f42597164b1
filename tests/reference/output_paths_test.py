#!/usr/bin/python3
"""Output paths are checked at start-up (issue 40, item 7): `train` with an unwritable
--save, --save-hf, --timeline, --report-dir or --metrics-file, `eval` with an unwritable
--output or --log-samples, and `curate` with an unwritable --report or --output exit 2
within 5 s, naming the flag, with nothing written. Unwritable means here a path under a
regular file (no directory can be made there), and, where `chattr` works (root on ext4), a
directory made immutable (root writes anywhere else). A refused run leaves no directory the
check made; a new --save directory is made by the save.
Usage: output_paths_test.py TRIDENT"""
import os
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks
from serve_client import write_model

TRAIN = ["train", "--mock-data", "--train-iters", "2", "--threads", "1", "--peak-tflops", "1",
         "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
         "--seq-length", "16", "--vocab-size", "64", "--eval-iters", "0"]


def run(cmd):
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=120)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def refused(check, what, cmd, flag):
    code, out, seconds = run(cmd)
    check(code == 2 and flag in out and seconds < 5,
          f"{what}: exit {code} in {seconds:.1f} s, naming {flag}" +
          ("" if code == 2 and flag in out else "\n" + out[-800:]))


def main():
    trident = sys.argv[1]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        blocker = os.path.join(tmp, "a_file")
        open(blocker, "w").write("in the way\n")
        under = os.path.join(blocker, "out")  # no directory can be made under a file
        for flag in ["--save", "--save-hf", "--report-dir"]:
            refused(check, f"train {flag} under a regular file", [trident] + TRAIN + [flag, under],
                    flag)
        for flag in ["--timeline", "--metrics-file"]:
            refused(check, f"train {flag} under a regular file",
                    [trident] + TRAIN + [flag, os.path.join(under, "x.json")], flag)
        locked = os.path.join(tmp, "locked")
        os.makedirs(locked)
        if subprocess.run(["chattr", "+i", locked], capture_output=True).returncode == 0:
            try:
                refused(check, "train --save in an immutable directory",
                        [trident] + TRAIN + ["--save", locked], "--save")
                check(os.listdir(locked) == [], "nothing written in it")
            finally:
                subprocess.run(["chattr", "-i", locked])
        fresh = os.path.join(tmp, "fresh", "ckpt")
        refused(check, "train with a new --save and an unwritable --timeline",
                [trident] + TRAIN + ["--save", fresh, "--timeline", os.path.join(under, "t.json")],
                "--timeline")
        check(not os.path.exists(os.path.join(tmp, "fresh")),
              "the refused run left no directory behind (the check removes what it made)")
        code, out, _ = run([trident] + TRAIN + ["--save", os.path.join(tmp, "new", "ckpt")])
        check(code == 0 and os.path.exists(os.path.join(tmp, "new", "ckpt", "latest")),
              f"train --save in a directory that does not exist yet: made by the save, exit {code}")

        timeline, report = os.path.join(tmp, "tl", "t.json"), os.path.join(tmp, "rep")
        code, out, _ = run([trident] + TRAIN + ["--timeline", timeline, "--report-dir", report])
        check(code == 0 and os.path.exists(timeline) and
              os.path.exists(os.path.join(report, "report.html")),
              f"--timeline and --report-dir in folders that do not exist yet: written, exit {code}")

        write_model(os.path.join(tmp, "hf"))
        for flag in ["--output", "--log-samples"]:
            refused(check, f"eval {flag} under a regular file",
                    [trident, "eval", "--load-hf", os.path.join(tmp, "hf"), "--tasks", "lambada_openai",
                     "--threads", "1", flag, os.path.join(under, "x.json")], flag)

        corpus = os.path.join(tmp, "corpus.jsonl")
        open(corpus, "w").write('{"text": "a line of text to curate"}\n')
        curated = os.path.join(tmp, "curated.jsonl")
        refused(check, "curate --report under a regular file",
                [trident, "curate", "--input", corpus, "--output", curated, "--report",
                 os.path.join(under, "report.json"), "--stages", "exact-dedup"], "--report")
        check(not os.path.exists(curated), "curate wrote no output")
        refused(check, "curate --output under a regular file",
                [trident, "curate", "--input", corpus, "--output", os.path.join(under, "o.jsonl"),
                 "--report", os.path.join(tmp, "report.json"), "--stages", "exact-dedup"],
                "--output")
        check(open(blocker).read() == "in the way\n", "the file in the way is untouched")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
