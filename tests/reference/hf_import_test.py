#!/usr/bin/python3
"""HuggingFace GPT-2 import (score, train --load-hf, convert --load-hf) refuses, with exit
code 2 and one line per rule naming the file, every model trident would compute
differently: an untied lm_head.weight or tie_word_embeddings false, attention scaled by
1/(layer index + 1) or not by 1/sqrt(head_dim), another activation, cross-attention, another
model type or architecture. It accepts a tied lm_head.weight (a copy of wte.weight), the
"transformer." prefix, and reorder_and_upcast_attn (a precision option: same function),
scoring them exactly as the plain export.
Usage: hf_import_test.py TRIDENT"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from parity import Checks, read_safetensors, write_safetensors

TRAIN = ["train", "--mock-data", "--num-layers", "2", "--hidden-size", "32",
         "--num-attention-heads", "2", "--seq-length", "16", "--vocab-size", "64",
         "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "1",
         "--lr-warmup-iters", "0", "--peak-tflops", "1", "--threads", "1"]

TIE_RULE = "trident ties the output layer to the word embedding"
UNTIED_RULE = TIE_RULE + "; this model has an untied lm_head.weight"

# name, config.json changes, the (key, rule) pairs the refusal must name
CONFIG_CASES = [
    ("untied config", {"tie_word_embeddings": False}, [("tie_word_embeddings", TIE_RULE)]),
    ("layer-index scaling", {"scale_attn_by_inverse_layer_idx": True},
     [("scale_attn_by_inverse_layer_idx", "1/(layer index + 1)")]),
    ("unscaled attention", {"scale_attn_weights": False},
     [("scale_attn_weights", "1/sqrt(head_dim)")]),
    ("erf GeLU", {"activation_function": "gelu"}, [("activation_function", "tanh GeLU")]),
    ("cross-attention", {"add_cross_attention": True},
     [("add_cross_attention", "no cross-attention")]),
    ("model type", {"model_type": "gpt_neo"}, [("model_type", "gpt2")]),
    ("architecture", {"architectures": ["GPT2DoubleHeadsModel"]},
     [("architectures", "GPT2LMHeadModel or GPT2Model")]),
]


def run(trident, args):
    out = subprocess.run([trident] + args, capture_output=True, text=True, timeout=300)
    return out.returncode, out.stdout + out.stderr


def variant(base, tmp, name, config=None, tensors=None):
    """A copy of the export `base` with config.json keys changed and/or tensors rewritten."""
    model = os.path.join(tmp, name.replace(" ", "_"))
    shutil.copytree(base, model)
    if config:
        path = os.path.join(model, "config.json")
        cfg = json.load(open(path))
        cfg.update(config)
        json.dump(cfg, open(path, "w"))
    if tensors:
        path = os.path.join(model, "model.safetensors")
        write_safetensors(path, tensors(read_safetensors(path)))
    return model


def with_lm_head(head):
    """HF GPT2LMHeadModel's naming: transformer.* and a top-level lm_head.weight."""
    def edit(w):
        out = {"transformer." + k: v for k, v in w.items()}
        out["lm_head.weight"] = head(w["wte.weight"])
        return out
    return edit


def main():
    trident = sys.argv[1]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        code, out = run(trident, TRAIN + ["--seed", "3", "--save-hf", base])
        check(code == 0, "a trident export to start from" + ("" if code == 0 else "\n" + out))
        tokens = os.path.join(tmp, "tokens.json")
        json.dump([[1, 5, 9, 2, 33, 7, 63, 0, 12], [4, 4, 8]], open(tokens, "w"))

        def score(model):
            code, out = run(trident, ["score", "--model", model, "--tokens", tokens])
            return code, (json.loads(out) if code == 0 else out)

        code, reference = score(base)
        check(code == 0 and reference["tokens"] == 10, f"the plain export scores: {reference}")

        def refused(what, model, file, rules, commands=("score",)):
            for command in commands:
                args = {"score": ["score", "--model", model, "--tokens", tokens],
                        "train": TRAIN + ["--load-hf", model],
                        "convert": ["convert", "--load-hf", model, "--save",
                                    os.path.join(tmp, "ckpt_" + os.path.basename(model))]}[command]
                code, out = run(trident, args)
                path = os.path.join(model, file)
                missing = [f"{key} / {rule}" for key, rule in rules
                           if not any(key in line and rule in line and path in line
                                      for line in out.splitlines())]
                check(code == 2 and not missing,
                      f"{command}: {what} refused, naming {file} and the rule"
                      + ("" if code == 2 and not missing else f" (exit {code}, missing {missing})\n{out[-1500:]}"))

        for name, config, rules in CONFIG_CASES:
            refused(name, variant(base, tmp, name, config=config), "config.json", rules)
        everything = {}
        for _, config, _ in CONFIG_CASES[:-2]:
            everything.update(config)
        refused("five violations at once, all reported",
                variant(base, tmp, "all", config=everything), "config.json",
                [r for _, _, rules in CONFIG_CASES[:-2] for r in rules],
                commands=("score", "train", "convert"))

        untied = variant(base, tmp, "untied", tensors=with_lm_head(lambda wte: wte * 1.5))
        refused("an untied lm_head.weight", untied, "model.safetensors",
                [("lm_head.weight", UNTIED_RULE)], commands=("score", "train", "convert"))
        def one_ulp_off(wte):
            head = wte.copy()
            head.flat[7] = np.nextafter(head.flat[7], np.float32(np.inf))
            return head
        one_bit = variant(base, tmp, "one_bit", tensors=with_lm_head(one_ulp_off))
        refused("an lm_head.weight one ulp away from wte.weight", one_bit, "model.safetensors",
                [("lm_head.weight", UNTIED_RULE)])

        accepted = [("a tied lm_head.weight (a copy of wte.weight)",
                     variant(base, tmp, "tied", tensors=with_lm_head(lambda wte: wte.copy()))),
                    ("tie_word_embeddings true, reorder_and_upcast_attn true",
                     variant(base, tmp, "upcast", config={"tie_word_embeddings": True,
                                                          "reorder_and_upcast_attn": True}))]
        for what, model in accepted:
            code, result = score(model)
            check(code == 0 and result == reference, f"{what}: accepted, same score ({result})")
        code, out = run(trident, TRAIN + ["--load-hf", accepted[0][1]])
        check(code == 0, "train --load-hf of the tied lm_head.weight" + ("" if code == 0 else "\n" + out))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
