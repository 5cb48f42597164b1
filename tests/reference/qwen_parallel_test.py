#!/usr/bin/python3
"""Qwen2 (--add-qkv-bias with --disable-bias-linear) and Qwen3 (--qk-layernorm, --kv-channels
wider than hidden / heads, no biases) trained from scratch with Megatron's flags: every
layout trains the same model as one process (losses, grad norms and final weights within
1e-5). Tensor parallelism splits the q/k/v biases with their heads and sums the replicated
q/k norm weights' partial gradients over the tensor group (with and without sequence
parallelism, with the key/value groups split, G = 2, and replicated, G = 1); pipeline, data
(distributed optimizer), recompute and zb-h1 run the same layers. The one-process run is
itself checked against an independent PyTorch Qwen in qwen_reference_test.py. Then the new
flags' argument checks.
Usage: qwen_parallel_test.py /path/to/trident
"""
import subprocess
import sys

from parity import Checks, run_parity

BLOCK = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--ffn-hidden-size", "96", "--seq-length", "32", "--vocab-size", "301",
         "--micro-batch-size", "4", "--global-batch-size", "8", "--lr", "1e-3",
         "--lr-warmup-iters", "2", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "5",
         "--train-iters", "4", "--log-interval", "1",
         "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--swiglu",
         "--group-query-attention", "--disable-bias-linear"]
QWEN2 = BLOCK + ["--add-qkv-bias"]
QWEN3 = BLOCK + ["--qk-layernorm", "--kv-channels", "24", "--untie-embeddings-and-output-weights"]
T2 = ["--tensor-model-parallel-size", "2"]
P2 = ["--pipeline-model-parallel-size", "2"]
D2_RECOMPUTE = ["--use-distributed-optimizer", "--recompute-granularity", "full",
                "--recompute-method", "uniform", "--recompute-num-layers", "1"]


def layouts(groups):
    return [(f"G={groups}, t=2", T2, 2),
            (f"G={groups}, t=2 sequence parallel, selective recompute",
             T2 + ["--sequence-parallel", "--recompute-granularity", "selective"], 2),
            (f"G={groups}, p=2", P2, 2),
            (f"G={groups}, d=2 distributed optimizer, full recompute", D2_RECOMPUTE, 2),
            (f"G={groups}, t=2 p=2 zb-h1", T2 + P2 + ["--pipeline-schedule", "zb-h1"], 4),
            (f"G={groups}, t=2 p=2 d=2 sequence parallel", T2 + P2 + ["--sequence-parallel"], 8)]


def main():
    trident = sys.argv[1]
    check = Checks()
    for name, model in (("Qwen2", QWEN2), ("Qwen3", QWEN3)):
        for groups in (2, 1):
            print(f"{name}, {groups} query group(s):")
            runs = layouts(groups) if groups == 2 else layouts(groups)[:2]
            check.add_parity(run_parity(trident, model + ["--num-query-groups", str(groups)], runs),
                             len(runs))
    # bf16: the same flags train, the final loss near fp32's (bf16 products, fp32 master).
    for name, model in (("Qwen2", QWEN2), ("Qwen3", QWEN3)):
        final = []
        for precision in ([], ["--bf16"]):
            out = subprocess.run([trident, "train"] + model + ["--num-query-groups", "2"] + precision,
                                 capture_output=True, text=True)
            lines = [l for l in out.stdout.splitlines() if "final train loss:" in l]
            final.append(float(lines[0].split(":")[1].split()[0]) if out.returncode == 0 and lines
                         else float("nan"))
        check(abs(final[1] - final[0]) < 2e-2 * final[0],
              f"{name} trains in bf16: final loss {final[1]:.4f} vs fp32 {final[0]:.4f}")

    bad = subprocess.run([trident, "train", "--mock-data", "--train-iters", "1", "--kv-channels",
                          "-3", "--qk-layernorm"], capture_output=True, text=True)
    for rule in ("--kv-channels must be > 0", "--qk-layernorm normalises q and k with RMSNorm"):
        check(bad.returncode == 2 and rule in bad.stderr, f"refused: {rule}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
