#!/usr/bin/python3
"""trident eval throughput on hellaswag-shaped requests (4 choices, ~100-token contexts,
~20-token endings) on gpt2-small's shape with random weights, fp32 and bf16, shared-context
and separate scoring, next to PyTorch scoring the same token requests in the same run
(batched, right-padded, full logits as lm-evaluation-harness's HFLM does; OpenBLAS).
Prints one JSON line per configuration: requests/s and tokens/s (request tokens: the
truncated inputs, counted as if every request ran alone).
Usage: bench/eval_throughput.py build/trident [DOCS]   (run from the repository root)
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from torch_reference_test import hf_shapes, write_safetensors  # noqa: E402

CONFIG = dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024,
              layer_norm_epsilon=1e-5, activation_function="gelu_new", model_type="gpt2")
WORDS = ("the a man woman dog house river light stone water bread voice king field city road "
         "then he she they walks runs takes puts opens looks into over under with from").split()


def write_model(path):
    rng = np.random.default_rng(0)
    weights = {}
    for name, shape in hf_shapes(CONFIG).items():
        base = 1.0 if name.endswith("weight") and len(shape) == 1 else 0.0
        weights[name] = (base + 0.02 * rng.standard_normal(shape)).astype(np.float32)
    os.makedirs(path)
    json.dump(CONFIG, open(os.path.join(path, "config.json"), "w"))
    write_safetensors(os.path.join(path, "model.safetensors"), weights)
    return weights


def hellaswag_docs(n):
    r = random.Random(0)
    words = lambda k: " ".join(r.choice(WORDS) for _ in range(k))
    return [{"activity_label": "Doing things", "ctx_a": words(80) + ".", "ctx_b": words(8),
             "endings": [words(16) + "." for _ in range(4)], "label": str(i % 4)}
            for i in range(n)]


def torch_score(w, requests, batch, dtype):
    """HFLM-style: each (context, continuation) right-padded in batches, logits of every
    position, log_softmax, the continuation's tokens gathered."""
    h, nh = CONFIG["n_embd"], CONFIG["n_head"]
    w = {k: v.to(dtype) for k, v in w.items()}
    out = []
    with torch.inference_mode():
        for b in range(0, len(requests), batch):
            chunk = requests[b:b + batch]
            inputs = [(c + x)[-1025:][:-1] for c, x in chunk]
            L = max(len(i) for i in inputs)
            ids = torch.tensor([i + [0] * (L - len(i)) for i in inputs])
            x = w["wte.weight"][ids] + w["wpe.weight"][:L]
            for layer in range(CONFIG["n_layer"]):
                p = lambda k: w[f"h.{layer}.{k}"]
                a = F.layer_norm(x, (h,), p("ln_1.weight"), p("ln_1.bias"), 1e-5)
                q, k, v = (t.view(len(chunk), L, nh, h // nh).transpose(1, 2)
                           for t in (a @ p("attn.c_attn.weight") + p("attn.c_attn.bias")).split(h, -1))
                att = (q @ k.transpose(-1, -2)) / (h // nh) ** 0.5
                att = att.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
                y = att.softmax(-1) @ v
                x = x + y.transpose(1, 2).reshape(len(chunk), L, h) @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
                m = F.layer_norm(x, (h,), p("ln_2.weight"), p("ln_2.bias"), 1e-5)
                x = x + F.gelu(m @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate="tanh") @ \
                    p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
            x = F.layer_norm(x, (h,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
            logp = (x @ w["wte.weight"].T).float().log_softmax(-1)
            for j, (c, cont) in enumerate(chunk):
                n = len(inputs[j])
                rows = logp[j, n - len(cont):n]
                out.append(float(rows.gather(1, torch.tensor(cont)[:, None]).sum()))
    return out


def main():
    trident = sys.argv[1]
    docs = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gpt2")
        w = {k: torch.tensor(v) for k, v in write_model(model).items()}
        os.makedirs(os.path.join(tmp, "tasks", "hellaswag"))
        with open(os.path.join(tmp, "tasks", "hellaswag", "validation.jsonl"), "w") as f:
            f.writelines(json.dumps(d) + "\n" for d in hellaswag_docs(docs))
        log = os.path.join(tmp, "log.jsonl")
        results = {}
        for name, extra in (("trident fp32 shared", []), ("trident fp32 separate", ["--no-shared-context"]),
                            ("trident bf16 shared", ["--bf16"]), ("trident bf16 separate", ["--bf16", "--no-shared-context"])):
            r = subprocess.run([trident, "eval", "--load-hf", model, "--task-dir", os.path.join(tmp, "tasks"),
                                "--tasks", "hellaswag", "--timing", "--batch-size", "16",
                                "--log-samples", log if name == "trident fp32 shared" else os.devnull] + extra, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(r.stderr)
            t = json.loads(r.stderr.split("timing: ")[1].splitlines()[0])
            results[name] = t
            print(json.dumps({"config": name, "requests": t["requests"], "seconds": round(t["seconds"], 3),
                              "requests_per_s": round(t["requests_per_s"], 2),
                              "tokens_per_s": round(t["tokens_per_s"], 1),
                              "fed_tokens": t["fed_tokens"], "request_tokens": t["request_tokens"]}))
        samples = [json.loads(line) for line in open(log)]
        requests = [(s["context_tokens"], s["continuation_tokens"]) for s in samples]
        tokens = sum(len((c + x)[-1025:]) - 1 for c, x in requests)
        for dtype, label in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            start = time.perf_counter()
            lls = torch_score(w, requests, 16, dtype)
            sec = time.perf_counter() - start
            err = max(abs(a - s["logprob"]) / max(1, abs(a)) for a, s in zip(lls, samples))
            print(json.dumps({"config": f"pytorch {label} (HFLM-style batches of 16)", "requests": len(requests),
                              "seconds": round(sec, 3), "requests_per_s": round(len(requests) / sec, 2),
                              "tokens_per_s": round(tokens / sec, 1), "max_rel_diff_vs_trident_fp32": err}))
            results[f"pytorch {label}"] = {"seconds": sec}
        # trident's training forward pass (GPTModel::forward, as `trident score` runs it) over
        # the same request sequences, one at a time; a one-sequence run is subtracted so
        # process start and weight loading do not count.
        seqs = [(c + x)[-1025:] for c, x in requests]
        def score_seconds(sequences):
            path = os.path.join(tmp, "score.json")
            json.dump(sequences, open(path, "w"))
            start = time.perf_counter()
            subprocess.run([trident, "score", "--model", model, "--tokens", path], check=True,
                           capture_output=True)
            return time.perf_counter() - start
        sec = score_seconds(seqs) - score_seconds(seqs[:1])
        print(json.dumps({"config": "trident fp32 training forward (trident score, one sequence "
                                    "at a time)", "requests": len(seqs), "seconds": round(sec, 3),
                          "requests_per_s": round(len(seqs) / sec, 2),
                          "tokens_per_s": round(tokens / sec, 1)}))
        for p in ("fp32", "bf16"):
            s = results[f"trident {p} shared"]["seconds"]
            print(json.dumps({"precision": p,
                              "trident_vs_pytorch": round(results[f"pytorch {p}"]["seconds"] / s, 2),
                              "shared_vs_separate": round(results[f"trident {p} separate"]["seconds"] / s, 2)}))


if __name__ == "__main__":
    main()
