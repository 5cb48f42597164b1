#!/usr/bin/python3
"""MoE layers under tensor parallelism (issue 32) against one process: t = 2 must be the
same model as t = 1. Each run starts from the same saved one-process weights and takes one
AdamW step with no weight decay or clipping, so the weights' move gives each gradient
exactly (as moe_ep_parity.py, whose EP layouts and float64-checked one-process gradients
this builds on); the t = 2 checkpoints' tensor shards are put back together from their
manifest's shard specs. Checked at 1e-5 relative (normwise per tensor):
  - the step's gradients (router, every expert's fc1 rows and fc2 columns, the rest) and
    its logged losses (language model, load balancing, z) and gradient norm under
    t = 2 with --sequence-parallel (d = 1), t = 2 with EP = 2 (d = 2, world 4) and t = 2
    with p = 2 (world 4), each with and without --use-distributed-optimizer, equal one
    process's: every tensor rank routes all of the micro-batch's tokens (the router losses
    are over all of them), the routing weights' gradient is summed over the tensor group,
    the router's is not summed again, and dx's router part is counted once;
  - the same (without the distributed optimizer) at EP = 2, t = 2 and t = 2 with EP = 2 for
    a capacity factor of 0.75 (position policy, padded) and for gated shared experts;
  - the same (gated shared experts, without the distributed optimizer) under
    --pipeline-schedule zb-h1 at p = 2 and at p = 2 with EP = 2 (d = 2): the MoE layers'
    weight gradients are formed in B (not deferred), the attention's in W;
  - --sample-prompt while training at t = 2 prints one process's samples (generation's
    rows are not sequence-parallel: each tensor rank runs its shard of every expert and the
    partial outputs are all-reduced), with a byte-level tokenizer.json written here.
Usage: moe_tp_parity.py TRIDENT"""
import glob
import json
import math
import os
import sys
import tempfile

import numpy as np

from moe_ep_parity import (LR, VOCAB, gradients, one_step_flags, plan_rows,
                           step_losses, train, worst_relative)
from parity import Checks, read_safetensors

TP = ["--tensor-model-parallel-size", "2", "--sequence-parallel"]
LAYOUTS = [("t 2, SP", 2, TP),
           ("t 2, EP 2, d 2", 4, TP + ["--expert-model-parallel-size", "2"]),
           ("t 2, p 2", 4, TP + ["--pipeline-model-parallel-size", "2"])]
# The layouts of the variants (token dropping, shared experts): t and EP apart and together.
VARIANT_LAYOUTS = [("EP 2, d 2", 2, ["--expert-model-parallel-size", "2"]), LAYOUTS[0], LAYOUTS[1]]
check = Checks()


def passed(ok, what):
    check(ok, what)
    return ok


def unshard(pieces, shape, shard):
    """The global tensor from its tensor ranks' pieces (Megatron's partition_stride: the
    split dimension is `stride` blocks, each cut into `parts`; rank r holds piece r of each)."""
    dim, stride, parts = shard["dim"], shard["stride"], shard["parts"]
    blocks = []
    for r in range(parts):
        local = np.moveaxis(pieces[r], dim, 0)
        blocks.append(local.reshape((stride, -1) + local.shape[1:]))
    full = np.stack(blocks, axis=1).reshape((shape[dim],) + blocks[0].shape[2:])
    return np.moveaxis(full, 0, dim)


def weights(directory):
    """Every tensor of the latest iteration at its global shape (moments left out), the
    vocabulary's padding rows (which depend on t) cut off."""
    latest = sorted(glob.glob(os.path.join(directory, "iter_*")))[-1]
    manifest = json.load(open(os.path.join(latest, "manifest.json")))
    pieces, specs = {}, {}
    for entry in manifest["files"]:
        if not os.path.basename(entry["file"]).startswith("model_tp"):
            continue
        tensors = read_safetensors(os.path.join(latest, entry["file"]))
        for spec in entry["tensors"]:
            name = spec["name"]
            if name not in tensors:
                continue
            specs[name] = spec
            rank = spec["shard"]["rank"] if spec["shard"]["dim"] >= 0 else 0
            pieces.setdefault(name, {})[rank] = tensors[name].astype(np.float64)
    out = {}
    for name, spec in specs.items():
        shard = spec["shard"]
        if shard["dim"] < 0 or shard["parts"] == 1:
            out[name] = pieces[name][0]
        else:
            out[name] = unshard(pieces[name], spec["global_shape"], shard)
        assert list(out[name].shape) == spec["global_shape"], name
        if "word_embeddings" in name or "output_layer" in name:
            out[name] = out[name][:VOCAB]
    return out


def one_step_parity(trident, tmp, common, layouts=LAYOUTS, optimizers=(False, True), label=""):
    """label: the variant's name (its flags are in common), which names its directories.
    Returns each run's printed text by name."""
    texts = {}
    tmp = os.path.join(tmp, "".join(c for c in label if c.isalnum()))
    os.makedirs(tmp, exist_ok=True)
    start = os.path.join(tmp, "start")
    code, text = train(trident, 1, common + ["--lr", "0", "--save", start])
    if not passed(code == 0, "one process saves the initial weights" +
                 (f": {text[-800:]}" if code else "")):
        return texts
    step = common + ["--lr", str(LR), "--load", start, "--finetune"]
    one, one_metrics = os.path.join(tmp, "one"), os.path.join(tmp, "one.jsonl")
    code, text = train(trident, 1, step + ["--save", one, "--metrics-file", one_metrics])
    if not passed(code == 0, "one process takes the step" + (f": {text[-800:]}" if code else "")):
        return texts
    w0 = weights(start)
    reference, reference_losses = gradients(w0, weights(one)), step_losses(one_metrics)
    for tag, ranks, flags in layouts:
        for distributed in optimizers:
            name = label + tag + (", distributed optimizer" if distributed else "")
            slug = "".join(c for c in name if c.isalnum())
            out, metrics = os.path.join(tmp, slug), os.path.join(tmp, slug + ".jsonl")
            extra = ["--use-distributed-optimizer"] if distributed else []
            code, text = train(trident, ranks,
                               step + flags + extra + ["--save", out, "--metrics-file", metrics])
            texts[name] = text
            if not passed(code == 0, f"{name} runs" + (f": {text[-1500:]}" if code else "")):
                continue
            got = gradients(w0, weights(out))
            worst, where = worst_relative(got, reference)
            check(set(got) == set(reference) and worst <= 1e-5,
                  f"{name}: the step's gradients equal one process's within 1e-5 "
                  f"(worst {worst:.2e} at {where})")
            losses = step_losses(metrics)
            off = max(abs(losses[k] - v) / abs(v) for k, v in reference_losses.items())
            check(off <= 1e-5, f"{name}: the logged losses and gradient norm equal one "
                               f"process's within 1e-5 (worst {off:.2e}: {losses} vs "
                               f"{reference_losses})")
    return texts


def check_padded_plan(text):
    """With padding each rank's experts receive exactly E/EP x capacity x EP rows (and it
    sends E x capacity): the memory plan's MoE rows at EP 2 (floats per MoE layer) hold the
    router's outputs for the T = 16 tokens of a micro-batch and those rows' input, fc1 out
    (SwiGLU: 2F), activation and weight; its scratch the rows sent and received."""
    tokens, experts, topk, hidden, ffn, ep = 16, 4, 2, 32, 40, 2
    capacity = math.ceil(tokens * topk / experts * 0.75)
    rows, sent = experts // ep * capacity * ep, experts * capacity
    kept = [tokens * experts, tokens, tokens * topk, tokens * topk, rows * hidden,
            rows * 2 * ffn, rows * ffn, rows, experts]
    scratch = [tokens * experts, experts, sent, rows, tokens * topk, rows * ffn, rows * ffn,
               rows * hidden, sent * hidden, rows * hidden]
    plan = plan_rows(text)
    got = ([v for k, v in plan.items() if k.startswith("MoE router (probs")],
           [v for k, v in plan.items() if k.startswith("MoE router + expert rows scratch")])
    want = ([sum(kept)], [sum(scratch)])
    check(got == want, f"capacity padded, EP 2: the plan's MoE rows and scratch hold {rows} "
                       f"expert rows per layer ({got} floats, computed {want})")


def byte_tokenizer(directory):
    """A byte-level BPE tokenizer.json with no merges (256 byte tokens and </s>): generation
    needs a tokenizer, and this one needs no files from outside the test."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
                 + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    others = [b for b in range(256) if b not in printable]
    codes = printable + [256 + i for i in range(len(others))]
    chars = dict(zip(printable + others, map(chr, codes)))
    vocab = {chars[b]: b for b in range(256)}
    vocab["</s>"] = 256
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tokenizer = {"version": "1.0", "normalizer": None, "post_processor": None,
                 "added_tokens": [{"id": 256, "content": "</s>", "single_word": False,
                                   "lstrip": False, "rstrip": False, "normalized": False,
                                   "special": True}],
                 "pre_tokenizer": byte_level, "decoder": byte_level,
                 "model": {"type": "BPE", "vocab": vocab, "merges": []}}
    os.makedirs(directory)
    json.dump(tokenizer, open(os.path.join(directory, "tokenizer.json"), "w"))
    json.dump({"eos_token": "</s>"}, open(os.path.join(directory, "tokenizer_config.json"), "w"))
    return ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", directory]


def samples_while_training(trident, tmp):
    """Two steps at t = 2 (SP) and in one process, sampling after each: the same text."""
    args = ["--mock-data", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads",
            "4", "--seq-length", "16", "--num-experts", "4", "--moe-router-topk", "2",
            "--micro-batch-size", "1", "--global-batch-size", "2", "--train-iters", "2",
            "--eval-iters", "0", "--log-interval", "1", "--peak-tflops", "1", "--threads", "1",
            "--sample-prompt", "Hello", "--sample-interval", "1", "--sample-tokens", "6"]
    args += byte_tokenizer(os.path.join(tmp, "tokenizer"))
    runs = [train(trident, 2, args + TP), train(trident, 1, args)]
    samples = [[line for line in text.splitlines() if line.startswith(" sample at")]
               for _, text in runs]
    check(all(code == 0 for code, _ in runs) and len(samples[0]) == 2 and
          samples[0] == samples[1],
          f"samples while training at t = 2 equal one process's ({samples[0]} vs {samples[1]})"
          + "".join(f"\n{text[-800:]}" for code, text in runs if code))


def main():
    trident = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        common = one_step_flags(tmp)
        one_step_parity(trident, tmp, common)
        # Token dropping is per micro-batch over all its tokens (every tensor rank routes
        # them all; each expert-parallel rank drops its own tokens before dispatch), so with
        # one micro-batch per rank it is the same model at any t and EP. The position policy
        # keeps a near tie of weights at the capacity from deciding the test (the float64
        # reference, moe_reference.py, checks the probs policy).
        capacity = ["--moe-expert-capacity-factor", "0.75", "--moe-token-drop-policy",
                    "position", "--moe-pad-expert-input-to-capacity"]
        texts = one_step_parity(trident, tmp, common + capacity, VARIANT_LAYOUTS, (False,),
                                "capacity 0.75 padded: ")
        check_padded_plan(texts.get("capacity 0.75 padded: EP 2, d 2", ""))
        # Shared experts: split over t as the dense MLP, the gate replicated (its gradient
        # summed over the tensor group), in the dense buffer under EP.
        shared = ["--moe-shared-expert-intermediate-size", "24", "--moe-shared-expert-gate"]
        one_step_parity(trident, tmp, common + shared, VARIANT_LAYOUTS, (False,),
                        "gated shared experts: ")
        # zb-h1 (p 2; and p 2 with EP 2, d 2): the MoE layers' weight gradients (router,
        # experts, shared experts) are formed in B, the attention's deferred to W.
        zb = ["--pipeline-model-parallel-size", "2", "--pipeline-schedule", "zb-h1"]
        one_step_parity(trident, tmp, common + shared,
                        [("p 2, zb-h1", 2, zb),
                         ("p 2, EP 2, d 2, zb-h1", 4, zb + ["--expert-model-parallel-size", "2"])],
                        (False,), "zb-h1, gated shared experts: ")
        samples_while_training(trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
