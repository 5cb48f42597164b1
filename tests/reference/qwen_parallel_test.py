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
import os
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks, read_safetensors, run_parity

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


def reshard(check, trident):
    """A Qwen3 checkpoint saved under t = 2, p = 2 (G = 2) is read back by one process: its
    HF export equals the one the training run wrote itself, and training resumes from it at
    t = 1 and at t = 2 with sequence parallelism, the two giving the same next loss."""
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, hf, back = (os.path.join(tmp, n) for n in ("ckpt", "hf", "back"))
        cmd = ["mpirun", "--oversubscribe", "-np", "4", trident, "train"] + QWEN3 + \
            ["--num-query-groups", "2", "--lr-decay-iters", "8", "--threads", "1", "--save", ckpt, "--save-hf", hf] + T2 + P2
        a = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
        b = subprocess.run([trident, "convert", "--load", ckpt, "--save-hf", back],
                           capture_output=True, text=True)
        ok = a.returncode == 0 and b.returncode == 0
        if ok:
            x, y = (read_safetensors(os.path.join(d, "model.safetensors")) for d in (hf, back))
            ok = x.keys() == y.keys() and all(x[n].tobytes() == y[n].tobytes() for n in x)
        check(ok, f"t=2 p=2 checkpoint read by one process = the run's own HF export "
                  f"{a.stderr[-300:]}{b.stderr[-300:]}")
        losses = []
        for ranks, layout in ((1, []), (2, T2 + ["--sequence-parallel"])):
            cmd = [trident, "train"] + QWEN3 + ["--num-query-groups", "2", "--load", ckpt,
                                                "--train-iters", "6", "--lr-decay-iters", "8"] + layout
            if ranks > 1:
                cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd + ["--threads", "1"]
            out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
            lines = [l for l in out.stdout.splitlines() if "final train loss:" in l]
            losses.append(float(lines[0].split(":")[1].split()[0]) if lines else float("nan"))
        check(abs(losses[0] - losses[1]) < 1e-5 * losses[0],
              f"resumed at t=1 and at t=2 sp: final loss {losses[0]:.7f} vs {losses[1]:.7f}")


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

    reshard(check, trident)
    bad = subprocess.run([trident, "train", "--mock-data", "--train-iters", "1", "--kv-channels",
                          "-3", "--qk-layernorm"], capture_output=True, text=True)
    for rule in ("--kv-channels must be > 0", "--qk-layernorm normalises q and k with RMSNorm"):
        check(bad.returncode == 2 and rule in bad.stderr, f"refused: {rule}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
