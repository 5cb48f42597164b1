#!/usr/bin/env bash
# trident plan's predictions against trident train here, layout by layout: predicted time
# per iteration vs the measured ms/iteration (the median of iterations 4-10 in each run, then
# the median over ROUNDS runs taken round-robin, so a slow minute of the shared machine hits
# every layout alike), and predicted memory per device vs the largest per-rank peak RSS
# (/usr/bin/time). The cluster file is the calibrated clusters/this-machine.toml (or
# $CLUSTER). Every layout flag is fixed on both sides. At the end, the 2-rank layouts ordered
# by predicted and by measured time, with Kendall's tau and how many pairs measured more than
# GAP (5%) apart are ordered as predicted.
#   bench/plan_vs_measured.sh [small|wide]   (ROUNDS=3)
# small: 4 layers, h 256, s 128, the GPT-2 vocabulary (the output layer is most of the work);
# wide: 8 layers, h 512, s 256, vocabulary 8192 (the layers are; pipelines pay their bubble).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
CLUSTER=${CLUSTER:-clusters/this-machine.toml}
ROUNDS=${ROUNDS:-3}
which=${1:-small}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

T=--tensor-model-parallel-size P=--pipeline-model-parallel-size B=--micro-batch-size
V=--num-layers-per-virtual-pipeline-stage R=--recompute-granularity
NONE="$R none --no-distributed-optimizer --no-sequence-parallel"
FULL="--recompute-method uniform --recompute-num-layers 1"
# Each layout: ranks | the layout's flags (both commands) | trident train's extra flags.
case $which in
  small)
    MODEL="--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 50257 --bf16 --global-batch-size 16"
    layouts=(
      "1|$T 1 $P 1 $B 8 $NONE|"
      "2|$T 2 $P 1 $B 8 $NONE|"
      "2|$T 2 $P 1 $B 8 $R none --no-distributed-optimizer --sequence-parallel|"
      "2|$T 2 $P 1 $B 4 $R full --no-distributed-optimizer --no-sequence-parallel|$FULL"
      "2|$T 1 $P 1 $B 4 $NONE|--overlap-grad-reduce"
      "2|$T 1 $P 1 $B 2 $R none --use-distributed-optimizer|--overlap-grad-reduce --overlap-param-gather"
      "2|$T 1 $P 2 $V 1 $B 2 $NONE|"
      "2|$T 1 $P 2 $V 2 $B 2 $NONE|"
      "2|$T 1 $P 2 $V 1 $B 4 $R selective --no-distributed-optimizer|"
    ) ;;
  wide)
    # Chosen so that no two 2-rank layouts are predicted within 6% of each other: closer
    # than that, the shared machine's run-to-run noise decides their measured order.
    MODEL="--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length 256 --vocab-size 8192 --bf16 --global-batch-size 16"
    ZB="--pipeline-schedule zb-h1"
    layouts=(
      "1|$T 1 $P 1 $B 4 $NONE|"
      "2|$T 1 $P 1 $B 8 $R selective --use-distributed-optimizer|--overlap-grad-reduce --overlap-param-gather"
      "2|$T 2 $P 1 $B 2 $NONE|"
      "2|$T 1 $P 2 $V 1 $B 2 $NONE|"
      "2|$T 1 $P 2 $B 8 $NONE $ZB|"
      "2|$T 2 $P 1 $B 4 $R full --no-distributed-optimizer --no-sequence-parallel|$FULL"
      "2|$T 1 $P 2 $V 4 $B 8 $NONE --pipeline-schedule 1f1b|"
      "2|$T 1 $P 2 $B 16 $NONE $ZB|"
      "2|$T 1 $P 2 $V 4 $B 16 $NONE --pipeline-schedule 1f1b|"
    ) ;;
  *) echo "usage: $0 [small|wide]" >&2; exit 2 ;;
esac

# trident train has no flags for "no recomputation" and "no distributed optimizer".
train_flags() {
  echo "$1" | sed 's/--recompute-granularity none//; s/--no-distributed-optimizer//; s/--no-sequence-parallel//'
}

# $1: ranks; $2: train flags; $3: extra; prints the median ms/iteration of iterations 4-10.
timed_run() {
  mpirun -np "$1" build/trident train --mock-data $MODEL $2 $3 --train-iters 10 --log-interval 1 \
    --eval-iters 0 2>&1 | grep -E "iteration +([4-9]|10)/" |
    sed 's/.*per iteration (ms): \([0-9.]*\).*/\1/' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
}

for ((r = 0; r < ROUNDS; ++r)); do
  for i in "${!layouts[@]}"; do
    IFS='|' read -r np layout extra <<< "${layouts[$i]}"
    timed_run "$np" "$(train_flags "$layout")" "$extra" >> "$work/ms.$i"
  done
done

echo "predicted / measured (time: median ms/iteration over $ROUNDS rounds; memory: largest per-rank peak RSS)"
for i in "${!layouts[@]}"; do
  IFS='|' read -r np layout extra <<< "${layouts[$i]}"
  # Peak RSS of every rank from a short run of its own: under /usr/bin/time the ranks ran
  # 2-3x slower here, so the timed runs go without it.
  # A run that fails (the shared machine has killed one now and then) is tried again, and
  # its output is shown if it keeps failing.
  rss=
  for try in 1 2 3; do
    # Each rank appends its line to one file (one write each, so they cannot interleave as
    # two ranks' stderr did).
    rm -f "$work/rss"
    mpirun -np "$np" /usr/bin/time -f "rank peak RSS %M KiB" -a -o "$work/rss" build/trident train \
      --mock-data $MODEL $(train_flags "$layout") $extra --train-iters 2 --eval-iters 0 \
      > "$work/rss.log" 2>&1 || true
    rss=$(grep -o "rank peak RSS [0-9]*" "$work/rss" 2> /dev/null | awk '{print $4}' | sort -n | tail -1)
    [[ $(grep -c "rank peak RSS" "$work/rss" 2> /dev/null) == "$np" ]] && break
    echo "layout $((i + 1)): the peak-RSS run failed (try $try):" >&2
    tail -5 "$work/rss.log" >&2
  done
  [[ -n $rss ]] || { echo "layout $((i + 1)): no peak RSS" >&2; exit 1; }
  predicted=$(build/trident plan --cluster "$CLUSTER" $MODEL --num-devices "$np" $layout --json --top 1)
  /usr/bin/python3 - "$np" "$layout" "$work/ms.$i" "$rss" "$predicted" "$work/results" <<'PY'
import json, statistics, sys
np_, layout, runs, rss, plan = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), json.loads(sys.argv[5])["plans"][0]
samples = [float(x) for x in open(runs)]
ms = statistics.median(samples)
t, mem = plan["time_per_iteration_s"] * 1e3, plan["memory_per_device_gib"] * 1024
spread = (max(samples) - min(samples)) / ms
print(f"{np_} ranks {layout:<112} time {t:7.1f} / {ms:7.1f} ms = {t / ms:4.2f} (rounds {100 * spread:3.0f}% apart)   memory {mem:6.1f} / {rss / 1024:6.1f} MiB = {mem * 1024 / rss:4.2f}")
with open(sys.argv[6], "a") as f:
    f.write(json.dumps({"ranks": int(np_), "layout": layout, "predicted": t, "measured": ms}) + "\n")
PY
done
/usr/bin/python3 - "$work/results" <<'PY'
import itertools, json, os, sys
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
GAP = float(os.environ.get("GAP", "0.05"))
apart = [(a, b) for a, b in pairs
         if abs(rows[a]["measured"] - rows[b]["measured"]) > GAP * min(rows[a]["measured"], rows[b]["measured"])]
right = sum(sign(rows[a]["predicted"] - rows[b]["predicted"]) == sign(rows[a]["measured"] - rows[b]["measured"]) for a, b in apart)
print(f"pairs measured more than {100 * GAP:.0f}% apart: {len(apart)}, ordered as predicted: {right}")
PY
