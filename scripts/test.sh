#!/usr/bin/env bash
# The test suite: unit and parity tests (GoogleTest) and the PyTorch reference, via CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
