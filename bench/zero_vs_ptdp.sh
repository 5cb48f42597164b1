#!/usr/bin/env bash
# The seeds' comparison, measured (issue 31): the same model trained on 4 ranks as d = 4 with
# each data-parallel sharding strategy (no sharding, ZeRO-1, ZeRO-2, ZeRO-3), as t = 2 x d = 2,
# p = 2 x d = 2 and t = 2 x p = 2. Per layout:
#   - time per iteration: the median of the iterations after the first, pooled over ROUNDS
#     runs taken round-robin (a slow minute of the shared machine hits every layout alike);
#   - peak RSS per rank: the largest of the ranks' /usr/bin/time %M (the largest over rounds);
#   - communication per iteration: trident's "collectives of rank 0 per training iteration"
#     table summed per group (trident's counts: an all-reduce counts its buffer, a
#     reduce-scatter its whole input, an all-gather this rank's part, send/recv their message),
#     the time rank 0 spent inside MPI, and the data-parallel bytes a ring sends per rank
#     (all-reduce 2(d-1)/d, reduce-scatter (d-1)/d of the counted bytes, all-gather d-1 times
#     them), which is what the planner's data_parallel_bytes counts;
#   - beside each, trident plan's prediction for the same layout, every layout flag fixed.
# The cluster file is a copy of clusters/this-machine.toml (or $CLUSTER) with 4 devices, each
# given half a core: 4 ranks share the machine's 2 cores here, so the copy halves each
# rank's peak, memory bandwidth and memory and doubles its per-element costs. The times are
# therefore those of 4 ranks time-sharing 2 cores, not of 4 devices.
#   bench/zero_vs_ptdp.sh        (ROUNDS=2 ITERS=5 MICRO=1; about 5 minutes here, ranks at nice 10)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
CLUSTER=${CLUSTER:-clusters/this-machine.toml}
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-5}
MICRO=${MICRO:-1}
TRIDENT=${TRIDENT:-build/trident}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

MODEL="--num-layers 6 --hidden-size 512 --num-attention-heads 8 --seq-length 128 --vocab-size 50257 --bf16 --global-batch-size 16"
T=--tensor-model-parallel-size P=--pipeline-model-parallel-size S=--data-parallel-sharding-strategy
OVERLAP="--overlap-grad-reduce --overlap-param-gather"
# Each layout: name | trident train's layout flags | trident plan's extra flags (fixing what
# the train flags leave to defaults: v = 1, 1F1B, no sequence parallelism).
layouts=(
  "d=4 no_shard|$T 1 $P 1 $S no_shard|"
  "d=4 ZeRO-1 (optim)|$T 1 $P 1 $S optim $OVERLAP|"
  "d=4 ZeRO-2 (optim_grads)|$T 1 $P 1 $S optim_grads $OVERLAP|"
  "d=4 ZeRO-3 (optim_grads_params)|$T 1 $P 1 $S optim_grads_params --overlap-grad-reduce|"
  "t=2 x d=2 (ZeRO-1)|$T 2 $P 1 $S optim $OVERLAP|--no-sequence-parallel"
  "p=2 x d=2 (ZeRO-1)|$T 1 $P 2 $S optim $OVERLAP|--num-layers-per-virtual-pipeline-stage 3 --pipeline-schedule 1f1b"
  "t=2 x p=2|$T 2 $P 2|--no-sequence-parallel --num-layers-per-virtual-pipeline-stage 3 --pipeline-schedule 1f1b"
)

# 4 devices of half a core each.
/usr/bin/python3 - "$CLUSTER" "$work/cluster.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def scale(key, factor):
    global text
    text, n = re.subn(rf"^({key} = )([0-9.eE+-]+)$", lambda m: f"{m[1]}{float(m[2]) * factor!r}", text, flags=re.M)
    assert n == 1, key
scale("devices", 2)  # in [node]: 2 -> 4
text = text.replace("devices = 4.0", "devices = 4")
for key in ("peak_tflops", "memory_bandwidth_gbs", "memory_gib"):
    scale(key, 0.5)
for key in ("elementwise_ns_per_element", "cross_entropy_ns_per_logit", "optimizer_ns_per_parameter"):
    scale(key, 2)
open(sys.argv[2], "w").write(text)
PY

run_layout() {  # $1: index, $2: train flags; appends ms samples, RSS and the collectives table
  local i=$1 flags=$2
  rm -f "$work/rss"
  nice -n 10 mpirun --oversubscribe -np 4 /usr/bin/time -f "rank peak RSS %M KiB" -a -o "$work/rss" \
    "$TRIDENT" train --mock-data --threads 1 $MODEL --micro-batch-size "$MICRO" $flags \
    --train-iters "$ITERS" --log-interval 1 --eval-iters 0 > "$work/log.$i" 2>&1 ||
    { echo "layout $((i + 1)) failed:" >&2; tail -20 "$work/log.$i" >&2; exit 1; }
  grep -E "iteration +[0-9]+/" "$work/log.$i" | grep -vE "iteration +1/" |
    sed 's/.*per iteration (ms): \([0-9.]*\).*/\1/' >> "$work/ms.$i"
  grep -o "rank peak RSS [0-9]*" "$work/rss" | awk '{print $4}' >> "$work/rss.$i"
  sed -n '/^collectives of rank 0/,/^[^ ]/p' "$work/log.$i" | grep '^  ' > "$work/coll.$i"
}

for ((r = 0; r < ROUNDS; ++r)); do
  for i in "${!layouts[@]}"; do
    IFS='|' read -r name flags extra <<< "${layouts[$i]}"
    [[ -n $flags ]] && run_layout "$i" "$flags"
  done
done

echo "6 layers, h 512, 8 heads, s 128, GPT-2 vocabulary, bf16, global batch 16, micro-batch $MICRO, 4 ranks on"
echo "this machine's 2 cores (--threads 1); measured: median ms/iteration of iterations 2-$ITERS over $ROUNDS"
echo "round(s), largest peak RSS over the ranks; planned: trident plan, 4 half-core devices"
for i in "${!layouts[@]}"; do
  IFS='|' read -r name flags extra <<< "${layouts[$i]}"
  # The planner's flags: the train flags without the overlap switches (the planner assumes
  # them) plus the fixed dimensions.
  pflags="$(echo "$flags" | sed 's/--overlap-grad-reduce//; s/--overlap-param-gather//') $extra"
  plan=$("$TRIDENT" plan --cluster "$work/cluster.toml" --num-devices 4 $MODEL --micro-batch-size "$MICRO" \
    --recompute-granularity none $pflags --json --top 1)
  /usr/bin/python3 - "$name" "$work" "$i" "$plan" <<'PY'
import json, os, statistics, sys
name, work, i, plan = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])["plans"][0]
pt, pm = plan["time_per_iteration_s"] * 1e3, plan["memory_per_device_gib"] * 1024
pdp = plan["data_parallel_bytes"] / 2**20
layout = f"t={plan['tensor']} p={plan['pipeline']} d={plan['data']} {plan['data_parallel_sharding_strategy']}"
print(f"\n{name}  [planned as {layout}]")
ms = statistics.median(float(x) for x in open(f"{work}/ms.{i}"))
rss = max(int(x) for x in open(f"{work}/rss.{i}")) / 1024
print(f"  time   {ms:7.0f} ms/iteration   planned {pt:7.0f} ms   (measured / planned {ms / pt:4.2f})")
print(f"  memory {rss:7.0f} MiB peak RSS    planned {pm:7.0f} MiB  (measured / planned {rss / pm:4.2f})")
groups = {}
sent_dp = 0.0
d = plan["data"]
for line in open(f"{work}/coll.{i}"):
    group, op, calls, mib, ms_mpi = line.split()[0], line.split()[1], *map(float, line.split()[2:])
    g = groups.setdefault(group, [0.0, 0.0, 0.0])
    g[0] += calls; g[1] += mib; g[2] += ms_mpi
    if group == "data":
        sent_dp += mib * {"all-reduce": 2 * (d - 1) / d, "reduce-scatter": (d - 1) / d,
                          "all-gather": d - 1}.get(op, 0)
comm = ", ".join(f"{g} {v[1]:.1f} MiB in {v[0]:.0f} calls ({v[2]:.0f} ms in MPI)" for g, v in groups.items())
print(f"  comm   per iteration (rank 0): {comm}")
if d > 1:
    print(f"  data-parallel sent per rank (ring): {sent_dp:6.1f} MiB   planned {pdp:6.1f} MiB")
with open(f"{work}/summary", "a") as f:
    f.write(json.dumps({"name": name, "ms": ms, "rss": rss, "pt": pt, "pm": pm}) + "\n")
PY
done
/usr/bin/python3 - "$work/summary" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = next(r for r in rows if "ZeRO-1" in r["name"] and r["name"].startswith("d=4"))
print("\nagainst d=4 ZeRO-1 (time, memory): measured / planned")
for r in rows:
    print(f"  {r['name']:<26} time {r['ms'] / base['ms']:4.2f}x / {r['pt'] / base['pt']:4.2f}x   "
          f"memory {r['rss'] / base['rss']:4.2f}x / {r['pm'] / base['pm']:4.2f}x")
order = lambda key: " < ".join(r["name"].split(" (")[0] for r in sorted(rows, key=lambda r: r[key]))
print("fastest first, measured:", order("ms"))
print("fastest first, planned: ", order("pt"))
PY
