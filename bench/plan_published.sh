#!/usr/bin/env bash
# trident plan's model against published GPU runs: the PTD-P paper's weak-scaling table
# (Narayanan et al. 2021, Table 1: GPT models of 1.7B-1T parameters on up to 3072 A100s,
# s = 2048, V = 51200, full activation recomputation, achieved TFLOP/s per GPU by the paper's
# FLOPs) and MT-NLG 530B (Smith et al. 2022: t = 8, p = 35, 280-420 DGX A100 nodes, 113-126
# TFLOP/s per GPU). Each run's t, p, device count and global batch are fixed; the planner
# picks b and v. Memory is left unbounded: trident's own buffers (fp32 activations and
# communication) are larger than Megatron's, and the question here is time. The cluster is
# clusters/dgx-a100.toml's datasheet numbers with the stated default GEMM curve: nothing is
# fitted to these runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=$(mktemp --suffix .toml)
trap 'rm -f "$cluster"' EXIT
sed 's/^memory_gib = .*/memory_gib = 1e6/' clusters/dgx-a100.toml > "$cluster"

# name | heads hidden layers | t p devices batch | published TFLOP/s per GPU
runs=(
  "1.7B|24 2304 24|1 1 32 512|137"
  "3.6B|32 3072 30|2 1 64 512|138"
  "7.5B|32 4096 36|4 1 128 512|142"
  "18.4B|48 6144 40|8 1 256 1024|135"
  "39.1B|64 8192 48|8 2 512 1536|138"
  "76.1B|80 10240 60|8 4 1024 1792|140"
  "145.6B|96 12288 80|8 8 1536 2304|148"
  "310.1B|128 16384 96|8 16 1920 2160|155"
  "529.6B|128 20480 105|8 35 2520 2520|163"
  "1008B|160 25600 128|8 64 3072 3072|163"
  "MT-NLG 530B|128 20480 105|8 35 2240 1920|113-126"
)
printf "%-12s %4s %4s %6s %6s  %9s %9s  %s\n" model t p GPUs batch predicted published "predicted / published (best plan)"
for run in "${runs[@]}"; do
  IFS='|' read -r name shape layout published <<< "$run"
  read -r heads hidden layers <<< "$shape"
  read -r t p n batch <<< "$layout"
  json=$(build/trident plan --cluster "$cluster" --num-devices "$n" --num-layers "$layers" \
    --hidden-size "$hidden" --num-attention-heads "$heads" --seq-length 2048 --vocab-size 51200 \
    --make-vocab-size-divisible-by 128 --global-batch-size "$batch" --bf16 \
    --tensor-model-parallel-size "$t" --pipeline-model-parallel-size "$p" \
    --recompute-granularity full --no-sequence-parallel --pipeline-schedule 1f1b --json --top 1)
  /usr/bin/python3 - "$name" "$t" "$p" "$n" "$batch" "$published" "$json" <<'PY'
import json, sys
name, t, p, n, batch, published, text = sys.argv[1:]
plan = json.loads(text)["plans"][0]
low, high = (float(x) for x in (published.split("-") * 2)[:2])
mid = (low + high) / 2
print(f"{name:<12} {t:>4} {p:>4} {n:>6} {batch:>6}  {plan['tflops_per_device']:9.0f} {published:>9}  "
      f"{plan['tflops_per_device'] / mid:.2f}x (b={plan['micro_batch']} v={plan['virtual']} "
      f"d={plan['data']}, bubble {100 * plan['bubble']:.1f}%)")
PY
done
