#!/usr/bin/python3
"""Context parallelism (--context-parallel-size c; --cp-comm-type p2p, the ring, by default, a2a
and allgather) over MPI:
  * parity with one process (losses, grad norms, final weights; 1e-5): c = 2 and 4, c x t with
    sequence parallelism, c x p, c x d with the distributed optimizer, hidden and attention
    dropout (the masks are keyed by global position, so they must be the one-process run's),
    packed documents (--reset-attention-mask --reset-position-ids: document starts and
    positions are global, found over the whole sample), GPT-2 style (learned positions) and
    Llama style (RoPE at global positions, grouped-query attention, q|kv fused or apart);
  * the printed memory plan: activations per rank at c = 2 at most 0.6 x those at c = 1
    (seq 1024);
  * a checkpoint saved at c = 2 resumes at c = 1 (and one saved at c = 1 at c = 2) with the
    losses of the run that never stopped;
  * bad input exits 2 naming the flag and the rule: seq not divisible by 2c, a2a with heads
    not divisible by c, cp with MoE.
Usage: context_parallel_test.py TRIDENT"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from parity import MPI_ENV, Checks, read_safetensors, relative, run_parity, train

TINY = ["--mock-data", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
        "--vocab-size", "301", "--micro-batch-size", "2", "--global-batch-size", "4",
        "--lr", "1e-3", "--lr-warmup-iters", "2", "--eval-iters", "1", "--peak-tflops", "1",
        "--seed", "5", "--log-interval", "1", "--num-layers", "2", "--train-iters", "6"]
LLAMA = ["--normalization", "RMSNorm", "--position-embedding-type", "rope", "--swiglu",
         "--group-query-attention", "--num-query-groups", "2",
         "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--ffn-hidden-size", "96"]
C2 = ["--context-parallel-size", "2"]  # the ring (p2p), the default
C4 = ["--context-parallel-size", "4"]
A2A = C2 + ["--cp-comm-type", "a2a"]
ALLGATHER = C2 + ["--cp-comm-type", "allgather"]
T2 = ["--tensor-model-parallel-size", "2", "--sequence-parallel"]
P2 = ["--pipeline-model-parallel-size", "2"]
# The mock data's end-of-document token is the last id of the vocabulary.
PACKED = ["--reset-attention-mask", "--reset-position-ids", "--eod-id", "300"]
DROPOUT = ["--hidden-dropout", "0.1", "--attention-dropout", "0.1"]
check = Checks()


def mpirun(ranks, args):
    return ["mpirun", "--oversubscribe", "-np", str(ranks)] + args + ["--threads", "1"]


def run(trident, ranks, args):
    cmd = [trident, "train"] + args
    cmd = mpirun(ranks, cmd) if ranks > 1 else cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    return out.returncode, out.stdout + out.stderr


def parity(trident):
    layouts = [("c=2 ring", C2, 2),
               ("c=4 ring (4-token chunks)", C4, 4),
               ("c=2 ring t=2 sequence parallel", C2 + T2, 4),
               ("c=2 ring p=2", C2 + P2, 4),
               ("c=2 ring d=2 distributed optimizer", C2 + ["--use-distributed-optimizer"], 4),
               ("c=2 ring d=2 ZeRO-3", C2 + ["--data-parallel-sharding-strategy",
                                            "optim_grads_params"], 4),
               ("c=2 a2a", A2A, 2),
               ("c=2 allgather", ALLGATHER, 2)]
    check.add_parity(run_parity(trident, TINY, layouts), len(layouts))
    layouts = [("dropout c=2 ring", C2, 2), ("dropout c=2 ring t=2 sequence parallel", C2 + T2, 4),
               ("dropout c=2 a2a", A2A, 2), ("dropout c=2 allgather", ALLGATHER, 2)]
    check.add_parity(run_parity(trident, TINY + DROPOUT, layouts), len(layouts))
    layouts = [("packed documents c=2 ring", C2, 2), ("packed documents c=4 ring", C4, 4),
               ("packed documents c=2 a2a", A2A, 2)]
    check.add_parity(run_parity(trident, TINY + PACKED, layouts), len(layouts))
    layouts = [("llama c=2 ring", C2, 2), ("llama c=2 ring t=2 sequence parallel", C2 + T2, 4),
               ("llama c=2 a2a (grouped-query heads split)", A2A, 2),
               ("llama c=2 ring, full recompute", C2 + ["--recompute-granularity", "full",
                                                       "--recompute-method", "uniform", "--recompute-num-layers", "1"], 2)]
    check.add_parity(run_parity(trident, TINY + LLAMA, layouts), len(layouts))
    layouts = [("llama packed documents, dropout c=2 ring", C2, 2),
               ("llama packed documents, dropout c=2 a2a", A2A, 2)]
    check.add_parity(run_parity(trident, TINY + LLAMA + PACKED + DROPOUT, layouts), len(layouts))
    # bf16: the ring merges bf16 tiles' softmax against another running maximum than one
    # process's tiles do, so the runs agree to bf16's rounding, not bit for bit.
    layouts = [("bf16 c=2 ring", C2, 2)]
    check.add_parity(run_parity(trident, TINY + ["--bf16"], layouts, tolerance=5e-3), len(layouts))
    # With biases q and kv are two products: q's rows, then kv's (another QkvLayout).
    biased = [a for a in LLAMA if a != "--disable-bias-linear"]
    layouts = [("llama with biases (q and kv apart) c=2", C2, 2)]
    check.add_parity(run_parity(trident, TINY + biased, layouts), len(layouts))


def activation_floats(log):
    """The 'activations' group of rank 0's printed plan, in floats."""
    total, inside = 0, False
    for line in log.splitlines():
        group = re.match(r"^  (\w+) \(", line)
        if group:
            inside = group.group(1) == "activations"
            continue
        m = re.match(r"^    (.+?)\s+(\d+) floats(?: x\s+(\d+))?", line)
        if m and inside:
            total += int(m.group(2)) * int(m.group(3) or 1)
    return total


def memory_plan(trident):
    args = TINY + ["--train-iters", "1", "--lr-warmup-iters", "0", "--eval-iters", "0",
                   "--seq-length", "1024", "--micro-batch-size", "1", "--global-batch-size", "1"]
    code_1, log_1 = run(trident, 1, args)
    code_2, log_2 = run(trident, 2, args + C2)
    one, two = activation_floats(log_1), activation_floats(log_2)
    if code_1 or code_2:
        print(log_1[-1500:], log_2[-1500:])
    check(code_1 == 0 and code_2 == 0 and one > 0 and two <= 0.6 * one,
          f"memory plan, seq 1024: activations per rank at c=2 {two * 4} B <= 0.6 x c=1's "
          f"{one * 4} B (ratio {two / max(one, 1):.3f})")


def checkpoints(trident, tmp):
    """Saved at iteration 3 of a 6-iteration run under one c, resumed under the other: the
    last three losses equal the uninterrupted run's."""
    later = lambda rows: [r["loss"] for r in rows if "loss" in r and r["iteration"] > 3]
    for saved, resumed in (("c=2", "c=1"), ("c=1", "c=2")):
        flags = {"c=1": ([], 1), "c=2": (C2, 2)}
        (save_flags, save_ranks), (load_flags, load_ranks) = flags[saved], flags[resumed]
        ck = os.path.join(tmp, f"ck_{saved}")
        full, full_w = train(trident, TINY + save_flags + ["--save", ck, "--save-interval", "3"],
                             save_ranks, tmp, f"full_{saved}")
        if saved == "c=2":
            converted(trident, ck, full_w, tmp)
        at_3 = ck + "_at_3"
        shutil.copytree(ck, at_3)
        with open(os.path.join(at_3, "latest"), "w") as f:
            f.write("iter_0000003\n")
        try:
            rows, _ = train(trident, TINY + load_flags + ["--load", at_3], load_ranks, tmp,
                            f"resumed_{saved}_{resumed}")
        except RuntimeError as e:
            check(False, f"checkpoint saved at {saved} resumes at {resumed}: {e}")
            continue
        a, b = later(full), later(rows)
        worst = max((relative(y, x) for x, y in zip(a, b)), default=1.0)
        check(len(a) == 3 and len(b) == 3 and worst < 1e-5,
              f"checkpoint saved at {saved} resumes at {resumed}: iterations 4-6 losses within "
              f"{worst:.1e} of the uninterrupted run's")


def converted(trident, ck, trained, tmp):
    """A one-process command (convert) loads the c = 2 checkpoint: its weights are the
    run's own (--save-hf at the end of the run), bit for bit."""
    out_dir = os.path.join(tmp, "converted")
    out = subprocess.run([trident, "convert", "--load", ck, "--save-hf", out_dir], text=True,
                         capture_output=True)
    got = read_safetensors(os.path.join(out_dir, "model.safetensors")) if out.returncode == 0 else {}
    same = bool(got) and got.keys() == trained.keys() and all(
        np.array_equal(got[k], trained[k]) for k in trained)
    check(same, f"the checkpoint saved at c=2 loads in one process (convert): its {len(got)} "
                f"tensors equal the run's own")


def refusals(trident):
    cases = [(["--seq-length", "30", "--context-parallel-size", "2"],
              "--seq-length (30) must be divisible by 2 x --context-parallel-size (2 x 2)"),
             (["--context-parallel-size", "8", "--cp-comm-type", "a2a"],
              "--cp-comm-type a2a needs the attention heads (4) and key/value heads (4) of each "
              "tensor-parallel rank divisible by --context-parallel-size (8)"),
             (["--context-parallel-size", "2", "--num-experts", "2"],
              "--context-parallel-size 2: mixture-of-experts models (--num-experts) are not built "
              "with context parallelism yet"),
             (["--context-parallel-size", "2", "--cp-comm-type", "ring"],
              "--cp-comm-type must be p2p, a2a or allgather (got 'ring')")]
    for flags, rule in cases:
        code, log = run(trident, 1, TINY + flags)
        check(code == 2 and rule in log, f"refused (exit {code}): {rule}")


def main():
    trident = sys.argv[1]
    parity(trident)
    memory_plan(trident)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints(trident, tmp)
    refusals(trident)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
