#!/usr/bin/env bash
# Installs trident's dependencies (Debian packages only), builds build/trident, and, unless
# --no-demo is given, trains a small GPT so you can watch the loss fall.
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=1
for arg in "$@"; do
  case "$arg" in
    --no-demo) DEMO=0 ;;
    *) echo "usage: scripts/setup.sh [--no-demo]" >&2; exit 2 ;;
  esac
done

# Build: compiler, CMake, oneDNN (GEMM), nlohmann-json, CLI11.
# Tests and benchmarks: GoogleTest, Google Benchmark, and PyTorch as an independent reference.
PACKAGES=(g++ cmake make libdnnl-dev nlohmann-json3-dev libcli11-dev libgtest-dev
          libbenchmark-dev python3-torch python3-numpy)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j "$(nproc)"
echo "setup: built build/trident"

if ((DEMO)); then
  exec scripts/demo.sh
fi
