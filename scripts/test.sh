#!/usr/bin/env bash
# The test suite: unit and parity tests (GoogleTest) and the PyTorch reference, via CTest.
# One test more than the cores at a time: many tests spend part of their time waiting (servers
# for clients, Slurm for its jobs, a hang for its timeout), and at one per core a 2-core machine
# sat 23% idle over the suite (918 s at 2, 858 s at 3 with CI's fuzz build beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j "$(($(nproc) + 1))" "$@"
