#!/usr/bin/python3
"""trident's MoE layers (issue 32) against an independent float64 PyTorch model written from
the published definitions (Megatron-Core's router, /work/notes/moe_design.md A2): per token,
the sum over its top-k experts of weight x expert(x), where the weights are the softmax over
the k chosen logits (Megatron's default; Mixtral) or the softmax over all experts taken at
the k chosen (--moe-router-pre-softmax; Qwen3-MoE's norm_topk_prob false); the experts are
SwiGLU MLPs; the load-balancing loss coeff E / (k T^2) sum_e n_e sum_x softmax(x)_e and the
z-loss coeff mean_x logsumexp(x)^2 of each micro-batch of T tokens join the objective as
Megatron's (1/m) sum over micro-batches of [mean language-model loss + router losses].
Token dropping (--moe-expert-capacity-factor) is Megatron's rule written naively here: each
expert keeps ceil(T k / E x factor) of the micro-batch's choices that picked it, by weight
(probs) or by position, a dropped choice getting weight 0 (the aux loss counts before
dropping); padding to the capacity must not change the model. Shared experts add
[sigmoid(x . gate_weight) x] SwiGLU_S(x) on every token (Megatron's SharedExpertMLP,
Qwen2-MoE's shared_expert with its gate).

The model is Llama-style (RMSNorm, RoPE, SwiGLU, no biases, tied output layer) with 4 layers
of which --moe-layer-freq [1,0,1,1] makes 3 MoE (top-2 of 4 experts), the dataset is written
here, and the micro-batches' tokens are read back through trident's own sample-index caches
(whose algorithm tests/reference/dataset_reference_test.py checks against numpy's Megatron).

How the gradient comes out of trident: run A saves the initial weights (--lr 0, one step);
run B loads them (--finetune) and takes one AdamW step with no weight decay, no clipping,
learning rate `LR` and epsilon `EPS`. After one step AdamW moves each weight by exactly
LR g / (|g| + EPS), which is inverted for g. Checked: the language-model loss of the step
and every tensor's gradient at 1e-5 relative (normwise per tensor), for both conventions,
dropless, with capacity 1.0 (probs, padded) and 0.5 (position), and with shared experts
(gated and not);
plus the same step under p = 2 and under d = 2 with the distributed optimizer, and a
training run (full recomputation) whose loss falls.
Usage: moe_reference.py TRIDENT"""
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

from dataset_reference_test import write_dataset
from llama_family_reference import attention, rms_norm, inv_frequencies
from parity import MPI_ENV, Checks, metrics_by_iteration, read_safetensors

torch.set_default_dtype(torch.float64)
LAYERS, HIDDEN, HEADS, SEQ, VOCAB, EXPERTS, TOPK, MOE_FFN, FFN = 4, 32, 4, 16, 64, 4, 2, 40, 48
PATTERN = [1, 0, 1, 1]
MICRO, GLOBAL = 2, 4  # two micro-batches: the router losses' 1/m is exercised
AUX, Z = 0.05, 0.01
LR, EPS = 1.0, 1e-3
MODEL = ["--num-layers", str(LAYERS), "--hidden-size", str(HIDDEN), "--num-attention-heads",
         str(HEADS), "--seq-length", str(SEQ), "--vocab-size", str(VOCAB), "--ffn-hidden-size",
         str(FFN), "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
         "--disable-bias-linear", "--hidden-dropout", "0", "--attention-dropout", "0",
         "--num-experts", str(EXPERTS), "--moe-router-topk", str(TOPK), "--moe-ffn-hidden-size",
         str(MOE_FFN), "--moe-layer-freq", str(PATTERN).replace(" ", ""),
         "--moe-aux-loss-coeff", str(AUX), "--moe-z-loss-coeff", str(Z)]
check = Checks()


def run(trident, args):
    out = subprocess.run([trident, "train"] + args, capture_output=True, text=True, env=MPI_ENV,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"trident train {' '.join(args)}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out.stdout


def checkpoint_weights(directory):
    """The weights of a t = 1 checkpoint, every pipeline stage's file merged (a last stage's
    copy of the tied word embedding equals the first stage's)."""
    files = sorted(glob.glob(os.path.join(directory, "iter_*", "model_tp*_pp*.safetensors")))
    assert files, directory
    out = {}
    for path in files:
        for k, v in read_safetensors(path).items():
            if not k.endswith(("exp_avg", "exp_avg_sq")):
                out.setdefault(k, torch.tensor(v.astype(np.float64)))
    return out


def samples(cache, documents, count):
    """Megatron's GPTDataset.__getitem__ over trident's index caches: seq + 1 tokens each."""
    def load(kind):
        (path,) = glob.glob(os.path.join(cache, f"*-GPTDataset-train-{kind}.npy"))
        return np.load(path)
    doc_index, sample_index, shuffle = load("document_index"), load("sample_index"), load("shuffle_index")
    out = []
    for i in range(count):
        j = shuffle[i]
        (d0, o0), (d1, o1) = sample_index[j], sample_index[j + 1]
        if d0 == d1:
            tokens = documents[doc_index[d0]][o0:o1 + 1]
        else:
            tokens = documents[doc_index[d0]][o0:]
            for d in range(d0 + 1, d1):
                tokens = tokens + documents[doc_index[d]]
            tokens = tokens + documents[doc_index[d1]][:o1 + 1]
        assert len(tokens) == SEQ + 1, len(tokens)
        out.append(tokens)
    return torch.tensor(out)


def hf_names(w):
    """trident's (Megatron's) attention tensors under the HF names llama_family_reference reads."""
    out = dict(w)
    for layer in range(LAYERS):
        p, q = f"layers.{layer}.", f"model.layers.{layer}."
        qkv = w[p + "self_attention.linear_qkv.weight"]
        out[q + "self_attn.q_proj.weight"], out[q + "self_attn.k_proj.weight"], \
            out[q + "self_attn.v_proj.weight"] = qkv.chunk(3, 0)
        out[q + "self_attn.o_proj.weight"] = w[p + "self_attention.linear_proj.weight"]
    return out


def swiglu_mlp(fc1, fc2, x):
    gate, up = fc1.chunk(2, 0)
    return (F.silu(x @ gate.T) * (x @ up.T)) @ fc2.T


def kept_choices(idx, weights, drop, margins):
    """Megatron's token dropping, naively: each expert keeps ceil(T k / E factor) of the
    (token, slot) choices that picked it, those of the highest weights ("probs", ties to the
    lower token) or the first tokens ("position"). Returns the 0/1 mask [T, k] and appends
    the smallest gap between an expert's last kept and first dropped weight (probs)."""
    factor, policy = drop
    tokens = idx.shape[0]
    capacity = math.ceil(tokens * TOPK / EXPERTS * factor)
    keep = torch.zeros(idx.shape, dtype=torch.float64)
    for e in range(EXPERTS):
        pairs = [(t, j) for t in range(tokens) for j in range(TOPK) if int(idx[t, j]) == e]
        if policy == "probs":
            pairs.sort(key=lambda tj: -float(weights[tj]))  # stable: ties keep token order
            if len(pairs) > capacity:
                margins.append(float(weights[pairs[capacity - 1]] - weights[pairs[capacity]]))
        for t, j in pairs[:capacity]:
            keep[t, j] = 1.0
    return keep


def moe(w, p, x, pre_softmax, margins, drop=None, dropped=None, shared=None):
    """One MoE MLP on x [T, h]: output [T, h], the layer's aux + z losses and the tokens each
    expert was sent (before dropping, as Megatron counts them for the aux loss). drop:
    (capacity factor, policy) or None (dropless); dropped (a list) gets the dropped count.
    shared: (width, gated) of the shared experts or None."""
    logits = x @ w[p + "mlp.router.weight"].T
    probs = logits.softmax(-1)
    top, idx = logits.topk(TOPK, -1)
    sorted_logits = logits.detach().sort(-1, descending=True).values
    margins.append(float((sorted_logits[:, TOPK - 1] - sorted_logits[:, TOPK]).min()))
    weights = probs.gather(1, idx) if pre_softmax else top.softmax(-1)
    if drop is not None:
        keep = kept_choices(idx, weights.detach(), drop, margins)
        dropped.append(int((keep == 0).sum()))
        weights = weights * keep  # a dropped choice: weight 0, no gradient
    y = torch.zeros_like(x)
    for e in range(EXPERTS):
        weight = (weights * (idx == e)).sum(-1, keepdim=True)  # 0 where e was not chosen
        out = swiglu_mlp(w[p + f"mlp.experts.{e}.linear_fc1.weight"],
                         w[p + f"mlp.experts.{e}.linear_fc2.weight"], x)
        y = y + weight * out
    if shared is not None:  # every token through the shared MLP, gated as Qwen2-MoE's
        q = p + "mlp.shared_experts."
        out = swiglu_mlp(w[q + "linear_fc1.weight"], w[q + "linear_fc2.weight"], x)
        y = y + (torch.sigmoid(x @ w[q + "gate_weight"].T) * out if shared[1] else out)
    tokens = x.shape[0]
    counts = F.one_hot(idx, EXPERTS).sum((0, 1)).to(x.dtype)  # a constant: no gradient
    aux = AUX * EXPERTS / (TOPK * tokens * tokens) * (counts * probs.sum(0)).sum()
    z = Z * (torch.logsumexp(logits, -1) ** 2).mean()
    return y, aux, z, counts


def objective(w, batch, pre_softmax, margins, loads=None, drop=None, dropped=None, shared=None):
    """(1/m) sum over micro-batches of [mean LM loss + router losses]; and, as floats, the
    LM loss and the two router losses of the objective. loads (a dict): each MoE layer's
    tokens per expert over the batch, and its two losses, are added to it. drop, dropped,
    shared: as moe's (the capacity is per micro-batch)."""
    c = {"hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
    d = HIDDEN // HEADS
    angles = torch.outer(torch.arange(SEQ, dtype=torch.float64), inv_frequencies(c, d))
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    hidden = torch.arange(SEQ)[None, :] > torch.arange(SEQ)[:, None]
    hf = hf_names(w)
    emb = w["embedding.word_embeddings.weight"]
    head = w.get("output_layer.weight", emb)
    m = GLOBAL // MICRO
    total, lm, router_parts = 0.0, 0.0, [0.0, 0.0]
    for mb in batch.split(MICRO):
        ids, targets = mb[:, :-1], mb[:, 1:]
        x, router = emb[ids], 0.0
        for layer in range(LAYERS):
            p = f"layers.{layer}."
            a = rms_norm(x, w[p + "input_layernorm.weight"], 1e-5)
            x = x + torch.stack([attention(hf, c, f"model.layers.{layer}.", a[b], cos, sin, hidden)
                                 for b in range(MICRO)])
            n = rms_norm(x, w[p + "post_attention_layernorm.weight"], 1e-5).reshape(-1, HIDDEN)
            if PATTERN[layer]:
                y, aux, z, counts = moe(w, p, n, pre_softmax, margins, drop, dropped, shared)
                if loads is not None:
                    tokens, losses = loads.setdefault(layer, (torch.zeros(EXPERTS), [0.0, 0.0]))
                    tokens += counts.detach()
                    losses[0] += float(aux) / m
                    losses[1] += float(z) / m
                router = router + aux + z
                router_parts[0] += float(aux) / m
                router_parts[1] += float(z) / m
            else:
                y = swiglu_mlp(w[p + "mlp.linear_fc1.weight"], w[p + "mlp.linear_fc2.weight"], n)
            x = x + y.reshape(MICRO, SEQ, HIDDEN)
        # The padded vocabulary's rows never enter the softmax (trident's convention).
        logits = rms_norm(x, w["final_layernorm.weight"], 1e-5) @ head[:VOCAB].T
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                             reduction="sum")
        lm = lm + ce.detach() / (GLOBAL * SEQ)
        total = total + ce / (GLOBAL * SEQ) + router / m
    return total, float(lm), router_parts


def check_expert_loads(tag, logged, loads):
    """The metrics file's moe_layers: each MoE layer's tokens per expert (the reference's
    top-k choices counted over the global batch) and, with --moe-per-layer-logging, its
    losses without their coefficients."""
    check([l["layer"] for l in logged] == sorted(loads),
          f"{tag}: moe_layers lists the MoE layers {sorted(loads)}: "
          f"{[l['layer'] for l in logged]}")
    for entry in logged:
        tokens, (aux, z) = loads.get(entry["layer"], (torch.zeros(EXPERTS), [0.0, 0.0]))
        want = [float(t) for t in tokens]
        check(entry["tokens_per_expert"] == want and entry["min_tokens"] == min(want) and
              entry["max_tokens"] == max(want),
              f"{tag}: layer {entry['layer']}'s tokens per expert {entry['tokens_per_expert']} "
              f"are the reference's {want} (sum {sum(want):.0f} = tokens x k)")
        for key, value in (("load_balancing_loss", aux / AUX), ("z_loss", z / Z)):
            got = entry.get(key, float("nan"))
            check(abs(got - value) <= 1e-5 * abs(value),
                  f"{tag}: layer {entry['layer']}'s {key} {got:.8f} vs reference {value:.8f}")


def gradient_of_one_step(w0, w1):
    """AdamW's first step moved each weight by LR g / (|g| + EPS): g from the move."""
    return {k: EPS * (w0[k] - w1[k]) / (LR - (w0[k] - w1[k]).abs()) for k in w0}


def capacity_flags(drop, pad):
    if drop is None:
        return []
    return ["--moe-expert-capacity-factor", str(drop[0]), "--moe-token-drop-policy", drop[1]] + \
        (["--moe-pad-expert-input-to-capacity"] if pad else [])


def compare_gradients(trident, tmp, documents, pre_softmax, drop=None, pad=False, shared=None):
    """drop: (capacity factor, policy) or None; pad: --moe-pad-expert-input-to-capacity;
    shared: (--moe-shared-expert-intermediate-size, --moe-shared-expert-gate) or None."""
    tag = ("pre_softmax" if pre_softmax else "topk_softmax") + \
        ("" if drop is None else f"_capacity_{drop[0]}_{drop[1]}" + ("_padded" if pad else "")) + \
        ("" if shared is None else f"_shared_{shared[0]}" + ("_gated" if shared[1] else ""))
    data = os.path.join(tmp, "docs")
    cache = os.path.join(tmp, f"cache_{tag}")
    common = MODEL + ["--data-path", data, "--split", "100,0,0", "--data-cache-path", cache,
                      "--micro-batch-size", str(MICRO), "--global-batch-size", str(GLOBAL),
                      "--train-iters", "1", "--eval-iters", "0", "--log-interval", "1",
                      "--lr-decay-style", "constant", "--lr-warmup-iters", "0", "--min-lr", "0",
                      "--weight-decay", "0", "--clip-grad", "0", "--adam-eps", str(EPS),
                      "--seed", "1234", "--peak-tflops", "1", "--threads", "1"]
    if pre_softmax:
        common.append("--moe-router-pre-softmax")
    common += capacity_flags(drop, pad)
    if shared is not None:
        common += ["--moe-shared-expert-intermediate-size", str(shared[0])] + \
            (["--moe-shared-expert-gate"] if shared[1] else [])
    start, stepped = os.path.join(tmp, f"start_{tag}"), os.path.join(tmp, f"stepped_{tag}")
    metrics = os.path.join(tmp, f"{tag}.jsonl")
    run(trident, common + ["--lr", "0", "--save", start])
    run(trident, common + ["--lr", str(LR), "--load", start, "--finetune", "--save", stepped,
                           "--metrics-file", metrics, "--moe-per-layer-logging"])
    w0, w1 = checkpoint_weights(start), checkpoint_weights(os.path.join(stepped))
    grads = gradient_of_one_step(w0, w1)
    batch = samples(cache, documents, GLOBAL)
    w = {k: v.clone().requires_grad_(True) for k, v in w0.items()}
    margins, loads, dropped = [], {}, []
    total, lm, (aux, z) = objective(w, batch, pre_softmax, margins, loads, drop, dropped, shared)
    total.backward()
    check(min(margins) > 1e-4, f"{tag}: no near tie between the k-th and (k+1)-th logit, nor "
                               f"at an expert's capacity (smallest margin {min(margins):.2e})")
    if drop is not None:
        check(0 < sum(dropped) < len(dropped) * MICRO * SEQ * TOPK,
              f"{tag}: the capacity drops some choices and keeps some ({dropped} dropped of "
              f"{MICRO * SEQ * TOPK} per micro-batch and layer)")
    loss = metrics_by_iteration(metrics)[1][0]
    check(abs(loss - lm) <= 1e-5 * abs(lm), f"{tag}: lm loss {loss:.8f} vs reference {lm:.8f}")
    # Megatron's logging: each router loss over its coefficient, the mean over MoE layers.
    row = [r for r in map(json.loads, open(metrics)) if r.get("iteration") == 1][-1]
    moe_layers = sum(PATTERN)
    for key, value in (("load_balancing_loss", aux / (AUX * moe_layers)),
                       ("z_loss", z / (Z * moe_layers))):
        logged = row.get(key, float("nan"))
        check(abs(logged - value) <= 1e-5 * abs(value),
              f"{tag}: logged {key} {logged:.8f} vs reference {value:.8f}")
    check_expert_loads(tag, row.get("moe_layers", []), loads)
    worst, where = 0.0, ""
    for name, param in w.items():
        ref = param.grad if param.grad is not None else torch.zeros_like(param)
        scale = max(float(ref.norm()), 1e-12)
        error = float((grads[name] - ref).norm()) / scale
        if error > worst:
            worst, where = error, name
    expert_names = [k for k in w if ".mlp.experts." in k or ".mlp.router." in k]
    shared_names = [k for k in w if ".mlp.shared_experts." in k]
    want_shared = 0 if shared is None else 3 * (3 if shared[1] else 2)
    check(len(shared_names) == want_shared,
          f"{tag}: the checkpoint holds {want_shared} shared-expert tensors ({shared_names})")
    check(len(expert_names) == 3 * (1 + 2 * EXPERTS) and not any(
        f"layers.{l}.mlp.linear_fc1.weight" in w for l in (0, 2, 3)),
          f"{tag}: the checkpoint holds the router and {EXPERTS} experts per MoE layer, "
          "no dense MLP there")
    check(worst <= 1e-5, f"{tag}: every gradient within 1e-5 of the float64 reference "
                         f"(worst {worst:.2e} at {where})")
    return common, start, grads, loads


def layout_parity(trident, tmp, common, start, grads, loads):
    """Two processes take the same step from the same weights: p = 2 (the MoE layers and
    their router losses on two stages) and d = 2 under the distributed optimizer (each rank
    one micro-batch: the router losses are per micro-batch, averaged over d) give the
    one-process gradients, and log the same expert loads (summed over stages and replicas)."""
    for tag, flags in (("p = 2", ["--pipeline-model-parallel-size", "2"]),
                       ("d = 2, distributed optimizer", ["--use-distributed-optimizer"])):
        stepped = os.path.join(tmp, "stepped_" + tag.split(",")[0].replace(" = ", ""))
        metrics = stepped + ".jsonl"
        cmd = ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root", trident, "train"] + \
            common + flags + ["--lr", str(LR), "--load", start, "--finetune", "--save", stepped,
                              "--metrics-file", metrics, "--moe-per-layer-logging"]
        out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
        if out.returncode != 0:
            check(False, f"{tag} runs: {out.stdout[-1500:]} {out.stderr[-1500:]}")
            continue
        two = gradient_of_one_step(checkpoint_weights(start), checkpoint_weights(stepped))
        worst = max(float((two[k] - grads[k]).norm()) / max(float(grads[k].norm()), 1e-12)
                    for k in grads)
        check(worst <= 1e-5, f"{tag}: the step's gradients equal one process's within 1e-5 "
                             f"(worst {worst:.2e})")
        row = [r for r in map(json.loads, open(metrics)) if r.get("iteration") == 1][-1]
        check_expert_loads(tag, row.get("moe_layers", []), loads)


def loss_falls(trident, tmp):
    metrics = os.path.join(tmp, "falls.jsonl")
    run(trident, MODEL + ["--mock-data", "--micro-batch-size", "4", "--global-batch-size", "8",
                          "--train-iters", "40", "--lr", "3e-3", "--lr-warmup-iters", "4",
                          "--eval-iters", "0", "--log-interval", "1", "--peak-tflops", "1",
                          "--recompute-granularity", "full", "--recompute-method", "uniform",
                          "--recompute-num-layers", "2", "--metrics-file", metrics])
    losses = metrics_by_iteration(metrics)
    first = np.mean([losses[i][0] for i in range(1, 4)])
    last = np.mean([losses[i][0] for i in range(38, 41)])
    check(last < first - 0.5, f"one-process MoE training (full recomputation) lowers the loss: "
                              f"{first:.3f} -> {last:.3f}")


def main():
    trident = os.path.abspath(sys.argv[1])
    rng = np.random.default_rng(3)
    documents = [rng.integers(0, VOCAB - 1, rng.integers(5, 40)).tolist() for _ in range(40)]
    with tempfile.TemporaryDirectory() as tmp:
        write_dataset(os.path.join(tmp, "docs"), [[d] for d in documents], 8)
        one_process = [compare_gradients(trident, tmp, documents, pre) for pre in (False, True)]
        # Token dropping: Megatron's capacity over each micro-batch's tokens, both policies,
        # with and without padding (the pad rows are zeros of weight 0: the same model).
        compare_gradients(trident, tmp, documents, False, (1.0, "probs"), pad=True)
        compare_gradients(trident, tmp, documents, True, (0.5, "position"))
        # Shared experts beside the routed ones, gated (Qwen2-MoE's) and not.
        compare_gradients(trident, tmp, documents, False, shared=(24, True))
        compare_gradients(trident, tmp, documents, True, shared=(16, False))
        layout_parity(trident, tmp, *one_process[1])
        loss_falls(trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
