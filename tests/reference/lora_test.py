#!/usr/bin/python3
"""LoRA (--lora-rank, issue 34 item 4) end to end, on tiny models with mock data:
  * parity: the adapters trained under t = 2, p = 2, d = 2 give one process's losses, grad
    norms and merged weights (--save-hf writes W + (alpha / R) B A) within 1e-5, for a GPT-2
    block (and d = 2 with the distributed optimizer) and a Llama block (RMSNorm, SwiGLU,
    grouped-query attention, RoPE; and t = 2 with sequence parallelism) trained with
    --lora-dropout 0.2 (masks keyed by sample, layer, linear and element, so every layout
    drops the same inputs); the dropout is live: iterations 1 and 2 (B = 0 until the first
    step at a nonzero learning rate, so the branch adds nothing) are the undropped run's,
    iteration 3's loss is not;
  * the base is frozen: every tensor of the merged export that LoRA does not target is bit
    for bit the base's (an export at learning rate 0, where B = 0), and each targeted weight
    moved by a matrix of rank <= R (numpy's singular values; independent of trident's code);
  * bf16 (--bf16: the base's products in bf16 from its bf16 copy, the branch in fp32 on the
    widened input, its products with bf16 output gradients in bf16, fp32 master adapters):
    20 iterations track fp32 LoRA within 2% relative loss (mixed_precision_test.py's bf16
    bound, and why) and differ from it (> 1e-6: bf16 is on); the adapters' gradient norms and
    the learnt updates W' - W of the merged export within 5% of fp32's; t = 2 with sequence
    parallelism tracks one process within 2e-3 (bf16 parity's tolerance);
  * the memory plan has the adapters' rows and no gradient or Adam row for the base;
  * checkpoints (GPT-2 block, vocabulary 50257, over a --load-hf base): they hold the
    adapters alone and name the base (path, file sizes); 2 + 2 iterations resumed equal 4
    straight (losses, merged weights); the base directory is untouched; `convert
    --merge-lora` writes the merged model (without the flag exit 2), as an HF directory or
    as a trident checkpoint (`--save`: no adapter tensors, no LoRA in its manifest);
    `generate --load CKPT` (base + adapters, unmerged) gives the prompt log-probabilities of a
    float64 PyTorch GPT-2 of the merged weights (1e-4; with --bf16 1e-2, below the adapters'
    effect), and `score` of the merged HF model and
    of the merged checkpoint their mean (1e-5); a base whose files changed is refused;
  * bad input: --lora-rank <= 0, an unknown module, --lora-alpha without --lora-rank, LoRA
    with MoE or --fp16, --lora-dropout 1, exit 2 naming the flag.
Usage: lora_test.py TRIDENT SOURCE_DIR"""
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

from gpt2_torch import forward
from parity import MPI_ENV, Checks, metrics_by_iteration, read_safetensors, run_parity, train

check = Checks()
RANK = 4


def passed(ok, what):
    check(ok, what)
    return ok

GPT = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
       "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
       "--global-batch-size", "8", "--lr", "1e-2", "--lr-warmup-iters", "1", "--eval-iters", "0",
       "--seed", "7", "--train-iters", "4", "--log-interval", "1"]
LLAMA = GPT + ["--normalization", "RMSNorm", "--swiglu", "--position-embedding-type", "rope",
               "--group-query-attention", "--num-query-groups", "2", "--disable-bias-linear",
               "--untie-embeddings-and-output-weights"]
LORA = ["--lora-rank", str(RANK), "--lora-alpha", "8"]
DROPOUT = ["--lora-dropout", "0.2"]
# bf16 rounds every operand to 8 mantissa bits (2^-9 relative): the adapters' gradients and
# the updates Adam makes of them move by ~1% (measured: 1.1e-2 for the updates); 5% bounds
# that, far below what a wrong scale or a dropped term does.
BF16_UPDATE_TOLERANCE = 5e-2
T2P2D2 = ("t=2, p=2, d=2", ["--tensor-model-parallel-size", "2",
                            "--pipeline-model-parallel-size", "2"], 8)
LAYOUTS = {"GPT-2 block": [T2P2D2, ("d=2, distributed optimizer", ["--use-distributed-optimizer"], 2)],
           "Llama block": [T2P2D2, ("t=2, sequence parallel",
                                    ["--tensor-model-parallel-size", "2", "--sequence-parallel"], 2)]}
# HF names of the weights LoRA adapts (GPT-2's fused c_attn, c_proj, c_fc, mlp.c_proj; Llama's
# q/k/v, o, gate/up, down projections); the rest must not move.
TARGETED = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight",
            "q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
            "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def frozen_and_low_rank(trident, name, model):
    with tempfile.TemporaryDirectory() as tmp:
        _, base = train(trident, model + LORA + ["--lr", "0", "--min-lr", "0"], 1, tmp, "base")
        logs = []
        _, tuned = train(trident, model + LORA, 1, tmp, "tuned", logs=logs)
    moved = [k for k in base if not np.array_equal(base[k], tuned[k])]
    untargeted = [k for k in moved if not k.endswith(TARGETED)]
    check(not untargeted and moved,
          f"{name}: only targeted weights move ({len(moved)} moved; untargeted: {untargeted})")
    worst = 0
    for k in moved:
        delta = (tuned[k].astype(np.float64) - base[k].astype(np.float64))
        delta = delta.reshape(delta.shape[0], -1)
        s = np.linalg.svd(delta, compute_uv=False)
        worst = max(worst, s[RANK] / s[0] if len(s) > RANK else 0.0)
    check(worst < 1e-3, f"{name}: each update W' - W has rank <= {RANK} "
                        f"(worst singular value {RANK + 1} / largest: {worst:.1e})")
    return logs[0]


def dropout_is_live(trident, model):
    """Three iterations with and without --lora-dropout: iteration 2 alike (iteration 1 runs
    at learning rate 0 in warm-up, so B is still 0 and the branch adds nothing), 3 not."""
    with tempfile.TemporaryDirectory() as tmp:
        args = model + LORA + ["--train-iters", "3"]
        on, _ = train(trident, args + DROPOUT, 1, tmp, "on")
        off, _ = train(trident, args, 1, tmp, "off")
    loss = lambda rows: [r["loss"] for r in rows if "loss" in r]
    a, b = loss(on), loss(off)
    check(len(a) == len(b) == 3 and a[:2] == b[:2] and abs(a[2] - b[2]) > 1e-6 * abs(b[2]),
          f"--lora-dropout is live in training: losses {a} vs {b} without")


def bf16(trident):
    """bf16 against fp32 LoRA: losses, and the learnt updates W' - W of the merged export."""
    args = LLAMA + LORA + ["--train-iters", "20", "--lr", "3e-3"]
    with tempfile.TemporaryDirectory() as tmp:
        _, base = train(trident, LLAMA + LORA + ["--lr", "0", "--min-lr", "0"],
                        1, tmp, "base")
        full, w32 = train(trident, args, 1, tmp, "fp32")
        half, w16 = train(trident, args + ["--bf16"], 1, tmp, "bf16")
    loss = lambda rows: [r["loss"] for r in rows if "loss" in r]
    a, b = loss(half), loss(full)
    worst = max(abs(x - y) / y for x, y in zip(a, b)) if len(a) == len(b) == 20 else float("nan")
    check(1e-6 < worst < 0.02, f"bf16 LoRA tracks fp32 LoRA over 20 steps: worst relative loss "
                               f"difference 1e-06 < {worst:.2e} < 2e-2")
    # The adapters' gradient norms (Adam would hide a wrong scale in the updates).
    norms = [(x["grad_norm"], y["grad_norm"]) for x, y in zip(half, full) if "grad_norm" in y]
    worst_norm = max(abs(x - y) / y for x, y in norms) if len(norms) == 20 else float("nan")
    check(worst_norm < BF16_UPDATE_TOLERANCE,
          f"bf16 LoRA's adapter gradient norms are fp32's: worst relative difference "
          f"{worst_norm:.2e} < {BF16_UPDATE_TOLERANCE}")
    moved = [k for k in base if k.endswith(TARGETED)]
    d32 = np.concatenate([(w32[k].astype(np.float64) - base[k]).ravel() for k in moved])
    d16 = np.concatenate([(w16[k].astype(np.float64) - base[k]).ravel() for k in moved])
    rel = np.linalg.norm(d16 - d32) / np.linalg.norm(d32)
    check(np.linalg.norm(d32) > 0 and 1e-6 < rel < BF16_UPDATE_TOLERANCE,
          f"bf16 LoRA learns fp32 LoRA's updates W' - W: relative difference {rel:.2e} "
          f"< {BF16_UPDATE_TOLERANCE}")
    failed = run_parity(trident, LLAMA + LORA + DROPOUT + ["--bf16"],
                        [("bf16 t=2, sequence parallel",
                          ["--tensor-model-parallel-size", "2", "--sequence-parallel"], 2)],
                        tolerance=2e-3)
    check.add_parity(failed, 1)


def memory_plan(log):
    names = set()
    for line in log.splitlines():
        m = re.match(r"^ {4}(\S.*?) +(\d+) floats", line)
        if m:
            names.add(m.group(1))
    check({"lora adapters", "lora gradients", "lora adam exp_avg + exp_avg_sq"} <= names
          and "gradients" not in names and "adam exp_avg + exp_avg_sq" not in names,
          f"memory plan: adapter rows, no base gradient or Adam row ({sorted(names)})")


def refusals(trident):
    cases = [(["--lora-rank", "0"], "--lora-rank"),
             (["--lora-rank", "-2"], "--lora-rank"),
             (["--lora-alpha", "16"], "--lora-alpha needs --lora-rank"),
             (["--lora-rank", "4", "--lora-target-modules", "linear_qkv,query"], "query"),
             (["--lora-rank", "4", "--num-experts", "4"], "--num-experts"),
             (["--lora-rank", "4", "--fp16"], "--fp16"),
             (["--lora-rank", "4", "--lora-dropout", "1"], "--lora-dropout must be in [0, 1)")]
    for flags, needle in cases:
        out = subprocess.run([trident, "train"] + GPT + flags, capture_output=True, text=True,
                             env=MPI_ENV, timeout=60)
        check(out.returncode == 2 and needle in out.stderr,
              f"{' '.join(flags)}: exit {out.returncode} naming {needle!r} {out.stderr[-300:]!r}")


WIDE = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "50257", "--micro-batch-size", "2",
        "--global-batch-size", "4", "--lr", "1e-2", "--eval-iters", "0", "--seed", "3",
        "--log-interval", "1"]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)


def digest(directory):
    return {f: hashlib.sha256(open(os.path.join(directory, f), "rb").read()).hexdigest()
            for f in sorted(os.listdir(directory))}


def checkpoint_files(ckpt):
    names = set()
    for path in glob.glob(os.path.join(ckpt, "iter_*", "*.safetensors")):
        names |= set(read_safetensors(path))
    return names


def lora_train(trident, tmp, base, iters, extra):
    return run([trident, "train"] + WIDE + LORA + ["--load-hf", base, "--train-iters", str(iters),
                                                   "--save-hf-dtype", "fp32"] + extra)


def resume_and_convert(trident, tmp, base):
    """Four iterations straight against two saved and two resumed; the checkpoint's contents;
    convert --merge-lora. Returns (checkpoint, merged export) or None."""
    straight, resumed = os.path.join(tmp, "straight"), os.path.join(tmp, "ckpt")
    a = lora_train(trident, tmp, base, 4, ["--save-hf", straight,
                                            "--metrics-file", straight + ".jsonl"])
    b = lora_train(trident, tmp, base, 4, ["--save", resumed, "--exit-interval", "2"])
    c = lora_train(trident, tmp, base, 4, ["--save", resumed, "--load", resumed, "--save-hf",
                                           resumed + "_hf", "--metrics-file", resumed + ".jsonl"])
    if not passed(a.returncode == b.returncode == c.returncode == 0,
                  "LoRA runs save and resume " + (a.stderr + b.stderr + c.stderr)[-1500:]):
        return None
    one, two = metrics_by_iteration(straight + ".jsonl"), metrics_by_iteration(resumed + ".jsonl")
    same = all(one[i][:2] == two[i][:2] for i in (3, 4))
    w1 = read_safetensors(os.path.join(straight, "model.safetensors"))
    w2 = read_safetensors(os.path.join(resumed + "_hf", "model.safetensors"))
    same_w = all(np.array_equal(w1[k], w2[k]) for k in w1)
    check(same and same_w, f"2 + 2 iterations resumed equal 4 straight, bit for bit "
                           f"(losses {[one[i][0] for i in (3, 4)]} vs {[two[i][0] for i in (3, 4)]})")
    names = checkpoint_files(resumed)
    check(names and all(".lora_" in n for n in names),
          f"the checkpoint holds the adapters alone ({len(names)} tensors, e.g. {sorted(names)[:2]})")
    manifest = json.load(open(sorted(glob.glob(os.path.join(resumed, "iter_*", "manifest.json")))[-1]))
    recorded = manifest.get("lora_base", {})
    check(recorded.get("load_hf") == os.path.abspath(base) and
          recorded.get("files", {}).get("model.safetensors") ==
          os.path.getsize(os.path.join(base, "model.safetensors")),
          f"the manifest names the base and its files' sizes ({recorded})")
    merged = os.path.join(tmp, "merged")
    bad = run([trident, "convert", "--load", resumed, "--save-hf", merged])
    check(bad.returncode == 2 and "--merge-lora" in bad.stderr,
          f"convert of adapters without --merge-lora: exit {bad.returncode} naming it")
    good = run([trident, "convert", "--load", resumed, "--save-hf", merged, "--merge-lora",
                "--save-hf-dtype", "fp32"])
    wm = read_safetensors(os.path.join(merged, "model.safetensors")) if good.returncode == 0 else {}
    check(wm and all(np.array_equal(wm[k], w2[k]) for k in w2),
          "convert --merge-lora writes the merged model the run exported " + good.stderr[-500:])
    return resumed, merged


def inference(trident, source, tmp, ckpt, merged, base):
    """generate with base + adapters against PyTorch on the merged weights; score."""
    tokenizer = ["--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                 "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
    out = run([trident, "generate", "--load", ckpt, "--prompt", "The adapters of a frozen base",
               "--greedy", "--tokens-to-generate", "4", "--logprobs", "--json"] + tokenizer)
    if not passed(out.returncode == 0, "generate --load CKPT of adapters runs " +
                  (out.stderr[-800:] if out.returncode else "")):
        return
    r = json.loads(out.stdout.splitlines()[0])
    torch.set_default_dtype(torch.float64)
    w = {k: torch.tensor(v, dtype=torch.float64)
         for k, v in read_safetensors(os.path.join(merged, "model.safetensors")).items()}
    config = json.load(open(os.path.join(merged, "config.json")))
    ids = r["prompt_tokens"]
    logits = forward(w, config, ids)
    ref = [float(logits[i].log_softmax(-1)[ids[i + 1]]) for i in range(len(ids) - 1)]
    err = max(abs(a - b) for a, b in zip(r["prompt_logprobs"], ref))
    check(err < 1e-4, f"base + adapters give the merged model's log-probabilities "
                      f"(PyTorch float64; max error {err:.1e})")
    bf16_generation(trident, ckpt, base, tokenizer, ref)
    with open(os.path.join(tmp, "ids.json"), "w") as f:
        json.dump(ids, f)
    scored = run([trident, "score", "--load-hf", merged, "--tokens", os.path.join(tmp, "ids.json")])
    loss = json.loads(scored.stdout)["loss"] if scored.returncode == 0 else float("nan")
    mean = -sum(r["prompt_logprobs"]) / len(r["prompt_logprobs"])
    check(abs(loss - mean) < 1e-5 * max(1, abs(loss)),
          f"score of the merged model equals base + adapters' ({loss:.6f} vs {mean:.6f})")
    merged_checkpoint(trident, tmp, ckpt, mean)
    with open(os.path.join(base, "model.safetensors"), "ab") as f:
        f.write(b"\0" * 8)
    out = run([trident, "generate", "--load", ckpt, "--prompt", "x", "--greedy",
               "--tokens-to-generate", "1"] + tokenizer)
    check(out.returncode != 0 and "LoRA base" in out.stderr,
          f"a changed base is refused (exit {out.returncode}) {out.stderr[-300:]!r}")


def bf16_generation(trident, ckpt, base, tokenizer, ref):
    """generate --bf16 of base + adapters (unmerged: the base's bf16 copy, the branch in fp32 on
    the widened input) against the float64 merged model, within 1e-2 (measured 1.1e-3), which
    is below what the adapters change (the base's own log-probabilities are further off)."""
    prompt = ["--prompt", "The adapters of a frozen base", "--greedy", "--tokens-to-generate", "4",
              "--logprobs", "--json"] + tokenizer
    half = run([trident, "generate", "--load", ckpt, "--bf16"] + prompt)
    plain = run([trident, "generate", "--load-hf", base] + prompt)
    ok = half.returncode == plain.returncode == 0
    if not passed(ok, "generate --bf16 --load CKPT runs " +
                  ("" if ok else half.stderr[-800:] + plain.stderr[-800:])):
        return
    logprobs = lambda out: json.loads(out.stdout.splitlines()[0])["prompt_logprobs"]
    err = max(abs(a - b) for a, b in zip(logprobs(half), ref))
    effect = max(abs(a - b) for a, b in zip(logprobs(plain), ref))
    check(1e-6 < err < 1e-2 < effect,
          f"generate --bf16 of base + adapters gives the merged model's log-probabilities within "
          f"1e-2 ({err:.1e}; bf16 is on), below the adapters' effect ({effect:.1e})")


def merged_checkpoint(trident, tmp, ckpt, mean):
    """convert --merge-lora --save: a normal checkpoint scoring as base + adapters."""
    merged = os.path.join(tmp, "merged_ckpt")
    out = run([trident, "convert", "--load", ckpt, "--merge-lora", "--save", merged])
    if not passed(out.returncode == 0, "convert --merge-lora --save writes a checkpoint " +
                  out.stderr[-800:]):
        return
    names = checkpoint_files(merged)
    manifest = json.load(open(sorted(glob.glob(os.path.join(merged, "iter_*", "manifest.json")))[-1]))
    check(names and not any(".lora_" in n for n in names) and "lora" not in manifest["model"]
          and "lora_base" not in manifest,
          f"the merged checkpoint is a full one ({len(names)} tensors, no adapters)")
    scored = run([trident, "score", "--load", merged, "--tokens", os.path.join(tmp, "ids.json")])
    loss = json.loads(scored.stdout)["loss"] if scored.returncode == 0 else float("nan")
    check(abs(loss - mean) < 1e-5 * max(1, abs(loss)),
          f"score of the merged checkpoint equals base + adapters' ({loss:.6f} vs {mean:.6f}) "
          + (scored.stderr[-300:] if scored.returncode else ""))


def checkpoints(trident, source):
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        made = run([trident, "train"] + WIDE + ["--train-iters", "1", "--lr", "0", "--save-hf", base,
                                                "--save-hf-dtype", "fp32"])
        if not passed(made.returncode == 0, "a base model is written " + made.stderr[-800:]):
            return
        before = digest(base)
        done = resume_and_convert(trident, tmp, base)
        check(digest(base) == before, "the base directory is untouched by LoRA training")
        if done:
            inference(trident, source, tmp, *done, base)


def main():
    trident = sys.argv[1]
    for name, model in (("GPT-2 block", GPT), ("Llama block", LLAMA + DROPOUT)):
        print(f"-- {name}")
        failed = run_parity(trident, model + LORA, LAYOUTS[name])
        check.add_parity(failed, len(LAYOUTS[name]))
        log = frozen_and_low_rank(trident, name, model)
    dropout_is_live(trident, LLAMA)
    bf16(trident)
    memory_plan(log)
    checkpoints(trident, sys.argv[2])
    refusals(trident)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
