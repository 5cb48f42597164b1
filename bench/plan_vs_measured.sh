#!/usr/bin/env bash
# trident plan's predictions against trident train here, layout by layout: predicted time
# per iteration vs the median measured ms/iteration (iterations 4-10), and predicted memory
# per device vs the largest per-rank peak RSS (/usr/bin/time). The model is a 4-layer GPT
# (h 256, s 128, GPT-2 vocabulary, B 16, bf16); the cluster file is the calibrated
# clusters/this-machine.toml (or $CLUSTER). Every layout flag is fixed on both sides. At the
# end, the 2-rank layouts ordered by predicted and by measured time, with Kendall's tau and
# how many pairs measured more than GAP (10%) apart are ordered as predicted.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
CLUSTER=${CLUSTER:-clusters/this-machine.toml}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
MODEL="--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 50257 --bf16 --global-batch-size 16"

# $1: ranks; $2: the layout's flags (both commands); $3: trident train's extra flags.
compare() {
  local np=$1 layout=$2 extra=$3 log train_layout
  log=$(mktemp)
  # trident train has no flags for "no recomputation" and "no distributed optimizer".
  train_layout=$(echo "$layout" |
    sed 's/--recompute-granularity none//; s/--no-distributed-optimizer//; s/--no-sequence-parallel//')
  mpirun -np "$np" build/trident train --mock-data $MODEL $train_layout $extra --train-iters 10 \
    --log-interval 1 --eval-iters 0 > "$log" 2>&1
  # Peak RSS of every rank from a short run of its own: under /usr/bin/time the ranks ran
  # 2-3x slower here, so the timed run goes without it.
  mpirun -np "$np" /usr/bin/time -f "rank peak RSS %M KiB" build/trident train --mock-data \
    $MODEL $train_layout $extra --train-iters 2 --eval-iters 0 >> "$log" 2>&1
  local measured rss predicted
  measured=$(grep -E "iteration +([4-9]|10)/" "$log" | sed 's/.*per iteration (ms): \([0-9.]*\).*/\1/' |
    sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  rss=$(grep -o "rank peak RSS [0-9]*" "$log" | awk '{print $4}' | sort -n | tail -1)
  predicted=$(build/trident plan --cluster "$CLUSTER" $MODEL --num-devices "$np" $layout --json --top 1)
  /usr/bin/python3 - "$np" "$layout" "$measured" "$rss" "$predicted" "$results" <<'PY'
import json, sys
np_, layout, ms, rss, plan = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])["plans"][0]
t, mem = plan["time_per_iteration_s"] * 1e3, plan["memory_per_device_gib"] * 1024
print(f"{np_} ranks {layout:<120} time {t:7.1f} / {ms:7.1f} ms = {t / ms:4.2f}   memory {mem:6.1f} / {rss / 1024:6.1f} MiB = {mem * 1024 / rss:4.2f}")
with open(sys.argv[6], "a") as f:
    f.write(json.dumps({"ranks": int(np_), "layout": layout, "predicted": t, "measured": ms}) + "\n")
PY
  rm -f "$log"
}

T=--tensor-model-parallel-size P=--pipeline-model-parallel-size B=--micro-batch-size
V=--num-layers-per-virtual-pipeline-stage R=--recompute-granularity
NONE="$R none --no-distributed-optimizer --no-sequence-parallel"
FULL="--recompute-method uniform --recompute-num-layers 1"
echo "predicted / measured (time: median ms/iteration; memory: largest per-rank peak RSS)"
compare 1 "$T 1 $P 1 $B 8 $NONE" ""
compare 2 "$T 2 $P 1 $B 8 $NONE" ""
compare 2 "$T 2 $P 1 $B 8 $R none --no-distributed-optimizer --sequence-parallel" ""
compare 2 "$T 2 $P 1 $B 4 $R full --no-distributed-optimizer --no-sequence-parallel" "$FULL"
compare 2 "$T 1 $P 1 $B 4 $NONE" "--overlap-grad-reduce"
compare 2 "$T 1 $P 1 $B 2 $R none --use-distributed-optimizer" "--overlap-grad-reduce --overlap-param-gather"
compare 2 "$T 1 $P 2 $V 2 $B 2 $NONE" ""
compare 2 "$T 1 $P 2 $V 1 $B 2 $NONE" ""
compare 2 "$T 1 $P 2 $V 2 $B 4 $R selective --no-distributed-optimizer" ""
/usr/bin/python3 - "$results" <<'PY'
import itertools, json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["ranks"] == 2]
by_pred = sorted(range(len(rows)), key=lambda i: rows[i]["predicted"])
by_meas = sorted(range(len(rows)), key=lambda i: rows[i]["measured"])
print("2-rank layouts, fastest first: predicted", [i + 1 for i in by_pred], "measured", [i + 1 for i in by_meas])
pairs = list(itertools.combinations(range(len(rows)), 2))
sign = lambda x: (x > 0) - (x < 0)
agree = sum(sign(rows[a]["predicted"] - rows[b]["predicted"]) * sign(rows[a]["measured"] - rows[b]["measured"]) for a, b in pairs)
print(f"Kendall's tau {agree / len(pairs):.2f} over {len(rows)} layouts (1: the same order)")
# Layouts whose measured times lie closer than run-to-run noise have no measured order to
# predict; count the pairs that are clearly apart.
GAP = float(__import__("os").environ.get("GAP", "0.10"))
apart = [(a, b) for a, b in pairs
         if abs(rows[a]["measured"] - rows[b]["measured"]) > GAP * min(rows[a]["measured"], rows[b]["measured"])]
right = sum(sign(rows[a]["predicted"] - rows[b]["predicted"]) == sign(rows[a]["measured"] - rows[b]["measured"]) for a, b in apart)
print(f"pairs measured more than {100 * GAP:.0f}% apart: {len(apart)}, ordered as predicted: {right}")
PY
