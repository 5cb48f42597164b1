#!/usr/bin/env bash
# Packed documents with and without their attention masks (issue 34): tokens/s of a model
# whose attention is a large share of the work (4 layers, hidden 256, sequence 2048) trained
# on documents of a chat-like length mix (log-normal, median 300 tokens, 20 to 2048) packed
# back to back, once as one long causal sequence and once with --reset-attention-mask
# --reset-position-ids (key tiles before a query block's document are skipped). The runs
# alternate ROUNDS times; per run the median of the iterations after the first. Prints the
# tokens/s of each, their ratio, and the share of attention tiles the masks leave.
#   bench/packed_attention.sh          (ROUNDS=2 ITERS=4; about 15 s here)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-4}
TRIDENT=${TRIDENT:-build/trident}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
SEQ=2048
/usr/bin/python3 - "$work/docs" "$SEQ" <<'PY'
import struct, sys
import numpy as np
prefix, seq = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
lengths = np.clip(rng.lognormal(np.log(300), 0.8, 4000).astype(int), 20, seq)
eod = 0
docs = [np.append(rng.integers(1, 1000, n - 1), eod).astype(np.uint16) for n in lengths]
with open(prefix + ".bin", "wb") as f:
    for d in docs:
        f.write(d.tobytes())
sizes = np.array([len(d) for d in docs], np.int32)
pointers = np.concatenate([[0], np.cumsum(sizes[:-1]) * 2]).astype(np.int64)
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8))
    f.write(struct.pack("<QQ", len(docs), len(docs) + 1))
    f.write(sizes.tobytes() + pointers.tobytes() + np.arange(len(docs) + 1, dtype=np.int64).tobytes())
# The share of (64 x 64) attention tiles the document masks leave, over windows of the stream.
stream = np.concatenate(docs)
kept = full = 0
for w in range(0, len(stream) - seq, seq * 7):
    starts, start = [], 0
    for t, tok in enumerate(stream[w:w + seq]):
        starts.append(start)
        if tok == eod:
            start = t + 1
    for qs in range(0, seq, 64):
        full += qs // 64 + 1
        kept += qs // 64 - starts[qs] // 64 + 1
print(f"documents: median {int(np.median(lengths))} tokens; the masks leave {kept / full:.2f} "
      f"of the causal attention tiles", file=open(prefix + ".tiles", "w"))
PY
COMMON="--data-path $work/docs --split 100,0,0 --data-cache-path $work/cache --num-layers 4
  --hidden-size 256 --num-attention-heads 4 --seq-length $SEQ --max-position-embeddings $SEQ
  --vocab-size 1024 --micro-batch-size 1 --global-batch-size 2 --threads 2 --eval-iters 0
  --log-interval 1 --train-iters $ITERS --eod-id 0"
declare -A FLAGS=([causal]="" [documents]="--reset-attention-mask --reset-position-ids")
for ((r = 0; r < ROUNDS; ++r)); do
  for s in causal documents; do
    "$TRIDENT" train $COMMON ${FLAGS[$s]} > "$work/log" 2>&1 || { tail -20 "$work/log" >&2; exit 1; }
    grep -E "iteration +[0-9]+/" "$work/log" | grep -vE "iteration +1/" |
      sed 's/.*per iteration (ms): \([0-9.]*\).*/\1/' | sort -n |
      awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}' >> "$work/$s"
  done
done
cat "$work/docs.tiles"
/usr/bin/python3 - "$work" "$SEQ" <<'PY'
import statistics, sys
work, seq = sys.argv[1], int(sys.argv[2])
runs = {s: [float(x) for x in open(f"{work}/{s}")] for s in ("causal", "documents")}
rate = {s: 2 * seq / (statistics.median(ms) / 1e3) for s, ms in runs.items()}
for s, ms in runs.items():
    print(f"{s}: median ms/iteration per run {', '.join(f'{m:.0f}' for m in ms)}; "
          f"{rate[s]:.0f} tokens/s")
print(f"documents / causal tokens/s: {rate['documents'] / rate['causal']:.2f}")
PY
