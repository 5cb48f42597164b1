#!/usr/bin/python3
"""Whole experts under tensor parallelism (--expert-tensor-parallel-size 1 < t, issue 32)
against one process: Megatron's expert grid regroups each stage's t x d ranks as
ETP x EP x EDP, so at ETP = 1 the tensor ranks join the expert groups, each tensor rank routes
its own sequence-parallel rows, and every expert runs whole on its rank. Each run starts
from the same saved one-process weights and takes one AdamW step with no weight decay or
clipping, so the weights' move gives each gradient exactly (moe_ep_parity.py's method; the
one-process gradients are checked in float64 by moe_reference.py). Checked:
  - at 1e-5 relative (normwise per tensor), the step's gradients (router, every expert's
    fc1 and fc2, the rest) and its logged losses (language model, load balancing, z) and
    gradient norm equal one process's at t 2 ETP 1 EP 2 (world 2) and t 2 ETP 1 EP 4 d 2
    (world 4), each with and without the distributed optimizer, t 2 ETP 1 EP 2 d 2 (a 2-rank
    expert-data group spanning data-parallel ranks) with the distributed optimizer, and
    t 2 ETP 1 EP 2 p 2, and t 2 ETP 1 EP 2 d 2 under ZeRO-2 and ZeRO-3 (experts sharded over
    their expert-data group): the router losses are over all the micro-batch's tokens (the tokens
    per expert and the losses summed over the tensor group), the router's partial gradients
    are summed over the tensor group, each expert's gradient sums every token once;
  - initialisation does not depend on ETP: the weights saved before any step at t 2 ETP 1
    EP 2 (whole experts) are one process's, bit for bit;
  - checkpoints stay layout-free: a run saved after 2 of 4 steps at t 2 ETP 1 EP 2 resumes in
    one process and at t 2 with tensor-split experts (ETP 2, EP 1), and one saved in one
    process resumes at t 2 ETP 1 EP 2, each losing in steps 3 and 4 what one process going
    straight through lost (within 1e-5);
  - the memory plan at t 2 ETP 1 EP 2 holds E/EP whole experts and MoE rows for T / t tokens.
One micro-batch per data-parallel rank and step (the global batch is 4 micro-batches of 1),
so the router losses, which are per micro-batch, see the same tokens everywhere; dropless.
Usage: moe_etp_parity.py TRIDENT"""
import glob
import os
import sys
import tempfile

import numpy as np

from moe_ep_parity import (EXPERTS, HIDDEN, LR, MOE_FFN, SEQ, TOPK, aligned, gradients,
                           one_step_flags, plan_rows, step_losses, train, worst_relative)
from moe_tp_parity import weights
from parity import Checks, metrics_by_iteration

TP = ["--tensor-model-parallel-size", "2", "--sequence-parallel"]
WHOLE = TP + ["--expert-tensor-parallel-size", "1"]
EP2, EP4 = ["--expert-model-parallel-size", "2"], ["--expert-model-parallel-size", "4"]
RUNS = [("t 2, ETP 1, EP 2", 2, WHOLE + EP2, False),
        ("t 2, ETP 1, EP 2", 2, WHOLE + EP2, True),
        ("t 2, ETP 1, EP 4, d 2", 4, WHOLE + EP4, False),
        ("t 2, ETP 1, EP 4, d 2", 4, WHOLE + EP4, True),
        ("t 2, ETP 1, EP 2, d 2", 4, WHOLE + EP2, True),
        ("t 2, ETP 1, EP 2, p 2", 4, WHOLE + EP2 + ["--pipeline-model-parallel-size", "2"], False),
        # ZeRO-2 / ZeRO-3: the dense buffer sharded over d = 2, the experts over their
        # expert-data group (t x d / (ETP x EP) = 2 ranks, one on each tensor rank's side)
        ("t 2, ETP 1, EP 2, d 2, ZeRO-2", 4,
         WHOLE + EP2 + ["--data-parallel-sharding-strategy", "optim_grads"], False),
        ("t 2, ETP 1, EP 2, d 2, ZeRO-3", 4,
         WHOLE + EP2 + ["--data-parallel-sharding-strategy", "optim_grads_params"], False)]
check = Checks()


def passed(ok, what):
    check(ok, what)
    return ok


def check_memory_plan(text):
    """t 2, ETP 1, EP 2: the plan holds E/EP = 2 whole experts per MoE layer (SwiGLU fc1
    [2F, h] and fc2 [h, F], not their halves), and each MoE layer's kept rows for this rank's
    T / t = 8 routed tokens: the router's outputs and the dropless worst case of
    EP x 8 x min(k, E/EP) expert rows with their input, fc1 out (2F), activation and weight."""
    local, moe_layers, tokens, ep = EXPERTS // 2, 3, SEQ // 2, 2
    expert = aligned(2 * MOE_FFN * HIDDEN) + aligned(HIDDEN * MOE_FFN)
    rows = plan_rows(text)
    got = rows.get(f"expert weights ({local} experts x {moe_layers} MoE layers)")
    check(got == local * moe_layers * expert,
          f"t 2, ETP 1, EP 2: the plan's expert weights are {local} whole experts per layer "
          f"({got} floats, computed {local * moe_layers * expert})")
    received = ep * tokens * min(TOPK, EXPERTS // ep)
    kept = [tokens * EXPERTS, tokens, tokens * TOPK, tokens * TOPK, received * HIDDEN,
            received * 2 * MOE_FFN, received * MOE_FFN, received, EXPERTS]
    got = [v for k, v in rows.items() if k.startswith("MoE router (probs")]
    check(got == [sum(kept)], f"t 2, ETP 1, EP 2: the plan's MoE rows hold the router outputs and "
                              f"{received} expert rows of this rank's {tokens} tokens ({got} "
                              f"floats, computed {sum(kept)})")


def one_step_parity(trident, tmp, common):
    start = os.path.join(tmp, "start")
    code, text = train(trident, 1, common + ["--lr", "0", "--save", start])
    if not passed(code == 0, "one process saves the initial weights" +
                  (f": {text[-800:]}" if code else "")):
        return
    w0 = weights(start)
    saved = os.path.join(tmp, "start_whole")
    code, text = train(trident, 2, common + WHOLE + EP2 + ["--lr", "0", "--save", saved])
    same = code == 0 and all(np.array_equal(weights(saved)[k], w0[k]) for k in w0)
    check(same, "t 2, ETP 1, EP 2: the initial weights (whole experts) are one process's, bit "
                f"for bit (exit {code}) {text[-800:] if code else ''}")
    step = common + ["--lr", str(LR), "--load", start, "--finetune"]
    one, one_metrics = os.path.join(tmp, "one"), os.path.join(tmp, "one.jsonl")
    code, text = train(trident, 1, step + ["--save", one, "--metrics-file", one_metrics])
    if not passed(code == 0, "one process takes the step" + (f": {text[-800:]}" if code else "")):
        return
    reference, reference_losses = gradients(w0, weights(one)), step_losses(one_metrics)
    for tag, ranks, flags, distributed in RUNS:
        name = tag + (", distributed optimizer" if distributed else "")
        slug = "".join(c for c in name if c.isalnum())
        out, metrics = os.path.join(tmp, slug), os.path.join(tmp, slug + ".jsonl")
        extra = ["--use-distributed-optimizer"] if distributed else []
        code, text = train(trident, ranks,
                           step + flags + extra + ["--save", out, "--metrics-file", metrics])
        if not passed(code == 0, f"{name} runs" + (f": {text[-1500:]}" if code else "")):
            continue
        if name == "t 2, ETP 1, EP 2":
            check_memory_plan(text)
        got = gradients(w0, weights(out))
        worst, where = worst_relative(got, reference)
        check(set(got) == set(reference) and worst <= 1e-5,
              f"{name}: the step's gradients equal one process's within 1e-5 "
              f"(worst {worst:.2e} at {where})")
        losses = step_losses(metrics)
        off = max(abs(losses[k] - v) / abs(v) for k, v in reference_losses.items())
        check(off <= 1e-5, f"{name}: the logged losses and gradient norm equal one process's "
                           f"within 1e-5 (worst {off:.2e}: {losses} vs {reference_losses})")


def saved_halfway(trident, tmp, tag, ranks, flags, args):
    saved = os.path.join(tmp, "saved_" + "".join(c for c in tag if c.isalnum()))
    code, text = train(trident, ranks, args + flags + ["--exit-interval", "2", "--save", saved])
    ok = code == 0 and glob.glob(os.path.join(saved, "iter_0000002"))
    return saved if passed(ok, f"{tag} saves after step 2" +
                           (f": {text[-1500:]}" if code else "")) else None


def resume_across_layouts(trident, tmp, common):
    """One process for 4 steps straight through; saves after step 2 at t 2 ETP 1 EP 2 and in
    one process, resumed at the other layouts for steps 3 and 4."""
    args = common + ["--lr", "3e-3", "--train-iters", "4"]
    metrics = os.path.join(tmp, "through.jsonl")
    code, text = train(trident, 1, args + ["--metrics-file", metrics])
    if not passed(code == 0, "one process trains 4 steps" + (f": {text[-1500:]}" if code else "")):
        return
    went_on = metrics_by_iteration(metrics)
    whole = saved_halfway(trident, tmp, "t 2, ETP 1, EP 2", 2, WHOLE + EP2, args)
    one = saved_halfway(trident, tmp, "one process", 1, [], args)
    resumes = [(whole, "t 2, ETP 1, EP 2", "one process", 1, []),
               (whole, "t 2, ETP 1, EP 2", "t 2, ETP 2", 2, TP),
               (one, "one process", "t 2, ETP 1, EP 2", 2, WHOLE + EP2)]
    for saved, saved_tag, tag, ranks, flags in resumes:
        if not saved:
            continue
        resumed = os.path.join(tmp, "resumed_" + "".join(c for c in saved_tag + tag if c.isalnum()))
        code, text = train(trident, ranks, args + flags + ["--load", saved, "--save", resumed,
                                                           "--metrics-file", resumed + ".jsonl"])
        if not passed(code == 0, f"saved at {saved_tag}, resume at {tag}" +
                      (f": {text[-1500:]}" if code else "")):
            continue
        again = metrics_by_iteration(resumed + ".jsonl")
        pairs = [(went_on[i][0], again[i][0]) for i in (3, 4) if i in again]
        off = max((abs(a - b) / abs(a) for a, b in pairs), default=float("inf"))
        check(len(pairs) == 2 and 1 not in again and off <= 1e-5,
              f"saved at {saved_tag}, resumed at {tag}: steps 3 and 4 lose what one process "
              f"going straight through lost (within 1e-5; worst {off:.2e}, {pairs})")


def main():
    trident = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        common = one_step_flags(tmp)
        one_step_parity(trident, tmp, common)
        resume_across_layouts(trident, tmp, common)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
