#!/usr/bin/env bash
# Sequence parallelism on gpt2-small (b=4, s=256 unless SEQ / MICRO say otherwise): t=2 as
# 2 ranks x 1 thread, with and without --sequence-parallel, interleaved over ROUNDS. Prints
# per round the ms/iteration of each (mean and fastest of iterations 2..N) and their ratios;
# then rank 0's planned activation memory (from the printed plan) next to the formula
# U + S/t, and each rank's peak RSS (/usr/bin/time). EXTRA adds flags (e.g. --bf16).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-5}
SEQ=${SEQ:-256}
MICRO=${MICRO:-4}
out=$(mktemp -d)
# The fastest iteration after the first: on shared cores a neighbour's burst inflates the
# mean of a few iterations, rarely all of them.
best_ms() {
  /usr/bin/python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; \
print(min(x['ms_per_iter'] for x in r if 'ms_per_iter' in x and x['iteration'] > 1))" "$1"
}
ARGS="train --model-preset gpt2-small --mock-data --seq-length $SEQ --micro-batch-size $MICRO
      --global-batch-size $MICRO --train-iters $ITERS --log-interval 1 --eval-iters 0
      --peak-tflops 1 --tensor-model-parallel-size 2 --threads 1 ${EXTRA:-}"
run() {  # name, extra flags: rank logs in $out/NAME.log, RSS lines "rss_kb N" in $out/NAME.rss
  mpirun --oversubscribe -np 2 /usr/bin/time -f "rss_kb %M" -a -o "$out/$1.rss" \
    build/trident $ARGS --metrics-file "$out/$1.jsonl" "${@:2}" > "$out/$1.log" 2>&1
}
for ((i = 1; i <= ROUNDS; i++)); do
  run "tp_$i"
  run "sp_$i" --sequence-parallel
  tp=$(mean_ms "$out/tp_$i.jsonl"); sp=$(mean_ms "$out/sp_$i.jsonl")
  tpb=$(best_ms "$out/tp_$i.jsonl"); spb=$(best_ms "$out/sp_$i.jsonl")
  /usr/bin/python3 -c "print(f'round $i: t=2 {$tp:.0f} ms/iter (best {$tpb:.0f}) | t=2 + SP {$sp:.0f} (best {$spb:.0f}) | SP/no-SP time = {$sp/$tp:.3f} (best: {$spb/$tpb:.3f})')"
done
/usr/bin/python3 - "$out" "$ROUNDS" <<'PY'
import re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
UNSPLIT = ("qkv", "attention out", "attention log-sum-exp", "fc1 out (pre-GeLU)", "GeLU out", "per-token loss")
def plan(path):
    act, group = {}, None
    for line in open(path):
        g = re.match(r"^  (\w+) \(", line)
        if g: group = g.group(1); continue
        m = re.match(r"^    (.+?)\s+(\d+) floats(?: x\s+(\d+))?", line)
        if m and group == "activations":
            act[m.group(1)] = act.get(m.group(1), 0) + int(m.group(2)) * int(m.group(3) or 1)
    return act
def unsplit(k):
    return k.removeprefix("recompute: ").removesuffix(" (bf16)") in UNSPLIT
off, on = plan(f"{out}/tp_1.log"), plan(f"{out}/sp_1.log")
u = sum(v for k, v in off.items() if unsplit(k)) * 4
s = sum(v for k, v in off.items() if not unsplit(k)) * 4
MiB = 2 ** 20
print(f"planned activations per rank: without SP {(u + s) / MiB:.1f} MiB = U {u / MiB:.1f} + S {s / MiB:.1f}; "
      f"with SP {sum(on.values()) * 4 / MiB:.1f} MiB; formula U + S/2 = {(u + s / 2) / MiB:.1f} MiB")
for name in ("tp", "sp"):
    rss = [int(l.split()[1]) / 1024 for r in range(1, rounds + 1) for l in open(f"{out}/{name}_{r}.rss") if l.startswith("rss_kb")]
    plan_total = [l for l in open(f"{out}/{name}_1.log") if l.startswith("peak RSS")]
    print(f"{'t=2 + SP' if name == 'sp' else 't=2     '}: peak RSS per rank {min(rss):.0f}-{max(rss):.0f} MiB "
          f"over {len(rss)} rank runs; rank 0: {plan_total[0].strip() if plan_total else '?'}")
PY
rm -rf "$out"
