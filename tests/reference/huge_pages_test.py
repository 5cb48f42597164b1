#!/usr/bin/python3
"""Large buffers in huge pages, touched at start-up (issue 38, item 1), checked against the
kernel's own count of the child's page faults (getrusage's ru_minflt): a 29M-parameter
model (~530 MB of weights, gradients and Adam moments) takes fewer than half the faults of
the same run with --no-huge-pages where the machine's THP mode allows huge pages, and the
two runs' losses, gradient norms and learning rates are bit-identical, in fp32 and bf16
and with an asynchronous save (whose snapshot buffers come from the same allocator).
`generate` takes --no-huge-pages too and continues the saved checkpoint alike. And the
start-up line's total is the time from the process's start to the line, as this test's own
clock sees it from the spawn (its first phase, launch, holds MPI's start and the process
groups).
Usage: huge_pages_test.py /path/to/trident /path/to/source (for data/kjv's tokenizer)
"""
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import Checks, metrics_by_iteration  # noqa: E402

MODEL = ["--mock-data", "--num-layers", "2", "--hidden-size", "1024", "--num-attention-heads",
         "16", "--seq-length", "32", "--vocab-size", "4096", "--micro-batch-size", "1",
         "--global-batch-size", "2", "--train-iters", "4", "--eval-iters", "0",
         "--log-interval", "1", "--peak-tflops", "1", "--threads", "1", "--seed", "3"]


def thp_mode():
    text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    return text[text.index("[") + 1:text.index("]")] if "[" in text else "never"


def faults_of(cmd):
    """(completed process, minor page faults of that child alone)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p, resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before


def check_startup_total(trident, check):
    """The printed total against the time from spawning the process to reading its line."""
    spawned = time.monotonic()
    proc = subprocess.Popen([trident, "train"] + MODEL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    line, seen = "", None
    for line in proc.stdout:
        if line.startswith("start-up:"):
            seen = time.monotonic() - spawned
            break
    proc.stdout.read()
    proc.wait(timeout=300)
    total = re.search(r"total ([0-9.]+) s before step 1", line)
    check(seen is not None and total is not None and line.startswith("start-up: launch "),
          f"the start-up line names launch first: {line.strip()[:120]!r}")
    if seen is not None and total is not None:
        printed = float(total.group(1))
        check(seen - 0.1 <= printed <= seen + 0.02,
              f"start-up total {printed:.2f} s against {seen:.2f} s from spawn to the line")


def main():
    trident = sys.argv[1]
    check = Checks()
    check_startup_total(trident, check)
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in [("fp32", []), ("bf16", ["--bf16"]),
                            ("async save", ["--save", "SAVE", "--async-save",
                                            "--save-interval", "2"])]:
            runs = {}
            for pages in ["huge", "small"]:
                metrics = os.path.join(tmp, f"{name}_{pages}.jsonl".replace(" ", "_"))
                args = [a.replace("SAVE", os.path.join(tmp, f"ckpt_{pages}")) for a in extra]
                off = ["--no-huge-pages"] if pages == "small" else []
                p, faults = faults_of([trident, "train"] + MODEL + args + off +
                                      ["--metrics-file", metrics])
                check(p.returncode == 0, f"{name}, {pages} pages: trains (exit {p.returncode})"
                      + ("" if p.returncode == 0 else ": " + p.stderr[-400:]))
                runs[pages] = (metrics_by_iteration(metrics), faults)
            (huge, huge_faults), (small, small_faults) = runs["huge"], runs["small"]
            check(len(huge) == 4 and huge == small,
                  f"{name}: losses, grad norms and lrs bit-identical with and without huge pages")
            if thp_mode() != "never":
                check(huge_faults < 0.5 * small_faults,
                      f"{name}: {huge_faults} page faults with huge pages, {small_faults} without")
        tokenizer = os.path.join(sys.argv[2], "data/kjv/kjv_bpe4096.model")
        if os.path.exists(tokenizer):  # scripts/setup.sh trains it
            outputs = []
            for off in [[], ["--no-huge-pages"]]:
                p = subprocess.run([trident, "generate", "--load",
                                    os.path.join(tmp, "ckpt_huge"), "--tokenizer-type",
                                    "SentencePieceTokenizer", "--tokenizer-model", tokenizer,
                                    "--prompt", "And God said", "--tokens-to-generate", "8",
                                    "--threads", "1"] + off,
                                   capture_output=True, text=True, timeout=300)
                outputs.append((p.returncode, p.stdout, p.stderr[-300:]))
            same = outputs[0][0] == 0 and outputs[0][:2] == outputs[1][:2]
            check(same, "generate with and without --no-huge-pages: the same text" +
                  ("" if same else f" ({outputs})"))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
