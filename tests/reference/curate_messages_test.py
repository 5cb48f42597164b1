#!/usr/bin/python3
"""What `trident curate` says when it fails is what it left on disk (issue 40, item 9: an
unwritable --report said "no output written" after the output had been renamed into place).
Every output (--output, --removed, --candidates-out, --report) is written whole under a
temporary name and renamed only once all are complete, so:
  * an unwritable output (under a regular file) is refused at start-up, exit 2 within 5 s,
    naming its flag, "nothing written", the folder as it was; two outputs on one file too;
  * a failure mid-run (a bad line) leaves no output and no temporary file: "nothing written";
  * the report's folder made immutable (chattr +i) while the run goes on: exit 2, and where
    the message says "nothing written" no output exists (before, the output was there);
  * the --report path made a directory while the run goes on: the renames fail at the end,
    and the message names the outputs in place ("written: --output ...", complete, its
    documents counted here) and those not; or, caught at start-up, nothing is written.
The failures mid-run are raced against the run (a 70 MB input); whichever way each race
goes, the message is checked against the files.
Usage: curate_messages_test.py TRIDENT"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

from parity import Checks

check = Checks()
STAGES = ["--stages", "normalize,exact-dedup,fuzzy-dedup", "--workers", "1"]


def run(cmd):
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p, time.monotonic() - start


def files_under(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder)
                  for d, _, names in os.walk(folder) for f in names)


def write_corpus(path, lines, bad_at=None):
    rng = random.Random(1)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    with open(path, "w") as f:
        for i in range(lines):
            if i == bad_at:
                f.write("{not json\n")
            f.write(json.dumps({"text": " ".join(rng.choice(words) for _ in range(40)) + f" {i}"}) + "\n")


def outputs(tmp):
    out = os.path.join(tmp, "out")
    return {"--output": os.path.join(out, "curated.jsonl"),
            "--removed": os.path.join(out, "removed.jsonl"),
            "--candidates-out": os.path.join(out, "candidates.jsonl"),
            "--report": os.path.join(tmp, "rep", "report.json")}


def curate_cmd(trident, corpus, paths):
    cmd = [trident, "curate", "--input", corpus] + STAGES
    for flag, path in paths.items():
        cmd += [flag, path]
    return cmd


def test_startup_refusals(trident, tmp):
    corpus = os.path.join(tmp, "small.jsonl")
    write_corpus(corpus, 20)
    blocker = os.path.join(tmp, "a_file")
    open(blocker, "w").write("in the way\n")
    for flag in ["--output", "--report", "--removed", "--candidates-out"]:
        paths = outputs(tmp)
        paths[flag] = os.path.join(blocker, "x.jsonl")
        before = files_under(tmp)
        p, seconds = run(curate_cmd(trident, corpus, paths))
        check(p.returncode == 2 and seconds < 5 and flag in p.stderr and "nothing written" in p.stderr
              and files_under(tmp) == before,
              f"{flag} under a regular file: exit {p.returncode} in {seconds:.1f} s, 'nothing written', "
              f"nothing made: {p.stderr.strip()[-200:]}")
    paths = outputs(tmp)
    paths["--report"] = paths["--output"]
    p, _ = run(curate_cmd(trident, corpus, paths))
    check(p.returncode == 2 and "each output needs a file of its own" in p.stderr and
          not os.path.exists(paths["--output"]),
          f"--report on the --output file: refused, nothing written: {p.stderr.strip()[-200:]}")


def test_bad_line(trident, tmp):
    corpus = os.path.join(tmp, "bad.jsonl")
    write_corpus(corpus, 200, bad_at=150)
    paths = outputs(tmp)
    p, _ = run(curate_cmd(trident, corpus, paths))
    check(p.returncode == 2 and "nothing written" in p.stderr and
          not any(os.path.exists(v) for v in paths.values()) and
          files_under(os.path.join(tmp, "out")) == [],
          f"a bad line mid-run: exit 2, 'nothing written', no output and no temporary file "
          f"({files_under(os.path.join(tmp, 'out'))}): {p.stderr.strip()[-200:]}")


def raced(trident, corpus, paths, delay, interfere):
    """Runs curate, calls interfere() after `delay` seconds, returns the finished process."""
    proc = subprocess.Popen(curate_cmd(trident, corpus, paths), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    interfere()
    out, err = proc.communicate(timeout=300)
    return proc.returncode, err


def message_true(code, err, paths, lines):
    """The message against the files: 'nothing written' means no output exists; 'written:'
    names outputs that exist (the curated one complete) and 'not written:' ones that do not."""
    if code == 0:
        return False, "exit 0"
    if "nothing written" in err and "written: " not in err:
        return not any(os.path.isfile(v) for v in paths.values()), "nothing written"
    m = re.search(r"written: (.*?); not written: (.*)$", err.strip(), re.M)
    if not m:
        return False, "no list of outputs"
    written = re.findall(r"(--[a-z-]+) (\S+?)(?:,|$)", m.group(1))
    not_written = re.findall(r"(--[a-z-]+) (\S+?)(?:,|$)", m.group(2))
    # (a path made a directory by the test is no file written)
    ok = all(os.path.isfile(p) for _, p in written) and not any(os.path.isfile(p) for _, p in not_written)
    if ("--output", paths["--output"]) in written:
        ok = ok and sum(1 for _ in open(paths["--output"])) == lines
    return ok, f"written {[f for f, _ in written]}, not written {[f for f, _ in not_written]}"


def chattr_works(tmp):
    probe = os.path.join(tmp, "probe")
    os.makedirs(probe)
    works = subprocess.run(["chattr", "+i", probe], capture_output=True).returncode == 0
    if works:
        subprocess.run(["chattr", "-i", probe])
    os.rmdir(probe)
    return works


def raced_case(trident, tmp, corpus, lines, what, delay, interfere, undo=lambda paths: None):
    paths = outputs(tmp)
    os.makedirs(os.path.dirname(paths["--report"]))
    try:
        code, err = raced(trident, corpus, paths, delay, lambda: interfere(paths))
    finally:
        undo(paths)
    ok, said = message_true(code, err, paths, lines)
    leftovers = [f for f in files_under(tmp) if ".tmp." in f]
    check(ok and not leftovers, f"{what} after {delay} s: exit {code}, the message true ({said}), "
                                f"no temporary file left ({leftovers}): {err.strip()[-300:]}")
    subprocess.run(["rm", "-rf", os.path.join(tmp, "out"), os.path.dirname(paths["--report"])])
    return "written: --output" in err


def test_raced_failures(trident, tmp):
    corpus = os.path.join(tmp, "big.jsonl")
    lines = 300000
    write_corpus(corpus, lines)
    partial = 0
    for delay in (0.5, 1.0):
        if chattr_works(tmp):
            report_dir = lambda paths: os.path.dirname(paths["--report"])  # noqa: E731
            partial += raced_case(trident, tmp, corpus, lines, "the report's folder made immutable",
                                  delay, lambda paths: subprocess.run(["chattr", "+i", report_dir(paths)]),
                                  lambda paths: subprocess.run(["chattr", "-i", report_dir(paths)]))
        partial += raced_case(trident, tmp, corpus, lines, "--report made a directory", delay,
                              lambda paths: os.makedirs(os.path.join(paths["--report"], "in_the_way")))
    print(f"(the renames were reached in {partial} of the races)")


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        test_startup_refusals(trident, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        test_bad_line(trident, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        test_raced_failures(trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
