#!/usr/bin/python3
"""Expert parallelism (issue 32, step 5) against one process. Every run starts from the same
saved weights and takes one AdamW step with no weight decay or clipping, so the weights'
move gives each gradient exactly (AdamW's first step moves a weight by LR g / (|g| + EPS),
inverted for g, as tests/reference/moe_reference.py does, whose float64 reference checks the
one-process gradients themselves). Checked at 1e-5 relative (normwise per tensor):
  - the step's gradients and its logged losses (language model, load balancing, z) under
    EP = 2 (d = 2), EP = 4 (d = 4) and EP = 2 with p = 2 (world 4), each with and without
    --use-distributed-optimizer, and EP = 2 under ZeRO-2 and ZeRO-3, equal one process's:
    tokens reach the experts of other ranks and come back, and each expert's gradient sums
    every rank's tokens once; so does the logged gradient norm;
  - initialisation does not depend on EP: the weights saved before any step at EP = 2 and
    EP = 4 are the one-process weights, bit for bit;
  - a run saved at EP = 2 resumes at EP = 1 (one process) and at EP = 4 with the losses of
    the run that went on at EP = 2;
  - --sample-prompt while training at EP = 2 prints one process's samples (the experts are
    gathered to the generating rank, which runs them all with no exchange);
  - each rank holds only its E/EP experts: the printed memory plan's expert rows at EP = 2
    (d = 2, and d = 4 with the distributed optimizer, whose Adam state is then split over the
    2-rank expert-data group) and EP = 4 hold the floats of E/EP experts' fc1 and fc2
    computed from their shapes, and the dense weights are one process's less all experts'.
The one-step runs also cover EP = 2 with d = 4 (expert gradients summed over a 2-rank
expert-data group, whose ranks then hold the same gradients, counted once in the norm), with
and without the distributed optimizer (which shards the expert buffer over that group), and
under ZeRO-2 and ZeRO-3, which shard the expert buffer's gradients (and weights) over it too:
every bucket of expert gradients starts its reduce-scatter during the backward (the run's
report says so), and a checkpoint saved after step 2 under each resumes under the same
layout bit for bit, and under the other strategy and in one process within 1e-5.
(The expert rows of the memory plan under ZeRO-2/3 are checked against their formula in
tests/engine/test_rank_memory.cpp.)
One micro-batch per rank and step at every layout (the global batch is the world's), so the
router losses, which are per micro-batch, see the same tokens everywhere.
Usage: moe_ep_parity.py TRIDENT"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from dataset_reference_test import write_dataset
from parity import MPI_ENV, Checks, metrics_by_iteration, read_safetensors

LAYERS, HIDDEN, HEADS, SEQ, VOCAB, EXPERTS, TOPK, MOE_FFN, FFN = 4, 32, 4, 16, 64, 4, 2, 40, 48
GLOBAL = 4  # micro-batch 1: one micro-batch per rank at d = 4, four in one process
LR, EPS = 1.0, 1e-3
MODEL = ["--num-layers", str(LAYERS), "--hidden-size", str(HIDDEN), "--num-attention-heads",
         str(HEADS), "--seq-length", str(SEQ), "--vocab-size", str(VOCAB), "--ffn-hidden-size",
         str(FFN), "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
         "--disable-bias-linear", "--hidden-dropout", "0", "--attention-dropout", "0",
         "--num-experts", str(EXPERTS), "--moe-router-topk", str(TOPK), "--moe-ffn-hidden-size",
         str(MOE_FFN), "--moe-layer-freq", "[1,0,1,1]", "--moe-aux-loss-coeff", "0.05",
         "--moe-z-loss-coeff", "0.01"]
LAYOUTS = [("EP 2, d 2", 2, ["--expert-model-parallel-size", "2"]),
           ("EP 4, d 4", 4, ["--expert-model-parallel-size", "4"]),
           ("EP 2, p 2, d 2", 4, ["--expert-model-parallel-size", "2",
                                  "--pipeline-model-parallel-size", "2"])]
# Sharded gradients and weights at EP 2 (the distributed optimizer is implied by both).
SHARDED = [("EP 2, d 2, ZeRO-2", 2, ["--expert-model-parallel-size", "2",
                                     "--data-parallel-sharding-strategy", "optim_grads"]),
           ("EP 2, d 2, ZeRO-3", 2, ["--expert-model-parallel-size", "2",
                                     "--data-parallel-sharding-strategy", "optim_grads_params"])]
EP2_D4 = ("EP 2, d 4", 4, ["--expert-model-parallel-size", "2"])
# ZeRO-2 and ZeRO-3 at EP 2 with d 4: the expert buffer sharded over a 2-rank expert-data
# group, in buckets of one expert (fc1 and fc2), reduce-scattered while backward runs.
SHARDED_EDP2 = [("EP 2, d 4, " + name, 4, ["--expert-model-parallel-size", "2",
                                          "--data-parallel-sharding-strategy", strategy,
                                          "--ddp-bucket-size", "2000", "--overlap-grad-reduce"])
                for name, strategy in (("ZeRO-2", "optim_grads"), ("ZeRO-3", "optim_grads_params"))]
check = Checks()


def passed(ok, what):
    check(ok, what)
    return ok


def train(trident, ranks, args):
    cmd = [trident, "train"] + args
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--allow-run-as-root"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=600)
    return out.returncode, out.stdout + out.stderr


def weights(directory):
    """Every stage's tensors of the latest iteration, optimizer moments left out."""
    files = sorted(glob.glob(os.path.join(directory, "iter_*", "model_tp*_pp*.safetensors")))
    assert files, directory
    out = {}
    for path in files:
        for k, v in read_safetensors(path).items():
            if not k.endswith(("exp_avg", "exp_avg_sq")):
                out.setdefault(k, v.astype(np.float64))
    return out


def gradients(w0, w1):
    return {k: EPS * (w0[k] - w1[k]) / (LR - np.abs(w0[k] - w1[k])) for k in w0}


def worst_relative(a, b):
    """The largest normwise relative difference over tensors, and where."""
    worst, where = 0.0, ""
    for k in b:
        error = float(np.linalg.norm(a[k] - b[k])) / max(float(np.linalg.norm(b[k])), 1e-12)
        if error > worst:
            worst, where = error, k
    return worst, where


def step_losses(metrics):
    row = [r for r in map(json.loads, open(metrics)) if r.get("iteration") == 1][-1]
    return {k: row[k] for k in ("loss", "load_balancing_loss", "z_loss", "grad_norm")}


def plan_rows(text):
    """The first memory plan's rows printed: name -> floats."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^ {4}(\S.*?) +(\d+) floats", line)
        if m:
            rows.setdefault(m.group(1), int(m.group(2)))
    return rows


def aligned(n):
    return (n + 15) // 16 * 16


def check_memory_plans(texts):
    """The expert rows of the plans of the one-step runs against the experts' shapes."""
    expert = aligned(2 * MOE_FFN * HIDDEN) + aligned(HIDDEN * MOE_FFN)  # SwiGLU fc1, fc2
    moe_layers = 3
    one = plan_rows(texts.get("one", ""))
    for name, ep, edp, distributed in (("EP 2, d 2", 2, 1, False), ("EP 4, d 4", 4, 1, False),
                                       ("EP 2, d 4, distributed optimizer", 2, 2, True)):
        rows = plan_rows(texts.get(name, ""))
        local = EXPERTS // ep
        floats = local * moe_layers * expert
        label = f"expert weights ({local} experts x {moe_layers} MoE layers)"
        got = (rows.get(label), rows.get("expert gradients"),
               rows.get("expert adam exp_avg + exp_avg_sq"))
        want = (floats, floats, 2 * floats // (edp if distributed else 1))
        check(got == want, f"{name}: the plan holds {local} of {EXPERTS} experts per layer "
                           f"apart (weights, gradients, Adam: {got}, computed {want})")
        if not distributed:
            dense = one.get("weights", 0) - EXPERTS * moe_layers * expert
            check(rows.get("weights") == dense and "expert weights" not in one,
                  f"{name}: the dense weights are one process's less every expert "
                  f"({rows.get('weights')} vs {dense})")


def one_step_parity(trident, tmp, common):
    texts = {}
    start = os.path.join(tmp, "start")
    code, text = train(trident, 1, common + ["--lr", "0", "--save", start])
    if not passed(code == 0, "one process saves the initial weights" + (f": {text[-800:]}" if code else "")):
        return
    for tag, ranks, flags in (("EP 2", 2, LAYOUTS[0][2]), ("EP 4", 4, LAYOUTS[1][2])):
        saved = os.path.join(tmp, "start_" + tag.replace(" ", ""))
        code, text = train(trident, ranks, common + flags + ["--lr", "0", "--save", saved])
        same = code == 0 and all(np.array_equal(weights(saved)[k], weights(start)[k])
                                 for k in weights(start))
        check(same, f"{tag}: the initial weights are one process's, bit for bit "
                    f"(exit {code}) {text[-800:] if code else ''}")
    step = common + ["--lr", str(LR), "--load", start, "--finetune"]
    one, one_metrics = os.path.join(tmp, "one"), os.path.join(tmp, "one.jsonl")
    code, text = train(trident, 1, step + ["--save", one, "--metrics-file", one_metrics])
    texts["one"] = text
    if not passed(code == 0, "one process takes the step" + (f": {text[-800:]}" if code else "")):
        return
    reference, reference_losses = gradients(weights(start), weights(one)), step_losses(one_metrics)
    runs = [(tag, ranks, flags, distributed) for tag, ranks, flags in LAYOUTS
            for distributed in (False, True)] + [(t, r, f, False) for t, r, f in SHARDED]
    runs += [EP2_D4 + (False,), EP2_D4 + (True,)] + [r + (False,) for r in SHARDED_EDP2]
    for tag, ranks, flags, distributed in runs:
        name = tag + (", distributed optimizer" if distributed else "")
        slug = "".join(c for c in name if c.isalnum())
        out, metrics = os.path.join(tmp, slug), os.path.join(tmp, slug + ".jsonl")
        extra = ["--use-distributed-optimizer"] if distributed else []
        code, text = train(trident, ranks,
                           step + flags + extra + ["--save", out, "--metrics-file", metrics])
        texts[name] = text
        if not passed(code == 0, f"{name} runs" + (f": {text[-1500:]}" if code else "")):
            continue
        worst, where = worst_relative(gradients(weights(start), weights(out)), reference)
        check(worst <= 1e-5, f"{name}: the step's gradients equal one process's within 1e-5 "
                             f"(worst {worst:.2e} at {where})")
        losses = step_losses(metrics)
        off = max(abs(losses[k] - v) / abs(v) for k, v in reference_losses.items())
        check(off <= 1e-5, f"{name}: the logged losses and gradient norm equal one "
                           f"process's within 1e-5 "
                           f"({losses} vs {reference_losses})")
        if tag.startswith("EP 2, d 4, ZeRO"):
            check_expert_overlap(name, text)
    check_memory_plans(texts)


def check_expert_overlap(name, text):
    """Sharded expert gradients are reduce-scattered as the MoE layers' backwards complete
    their buckets: every bucket of the expert buffer starts during the last backward."""
    m = re.search(r"(\d+) of (\d+) expert gradient buckets started during it", text)
    early, total = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    check(total >= 2 and early == total,
          f"{name}: {early} of {total} expert gradient buckets started during the backward")


def resume_under_other_ep(trident, tmp, common):
    """Four steps at EP 2 straight through; two steps at EP 2 saved, then steps 3 and 4 from
    that checkpoint at EP 2, EP 1 (one process) and EP 4."""
    train_args = common + ["--lr", "3e-3", "--train-iters", "4"]
    metrics = os.path.join(tmp, "ep2_through.jsonl")
    code, text = train(trident, 2, train_args + LAYOUTS[0][2] + ["--metrics-file", metrics])
    if not passed(code == 0, "EP 2 trains 4 steps" + (f": {text[-1500:]}" if code else "")):
        return
    went_on = metrics_by_iteration(metrics)
    saved = os.path.join(tmp, "ep2_saved")
    halfway = common + ["--lr", "3e-3", "--train-iters", "4", "--exit-interval", "2"]
    code, text = train(trident, 2, halfway + LAYOUTS[0][2] + ["--save", saved])
    if not passed(code == 0 and glob.glob(os.path.join(saved, "iter_0000002")),
                  "EP 2 saves after step 2" + (f": {text[-1500:]}" if code else "")):
        return
    for tag, ranks, flags in (("EP 2", 2, LAYOUTS[0][2]), ("EP 1", 1, []),
                              ("EP 4", 4, LAYOUTS[1][2])):
        resumed = os.path.join(tmp, "resumed_" + tag.replace(" ", ""))
        code, text = train(trident, ranks, train_args + flags +
                           ["--load", saved, "--save", resumed, "--metrics-file", resumed + ".jsonl"])
        if not passed(code == 0, f"resume at {tag}" + (f": {text[-1500:]}" if code else "")):
            continue
        again = metrics_by_iteration(resumed + ".jsonl")
        pairs = [(went_on[i][0], again[i][0]) for i in (3, 4) if i in again]
        off = max((abs(a - b) / abs(a) for a, b in pairs), default=float("inf"))
        check(len(pairs) == 2 and 1 not in again and off <= 1e-5,
              f"saved at EP 2, resumed at {tag}: steps 3 and 4 lose what the EP 2 run going "
              f"straight through lost (within 1e-5; {pairs})")


def resume_sharded_experts(trident, tmp, common):
    """ZeRO-2 and ZeRO-3 at EP 2, d 4: four steps straight through; two steps saved, then
    steps 3 and 4 from that checkpoint under the same layout (bit for bit), under the other
    strategy and in one process (within 1e-5)."""
    train_args = common + ["--lr", "3e-3", "--train-iters", "4"]
    for (tag, ranks, flags), (other_tag, _, other) in zip(SHARDED_EDP2, SHARDED_EDP2[::-1]):
        slug = "".join(c for c in tag if c.isalnum())
        metrics = os.path.join(tmp, slug + "_through.jsonl")
        code, text = train(trident, ranks, train_args + flags + ["--metrics-file", metrics])
        if not passed(code == 0, f"{tag} trains 4 steps" + (f": {text[-1500:]}" if code else "")):
            continue
        went_on = metrics_by_iteration(metrics)
        saved = os.path.join(tmp, slug + "_saved")
        code, text = train(trident, ranks, train_args + flags + ["--exit-interval", "2", "--save", saved])
        if not passed(code == 0 and glob.glob(os.path.join(saved, "iter_0000002")),
                      f"{tag} saves after step 2" + (f": {text[-1500:]}" if code else "")):
            continue
        for name, n, resume_flags, exact in ((tag, ranks, flags, True), (other_tag, 4, other, False),
                                             ("one process", 1, [], False)):
            resumed = os.path.join(tmp, slug + "_resumed_" + "".join(c for c in name if c.isalnum()))
            code, text = train(trident, n, train_args + resume_flags +
                               ["--load", saved, "--metrics-file", resumed + ".jsonl"])
            if not passed(code == 0, f"{tag} checkpoint resumed under {name}" +
                          (f": {text[-1500:]}" if code else "")):
                continue
            again = metrics_by_iteration(resumed + ".jsonl")
            pairs = [(went_on[i][:2], again[i][:2]) for i in (3, 4) if i in again]
            off = max((abs(a - b) / abs(a) for x, y in pairs for a, b in zip(x, y)),
                      default=float("inf"))
            ok = len(pairs) == 2 and 1 not in again and (
                all(x == y for x, y in pairs) if exact else off <= 1e-5)
            check(ok, f"{tag} checkpoint at step 2 resumed under {name}: steps 3 and 4 (loss, "
                      f"grad norm) as the run straight through "
                      f"({'bit for bit' if exact else 'within 1e-5'}; {pairs})")


def samples_while_training(trident):
    """The same two steps at EP 2 and in one process (global batch 2), sampling after each:
    the printed continuations are equal and the EP 2 run does not hang."""
    gpt2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "gpt2")
    args = ["--mock-data", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads",
            "4", "--seq-length", "16", "--num-experts", "4", "--moe-router-topk", "2",
            "--micro-batch-size", "1", "--global-batch-size", "2", "--train-iters", "2",
            "--eval-iters", "0", "--log-interval", "1", "--peak-tflops", "1", "--threads", "1",
            "--vocab-file", os.path.join(gpt2, "encoder.json"), "--merge-file",
            os.path.join(gpt2, "vocab.bpe"), "--sample-prompt", "Hello", "--sample-interval",
            "1", "--sample-tokens", "4"]
    runs = [train(trident, 2, args + LAYOUTS[0][2]), train(trident, 1, args)]
    samples = [[line for line in text.splitlines() if line.startswith(" sample at")]
               for _, text in runs]
    check(all(code == 0 for code, _ in runs) and len(samples[0]) == 2 and
          samples[0] == samples[1],
          f"samples while training at EP 2 equal one process's ({samples[0]} vs {samples[1]})")


def one_step_flags(tmp):
    """Writes the documents to tmp and returns the flags of one AdamW step from saved
    weights on them (no decay, no clipping: the move gives each gradient)."""
    rng = np.random.default_rng(5)
    documents = [rng.integers(0, VOCAB - 1, rng.integers(5, 40)).tolist() for _ in range(60)]
    data = os.path.join(tmp, "docs")
    write_dataset(data, [[d] for d in documents], 8)
    return MODEL + ["--data-path", data, "--split", "100,0,0", "--data-cache-path",
                    os.path.join(tmp, "cache"), "--micro-batch-size", "1", "--global-batch-size",
                    str(GLOBAL), "--train-iters", "1", "--eval-iters", "0", "--log-interval", "1",
                    "--lr-decay-style", "constant", "--lr-warmup-iters", "0", "--min-lr", "0",
                    "--weight-decay", "0", "--clip-grad", "0", "--adam-eps", str(EPS), "--seed",
                    "1234", "--peak-tflops", "1", "--threads", "1"]


def main():
    trident = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        common = one_step_flags(tmp)
        one_step_parity(trident, tmp, common)
        resume_under_other_ep(trident, tmp, common)
        resume_sharded_experts(trident, tmp, common)
        samples_while_training(trident)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
