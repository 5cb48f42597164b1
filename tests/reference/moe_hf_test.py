#!/usr/bin/python3
"""HF mixtures of experts (issue 32, step 4): Mixtral (MixtralForCausalLM) and Qwen3-MoE
(Qwen3MoeForCausalLM) directories of random weights against the independent float64 PyTorch
model of llama_family_reference.py, whose sparse MoE blocks are written from HF's
definitions (softmax over the experts, top-k, renormalised for Mixtral and for Qwen3-MoE's
norm_topk_prob true; Qwen3-MoE's dense layers by mlp_only_layers and decoder_sparse_step).

Checked: `trident score`'s loss (1e-5 relative) and every gradient in HF names (1e-5 of the
largest) for Mixtral, Qwen3-MoE with norm_topk_prob true and decoder_sparse_step 2, and
norm_topk_prob false with mlp_only_layers; HF -> checkpoint -> HF gives the same tensors byte
for byte and a config.json with the same experts and MoE layers; `generate`'s greedy tokens
(KV cache) equal the reference's full recomputation (and one process's under p = 2 and
t = 2; `generate --bf16`'s logprobs follow them within bf16's 1e-2), as do `eval`'s log-likelihoods and `serve`'s greedy completions; transformers v5's fused experts (gate_up_proj, down_proj) read
as the per-expert tensors; `train --load-hf` then `--save-hf` of a Mixtral and of a
Qwen3-MoE with dense layers (with --lr 0 the same bytes; router_aux_loss_coef is the default
--moe-aux-loss-coeff); samples while training equal `generate`'s continuation. Refused with
exit 2 and nothing written: flags contradicting config.json (each naming the flag and the
field), router_jitter_noise > 0 for training, patterns or options HF cannot express on
export, bad MoE keys in config.json. Router ties are kept out: for scoring the gates are
redrawn until every token's k-th and (k+1)-th router logits are more than 1e-3 apart, and the
generation checks require the same margin on the reference's greedy run.
Usage: moe_hf_test.py /path/to/trident /path/to/source
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_family_reference as ref  # noqa: E402
from llama_family_reference import (convert_round_trip, draw_weights,  # noqa: E402
                                    eval_against_reference, greedy, is_moe_layer,
                                    same_tensor_bytes, score_against_torch, serve_greedy,
                                    total_loss, write_model)
from parity import MPI_ENV, Checks  # noqa: E402

MARGIN = 1e-3
MIXTRAL = dict(architectures=["MixtralForCausalLM"], model_type="mixtral", hidden_act="silu",
               num_hidden_layers=2, hidden_size=32, intermediate_size=40, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=101, max_position_embeddings=24,
               rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=None,
               tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2,
               router_aux_loss_coef=0.02, router_jitter_noise=0.0, output_router_logits=False,
               torch_dtype="float32")
QWEN3_MOE = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", hidden_act="silu",
                 num_hidden_layers=4, hidden_size=32, intermediate_size=48,
                 moe_intermediate_size=24, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=16, vocab_size=101, max_position_embeddings=24, rms_norm_eps=1e-6,
                 rope_theta=1000000.0, rope_scaling=None, attention_bias=False,
                 use_sliding_window=False, sliding_window=None, max_window_layers=4,
                 tie_word_embeddings=False, num_experts=6, num_experts_per_tok=2,
                 norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
                 router_aux_loss_coef=0.001, output_router_logits=False, torch_dtype="float32")


def is_router(name):
    return name.endswith(("block_sparse_moe.gate.weight", "mlp.gate.weight"))


def margin_of(weights, config, run):
    """The smallest router margin of the reference's forward passes in run(w)."""
    w = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights.items()}
    ref.ROUTER_MARGINS.clear()
    with torch.no_grad():
        run(w)
    return min(ref.ROUTER_MARGINS)


def routable_weights(config, rng, run):
    """Random weights with gates of std 1 (router logits of a few units), the gates redrawn
    until run(w)'s routing has margins above MARGIN."""
    weights = draw_weights(config, rng)
    for _ in range(100):
        for name in [n for n in weights if is_router(n)]:
            weights[name] = rng.standard_normal(weights[name].shape).astype(np.float32)
        if margin_of(weights, config, run) > MARGIN:
            return weights
    raise RuntimeError("no gate draw without near-ties")


def moe_layers(config):
    return [i for i in range(config["num_hidden_layers"]) if is_moe_layer(config, i)]


def score_case(check, trident, tmp, tag, config, rng):
    """score against the reference, then the convert round trip."""
    sequences = [[int(t) for t in rng.integers(0, config["vocab_size"], n)] for n in (13, 25, 40)]
    weights = routable_weights(config, rng, lambda w: total_loss(w, config, sequences))
    got = score_against_torch(check, trident, tmp, tag, config, rng, weights=weights,
                              sequences=sequences)
    if not got:
        return None
    back, errors = convert_round_trip(trident, tmp, tag, got[0])
    ok, n = same_tensor_bytes(got[0], back) if back else (False, 0)
    check(ok, f"{tag}: HF -> trident checkpoint -> HF: {n} tensors identical {errors}")
    if ok:
        after = json.load(open(os.path.join(back, "config.json")))
        keys = ["architectures", "model_type", "num_hidden_layers", "hidden_size",
                "num_attention_heads", "num_key_value_heads", "vocab_size",
                "num_experts_per_tok", "tie_word_embeddings", "intermediate_size"]
        keys += (["num_local_experts", "sliding_window"] if config["model_type"] == "mixtral" else
                 ["num_experts", "moe_intermediate_size", "norm_topk_prob", "head_dim"])
        differ = [k for k in keys if after.get(k) != config[k]]
        same_layers = moe_layers(after) == moe_layers(config)
        check(not differ and same_layers,
              f"{tag}: exported config.json agrees on {len(keys)} keys {differ} and on the MoE "
              f"layers {moe_layers(after)}")
    return got


def as_v5_fused(config, weights):
    """The weights as transformers v5 holds them (its checkpoint conversion mapping): per MoE
    layer mlp.experts.gate_up_proj [E, 2I, h] (each expert's gate rows, then its up rows),
    mlp.experts.down_proj [E, h, I], and Mixtral's router renamed mlp.gate."""
    out = dict(weights)
    for i in moe_layers(config):
        router, experts = ref.moe_names(config, i)
        p = f"model.layers.{i}.mlp."
        out[p + "gate.weight"] = out.pop(router + ".weight")
        gate_up = [np.concatenate([out.pop(g + ".weight"), out.pop(u + ".weight")])
                   for g, u, _ in experts]
        out[p + "experts.gate_up_proj"] = np.stack(gate_up)
        out[p + "experts.down_proj"] = np.stack([out.pop(d + ".weight") for _, _, d in experts])
    return out


def v5_fused(check, trident, tmp, tag, config, model, weights):
    """A v5-fused directory of the same weights scores the same loss and gradients (in the
    per-expert names) as the per-expert one, and converts back to its bytes."""
    fused = os.path.join(tmp, tag + "_v5")
    write_model(fused, config, as_v5_fused(config, weights))
    tokens, results = os.path.join(tmp, tag + "_tokens.json"), []
    for directory in (model, fused):
        grads = directory + "_v5_check_grads"
        out = subprocess.run([trident, "score", "--model", directory, "--tokens", tokens,
                              "--save-grads", grads], capture_output=True, text=True)
        saved = os.path.join(grads, "model.safetensors")
        results.append((out.stdout, ref.read_safetensors_raw(saved) if out.returncode == 0
                        else out.stderr[-300:]))
    check(results[0] == results[1],
          f"{tag}: transformers v5's fused experts score the same loss and gradients "
          f"{results[1][1] if isinstance(results[1][1], str) else ''}")
    back, errors = convert_round_trip(trident, tmp, tag + "_v5", fused)
    ok, n = same_tensor_bytes(model, back) if back else (False, 0)
    check(ok, f"{tag}: v5 fused -> checkpoint -> HF gives the per-expert directory's {n} tensors "
              f"{errors}")


def generate(trident, tokenizer, args, ranks=1):
    cmd = [trident, "generate"] + tokenizer + args + ["--json"]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd + ["--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=MPI_ENV)
    return out, ([json.loads(line) for line in out.stdout.splitlines()] if out.returncode == 0
                 else None)


def common_logprobs(r, q):
    """(r's logprob, q's) of each token the two generations pick alike, up to where they part."""
    out = []
    for a, b, lp_a, lp_b in zip(r["tokens"], q["tokens"], r["logprobs"], q["logprobs"]):
        if a != b:
            break
        out.append((lp_a, lp_b))
    return out


def generation(check, trident, source, tmp, tag, config, rng, serve_and_eval):
    """KV-cache greedy generation (trident) against the reference's full recomputation; eval
    and serve against the same reference."""
    config = dict(config, vocab_size=50304, max_position_embeddings=48)  # GPT-2's tokenizer
    model = os.path.join(tmp, tag)
    weights = draw_weights(config, rng)
    for name in [n for n in weights if is_router(n)]:
        weights[name] = rng.standard_normal(weights[name].shape).astype(np.float32)
    write_model(model, config, weights)
    tokenizer = ["--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                 "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
    base = ["--load-hf", model, "--greedy", "--tokens-to-generate", "10", "--logprobs",
            "--max-batch", "2", "--prompt", "In the beginning God created", "--prompt", "Hello"]
    out, rows = generate(trident, tokenizer, base)
    check(rows is not None and len(rows) == 2, f"{tag}: generate runs {out.stderr[-300:]}")
    if rows is None:
        return
    w = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights.items()}
    for r in rows:
        ref.ROUTER_MARGINS.clear()
        want, want_lp = greedy(w, config, r["prompt_tokens"], 10)
        margin = min(ref.ROUTER_MARGINS)
        err = max(abs(a - b) for a, b in zip(r["logprobs"], want_lp))
        check(r["tokens"] == want and err < 1e-4 and margin > MARGIN,
              f"{tag}: KV-cache greedy tokens equal full recomputation's for {r['prompt']!r} "
              f"(logprob error {err:.1e}, router margin {margin:.1e})")
    out, piped = generate(trident, tokenizer, base + ["--pipeline-model-parallel-size", "2"], 2)
    check(piped is not None and [p["tokens"] for p in piped] == [r["tokens"] for r in rows],
          f"{tag}: the same tokens under p = 2 {'' if piped else out.stderr[-300:]}")
    out, split = generate(trident, tokenizer, base + ["--tensor-model-parallel-size", "2"], 2)
    err = (max(abs(a - b) for r, q in zip(rows, split)
               for a, b in zip(r["logprobs"], q["logprobs"])) if split else None)
    check(split is not None and [q["tokens"] for q in split] == [r["tokens"] for r in rows] and
          err < 1e-4, f"{tag}: the same tokens and logprobs under t = 2 (each tensor rank runs "
          f"its shard of every expert) {err} {'' if split else out.stderr[-300:]}")
    if serve_and_eval:
        eval_against_reference(check, trident, tokenizer, tmp, tag, model, w, config)
        serve_greedy(check, trident, tokenizer, tag, model, [r["prompt"] for r in rows], 10,
                     [r["prompt_tokens"] + r["tokens"] for r in rows], "generate's")
    # bf16 (the experts' products on bf16 operands, the router fp32): the logprobs of the
    # tokens both pick follow fp32's within bf16's rounding (2^-9 per operand; measured
    # 4.5e-3 relative at logprobs near -11), and differ from them.
    out, low = generate(trident, tokenizer, base + ["--bf16"])
    same = [] if low is None else [pair for r, q in zip(rows, low) for pair in common_logprobs(r, q)]
    err = max((abs(a - b) / abs(a) for a, b in same), default=None)
    check(low is not None and len(same) >= 2 and 0 < err < 1e-2,
          f"{tag}: generate --bf16 follows fp32's logprobs over the {len(same)} tokens both "
          f"pick within 1e-2 relative (worst {err}) {'' if low else out.stderr[-300:]}")
    return model, tokenizer


def samples_while_training(check, trident, tmp, model, tokenizer):
    """train --load-hf --sample-prompt: the sample at iteration 2 is trident generate's
    continuation (seed + 2) from the checkpoint of iteration 2."""
    save = os.path.join(tmp, "mixtral_sampled")
    out = train(trident, ["--load-hf", model, "--save", save, "--sample-prompt", "In the beginning",
                          "--sample-interval", "2", "--sample-tokens", "8", "--seed", "7"] +
                TRAIN + tokenizer)
    sample = re.findall(r"^ sample at iteration 2: In the beginning(.*)$", out.stdout, re.M)
    gen, rows = generate(trident, tokenizer, ["--load", save, "--prompt", "In the beginning",
                                              "--tokens-to-generate", "8", "--temperature", "0.8",
                                              "--top-p", "0.9", "--seed", "9"])
    want = rows[-1]["text"] if rows else None
    check(out.returncode == 0 and sample == [want],
          f"train --sample-prompt of a Mixtral prints generate's continuation ({sample} vs "
          f"{want!r}){'' if want else out.stderr[-300:] + gen.stderr[-300:]}")


TRAIN = ["--mock-data", "--train-iters", "2", "--global-batch-size", "2", "--micro-batch-size",
         "1", "--seq-length", "16", "--eval-iters", "0", "--lr", "1e-3", "--min-lr", "1e-3"]


def train(trident, args):
    return subprocess.run([trident, "train"] + args, capture_output=True, text=True, timeout=300)


def training(check, trident, tmp, model):
    """train --load-hf of a Mixtral directory, then --save-hf."""
    same = os.path.join(tmp, "mixtral_lr0")
    out = train(trident, ["--load-hf", model, "--save-hf", same, "--lr", "0"] + TRAIN[:-4])
    ok, n = same_tensor_bytes(model, same) if out.returncode == 0 else (False, 0)
    check(ok, f"train --load-hf Mixtral --lr 0 --save-hf: the same bytes of {n} tensors "
              f"{out.stderr[-300:]}")
    # router_aux_loss_coef (0.02) is the default coefficient: the default run's weights equal
    # an explicit --moe-aux-loss-coeff 0.02's and differ from --moe-aux-loss-coeff 0's.
    saved = {}
    for name, extra in (("default", []), ("explicit", ["--moe-aux-loss-coeff", "0.02"]),
                        ("none", ["--moe-aux-loss-coeff", "0"])):
        saved[name] = os.path.join(tmp, "mixtral_trained_" + name)
        out = train(trident, ["--load-hf", model, "--save-hf", saved[name]] + TRAIN + extra)
        logged = "load_balancing_loss" in out.stdout
        check(out.returncode == 0 and logged == (name != "none"),
              f"train --load-hf Mixtral {extra} trains (the load-balancing loss logged: "
              f"{logged}) {out.stderr[-300:]}")
    if all(os.path.isdir(d) for d in saved.values()):
        check(same_tensor_bytes(saved["default"], saved["explicit"])[0] and
              not same_tensor_bytes(saved["default"], saved["none"])[0],
              "router_aux_loss_coef is the default --moe-aux-loss-coeff")


def qwen3_moe_training(check, trident, tmp, model):
    """train --load-hf of a Qwen3-MoE with dense layers, --lr 0, --save-hf: the same bytes, and
    a config.json with the same MoE layers."""
    same = os.path.join(tmp, "qwen3_moe_lr0")
    out = train(trident, ["--load-hf", model, "--save-hf", same, "--lr", "0"] + TRAIN[:-4])
    ok, n = same_tensor_bytes(model, same) if out.returncode == 0 else (False, 0)
    layers = (moe_layers(json.load(open(os.path.join(same, "config.json")))) if ok else None)
    want = moe_layers(json.load(open(os.path.join(model, "config.json"))))
    check(ok and layers == want,
          f"train --load-hf Qwen3-MoE --lr 0 --save-hf: the same bytes of {n} tensors, MoE "
          f"layers {layers} {out.stderr[-300:]}")


def contradicting_flags(check, trident, tmp, mixtral, qwen_step2, qwen_norm):
    """Flags that say otherwise than config.json: exit 2, the flag and the field named."""
    cases = [(mixtral, ["--num-experts", "8"], ["--num-experts (8)", "num_local_experts"]),
             (mixtral, ["--moe-router-topk", "1"],
              ["--moe-router-topk (1)", "num_experts_per_tok"]),
             (mixtral, ["--moe-ffn-hidden-size", "64"], ["--moe-ffn-hidden-size (64)",
                                                        "intermediate_size (40)"]),
             (mixtral, ["--moe-router-pre-softmax"], ["--moe-router-pre-softmax",
                                                     "MixtralForCausalLM"]),
             (qwen_step2, ["--moe-layer-freq", "1"], ["--moe-layer-freq ([1,1,1,1])",
                                                     "mlp_only_layers and decoder_sparse_step "
                                                     "([0,1,0,1])"]),
             (qwen_step2, ["--moe-ffn-hidden-size", "48"], ["moe_intermediate_size (24)"]),
             (qwen_norm, ["--moe-router-pre-softmax"], ["norm_topk_prob"])]
    for model, flags, words in cases:
        saved = os.path.join(tmp, "never_written")
        out = train(trident, ["--load-hf", model, "--save-hf", saved] + TRAIN + flags)
        check(out.returncode == 2 and all(w in out.stderr for w in words) and
              not os.path.exists(saved),
              f"train --load-hf {os.path.basename(model)} {' '.join(flags)} is refused: "
              f"{out.stderr.strip()[-220:]}")


def refusals(check, trident, tmp, rng):
    """Jitter for training; exports HF cannot express; bad MoE keys in config.json."""
    tokens = os.path.join(tmp, "ids.json")
    with open(tokens, "w") as f:
        json.dump([[1, 2, 3, 4, 5]], f)
    jitter = os.path.join(tmp, "mixtral_jitter")
    config = dict(MIXTRAL, router_jitter_noise=0.1)
    write_model(jitter, config, draw_weights(config, rng))
    out = subprocess.run([trident, "score", "--model", jitter, "--tokens", tokens],
                         capture_output=True, text=True)
    check(out.returncode == 0, f"router_jitter_noise 0.1: score runs (HF's inference ignores it) "
                               f"{out.stderr[-200:]}")
    out = train(trident, ["--load-hf", jitter] + TRAIN)
    check(out.returncode == 2 and "router_jitter_noise" in out.stderr,
          f"router_jitter_noise 0.1: train is refused by name: {out.stderr.strip()[-200:]}")
    # A dense layer has no Mixtral: refused before training, nothing written.
    scratch = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
               "--vocab-size", "101", "--normalization", "RMSNorm", "--position-embedding-type",
               "rope", "--swiglu", "--group-query-attention", "--num-query-groups", "2",
               "--disable-bias-linear", "--untie-embeddings-and-output-weights",
               "--num-experts", "4", "--moe-layer-freq", "[1,0]"]
    saved = os.path.join(tmp, "dense_layer_hf")
    out = train(trident, scratch + TRAIN + ["--save-hf", saved])
    check(out.returncode == 2 and "MixtralForCausalLM" in out.stderr and "layers 1" in
          out.stderr and not os.path.exists(saved),
          f"train --save-hf of an MoE model with a dense layer, without --qk-layernorm, is "
          f"refused: {out.stderr.strip()[-220:]}")
    ckpt = os.path.join(tmp, "dense_layer_ckpt")
    out = train(trident, scratch + TRAIN + ["--save", ckpt])
    out = subprocess.run([trident, "convert", "--load", ckpt, "--save-hf", saved],
                         capture_output=True, text=True)
    check(out.returncode == 2 and "MixtralForCausalLM" in out.stderr and
          not os.path.exists(saved),
          f"convert --save-hf of the same checkpoint is refused: {out.stderr.strip()[-220:]}")
    # The same pattern with Qwen3's q/k norms is a Qwen3-MoE with mlp_only_layers [1].
    out = train(trident, scratch + TRAIN + ["--qk-layernorm", "--kv-channels", "16",
                                            "--save-hf", saved])
    written = json.load(open(os.path.join(saved, "config.json"))) if out.returncode == 0 else {}
    check(written.get("architectures") == ["Qwen3MoeForCausalLM"] and
          written.get("mlp_only_layers") == [1] and written.get("decoder_sparse_step") == 1,
          f"with --qk-layernorm it is exported as Qwen3-MoE, mlp_only_layers [1] "
          f"{out.stderr[-200:]}")
    bad_keys = [("num_experts_per_tok", dict(QWEN3_MOE, num_experts_per_tok=7)),
                ("mlp_only_layers", dict(QWEN3_MOE, mlp_only_layers=[4])),
                ("moe_intermediate_size", {k: v for k, v in QWEN3_MOE.items()
                                           if k != "moe_intermediate_size"}),
                ("num_local_experts", dict(MIXTRAL, num_local_experts=0)),
                ("decoder_sparse_step", dict(QWEN3_MOE, decoder_sparse_step=5))]
    for key, config in bad_keys:
        bad = os.path.join(tmp, "bad_" + key)
        write_model(bad, config, {})
        out = subprocess.run([trident, "score", "--model", bad, "--tokens", tokens],
                             capture_output=True, text=True)
        check(out.returncode == 2 and key in out.stderr,
              f"config.json with a bad {key} is refused by name: {out.stderr.strip()[-160:]}")


def main():
    trident, source = sys.argv[1], sys.argv[2]
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(3232)
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        mixtral = score_case(check, trident, tmp, "mixtral", MIXTRAL, rng)
        step2 = score_case(check, trident, tmp, "qwen3_moe_step2",
                           dict(QWEN3_MOE, decoder_sparse_step=2), rng)
        unnormalised = dict(QWEN3_MOE, norm_topk_prob=False, mlp_only_layers=[2],
                            tie_word_embeddings=True)
        got = score_case(check, trident, tmp, "qwen3_moe_unnormalised_mlp_only", unnormalised, rng)
        if got:
            v5_fused(check, trident, tmp, "qwen3_moe_unnormalised_mlp_only", unnormalised, *got)
        if mixtral:
            v5_fused(check, trident, tmp, "mixtral", MIXTRAL, *mixtral)
        # Mixtral's attention is Mistral's: a sliding window of 8 over windows of 24 tokens,
        # top-1 of 3 experts (a renormalised weight of 1), multi-head.
        score_case(check, trident, tmp, "mixtral_window_top1",
                   dict(MIXTRAL, sliding_window=8, num_key_value_heads=4, num_local_experts=3,
                        num_experts_per_tok=1), rng)
        big_mixtral = generation(check, trident, source, tmp, "mixtral_generate", MIXTRAL, rng,
                                 True)
        if big_mixtral:
            samples_while_training(check, trident, tmp, *big_mixtral)
        generation(check, trident, source, tmp, "qwen3_moe_generate",
                   dict(QWEN3_MOE, norm_topk_prob=False, mlp_only_layers=[1]), rng, False)
        if mixtral:
            training(check, trident, tmp, mixtral[0])
        if mixtral and step2:
            norm = os.path.join(tmp, "qwen3_moe_norm")
            write_model(norm, QWEN3_MOE, draw_weights(QWEN3_MOE, rng))
            contradicting_flags(check, trident, tmp, mixtral[0], step2[0], norm)
            qwen3_moe_training(check, trident, tmp, step2[0])
        refusals(check, trident, tmp, rng)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
