#!/usr/bin/python3
"""Packed documents (issue 34, item 1): with --reset-position-ids, --reset-attention-mask and
--eod-mask-loss a sample of several EOD-ended documents trains as its documents would one by
one. The reference is a float64 Llama (llama_family_reference.py, HF's definitions) run on
each document alone, positions from 0: iteration 1's loss (learning rate 0) equals the
token-weighted mean of the documents' losses, and its gradient norm autograd's of that mean,
at one process, t = 2, p = 2 and d = 2. Without --eod-mask-loss the prediction made at each
EOD (of the next document's first token, from the EOD's own document) counts too. Every
dataset document is the same packed row and the sequence length is its length, so each
sample is the row followed by its first token again. Missing EOD ids exit 2.
Usage: packed_test.py TRIDENT"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dataset_reference_test import write_dataset  # noqa: E402
from gpt2_torch import forward as gpt2_logits  # noqa: E402
from llama_family_reference import draw_weights, logits, write_model  # noqa: E402
from torch_reference_test import hf_shapes as gpt2_shapes  # noqa: E402
from parity import Checks, first_iteration, write_safetensors  # noqa: E402

CHECKS = Checks()
EOD = 0
LENGTHS = [13, 30, 9, 20]  # tokens before each document's EOD
PACKED = ["--reset-position-ids", "--reset-attention-mask"]


def documents(rng, vocab):
    return [[int(t) for t in rng.integers(1, vocab, n)] + [EOD] for n in LENGTHS]


def reference(weights, config, docs, eod_mask_loss, model=logits):
    """(loss, gradient norm) of the packed row + its first token, document by document."""
    w = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in weights.items()}
    total, count = 0.0, 0
    for d, doc in enumerate(docs):
        nxt = docs[(d + 1) % len(docs)][0]
        out = model(w, config, doc)
        targets = doc[1:] if eod_mask_loss else doc[1:] + [nxt]
        total = total + F.cross_entropy(out[:len(targets)], torch.tensor(targets), reduction="sum")
        count += len(targets)
    loss = total / count
    loss.backward()
    norm = torch.sqrt(sum((t.grad ** 2).sum() for t in w.values())).item()
    return loss.item(), norm, count


def train(trident, work, tag, model, prefix, length, extra, ranks=1):
    return first_iteration(trident, work, tag, model, prefix, length,
                           ["--eod-id", str(EOD)] + extra, ranks)


def check_close(what, got, want, tol):
    rel = abs(got - want) / abs(want) if got is not None else None
    CHECKS(got is not None and rel < tol, f"{what}: {got} against {want:.8f} (rel {rel})")


def check_score(trident, work, model, docs, row, want):
    """`score` takes the same flags: the packed row scores as its documents one by one."""
    def score(sequences, flags):
        with open(f"{work}/tokens.json", "w") as f:
            json.dump(sequences, f)
        out = subprocess.run([trident, "score", "--model", model, "--tokens", f"{work}/tokens.json",
                              "--eod-id", str(EOD)] + flags, capture_output=True, text=True)
        return json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-400:]}
    packed = score([row], PACKED + ["--eod-mask-loss"])
    alone = score(docs, [])
    ok = "loss" in packed and "loss" in alone
    rel = abs(packed["loss"] - alone["loss"]) / alone["loss"] if ok else None
    CHECKS(ok and rel < 1e-6 and packed["tokens"] == alone["tokens"] and
           abs(alone["loss"] - want) / want < 1e-5,
           f"score of the packed row with the flags ({packed}) equals the documents scored "
           f"one by one ({alone}; rel {rel}) and the float64 mean {want:.8f}")


def check_gpt2(trident, work, rng, docs, prefix, length):
    """Learned absolute positions (GPT-2) restart too, with and without sequence parallelism."""
    config = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=101, n_positions=128,
                  layer_norm_epsilon=1e-5, activation_function="gelu_new", model_type="gpt2")
    weights = {}
    for name, shape in gpt2_shapes(config).items():
        base = 1.0 if name.endswith("weight") and len(shape) == 1 else 0.0
        weights[name] = (base + 0.2 * rng.standard_normal(shape)).astype(np.float32)
    model = f"{work}/gpt2"
    os.makedirs(model)
    with open(f"{model}/config.json", "w") as f:
        json.dump(config, f)
    write_safetensors(f"{model}/model.safetensors", weights)
    loss, norm, count = reference(weights, config, docs, True, gpt2_logits)
    for tag, extra, ranks in (("GPT-2", [], 1),
                              ("GPT-2, t = 2 with sequence parallelism",
                               ["--tensor-model-parallel-size", "2", "--sequence-parallel"], 2)):
        got, out = train(trident, work, "gpt2" + str(ranks), model, prefix, length,
                         PACKED + ["--eod-mask-loss"] + extra, ranks)
        if got is None:
            CHECKS(False, f"{tag}: train ran\n{out.stderr[-800:]}")
            continue
        check_close(f"{tag}: learned positions restart per document; the loss is the documents' "
                    f"mean", got[0], loss, 1e-5)
        check_close(f"{tag}: its gradient norm is autograd's", got[1], norm, 1e-4)


def main():
    trident = sys.argv[1]
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(3401)
    config = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
                  num_hidden_layers=2, hidden_size=32, intermediate_size=48,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=101,
                  max_position_embeddings=128, rms_norm_eps=1e-5, rope_theta=500.0,
                  rope_scaling=None, tie_word_embeddings=False, attention_bias=False,
                  mlp_bias=False)
    with tempfile.TemporaryDirectory() as work:
        weights = draw_weights(config, rng)
        model = f"{work}/llama"
        write_model(model, config, weights)
        docs = documents(rng, config["vocab_size"])
        row = sum(docs, [])
        prefix = f"{work}/packed"
        write_dataset(prefix, [[row]] * 8, 8)
        loss, norm, count = reference(weights, config, docs, True)
        loss_masked = loss
        for tag, extra, ranks in (("one process", [], 1),
                                  ("t = 2", ["--tensor-model-parallel-size", "2",
                                             "--sequence-parallel"], 2),
                                  ("p = 2", ["--pipeline-model-parallel-size", "2"], 2),
                                  ("d = 2", [], 2)):
            got, out = train(trident, work, tag.replace(" ", ""), model, prefix, len(row),
                             PACKED + ["--eod-mask-loss"] + extra, ranks)
            if got is None:
                CHECKS(False, f"{tag}: train ran\n{out.stderr[-800:]}")
                continue
            check_close(f"{tag}: the packed row's loss is the mean over its {len(docs)} documents "
                        f"alone ({count} targets, EOD predictions not counted)", got[0], loss,
                        1e-5)
            check_close(f"{tag}: its gradient norm is autograd's", got[1], norm, 1e-4)
        loss, norm, count = reference(weights, config, docs, False)
        got, out = train(trident, work, "nomask", model, prefix, len(row), PACKED)
        check_close(f"without --eod-mask-loss all {count} targets count, each EOD predicting the "
                    "next document from its own", got[0] if got else None, loss, 1e-5)
        plain, out = train(trident, work, "plain", model, prefix, len(row), [])
        CHECKS(plain is not None and abs(plain[0] - loss) / loss > 1e-3,
               f"without the flags the documents see each other: {plain and plain[0]} differs "
               f"from {loss:.6f}")
        check_score(trident, work, model, docs, row, loss_masked)
        check_gpt2(trident, work, rng, docs, prefix, len(row))
        out = subprocess.run([trident, "train", "--mock-data", "--reset-attention-mask",
                              "--train-iters", "1"], capture_output=True, text=True)
        CHECKS(out.returncode == 2 and "need the end-of-document id" in out.stderr,
               "--reset-attention-mask without a tokenizer or --eod-id: exit 2 naming the rule")
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
