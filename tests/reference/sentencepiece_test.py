#!/usr/bin/python3
"""--tokenizer-type SentencePieceTokenizer against Debian's sentencepiece tools:
  1. models trained here by spm_train (unigram and BPE) on a slice of the KJV corpus;
     trident's ids equal spm_encode --output_format=id on held-out chapters and hard
     lines, and its decoded text equals spm_decode's;
  2. trident preprocess writes a Megatron dataset that this script's own numpy reader
     (the documented MMIDIDX layout) reads back as spm_encode's ids plus </s>: uint16
     (code 8) for a 2,000-piece model, int32 (code 4) for a 68,000-piece one whose ids
     are above 65,535;
  3. trident train runs on both datasets with its vocabulary taken from the model, saves
     an HF directory, and score / eval / generate read text through the same tokenizer
     (eval's ids and log-likelihood equal score's on spm_encode's ids; generated text
     equals spm_decode's); serve's completion equals generate's;
  4. bad tokenizer flags are refused with the flag named.
Usage: sentencepiece_test.py TRIDENT SOURCE_DIR
"""
import json
import os
import re
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_checks import TokenizerChecks, read_dataset, run, tokenizer_flags  # noqa: E402

check = TokenizerChecks()
CHAPTERS_TRAIN, CHAPTERS_HELD_OUT = 120, 30
HARD_LINES = ["", "   leading and  doubled   spaces ", "Tab\tseparated\twords",
              "Ünïcödé ß straße café", "日本語のテキスト", "emoji 🙂 and ✓ marks",
              "numbers 1234567890 and symbols #@$%^&*()", "ﬁ ligature and Ｆｕｌｌ width"]


def lines_of(cmd, **kw):
    out = run(cmd, **kw)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed: {out.stderr}")
    return out.stdout.split("\n")[:-1]


def spm_ids(model, path):
    return [[int(t) for t in line.split()]
            for line in lines_of(["spm_encode", f"--model={model}", "--output_format=id",
                                  f"--input={path}"])]


def spm_train(work, name, text, vocab, extra=()):
    lines_of(["spm_train", f"--input={text}", f"--model_prefix={work}/{name}",
              f"--vocab_size={vocab}", "--num_threads=2", "--minloglevel=2"] + list(extra))
    pieces = [line.split("\t")[0] for line in open(f"{work}/{name}.vocab", encoding="utf-8")]
    return f"{work}/{name}.model", pieces


def write_corpus(work, src):
    chapters = [json.loads(line)["text"] for line in open(f"{src}/data/kjv/kjv.jsonl",
                                                            encoding="utf-8")]
    train = chapters[:CHAPTERS_TRAIN]
    held = chapters[CHAPTERS_TRAIN:CHAPTERS_TRAIN + CHAPTERS_HELD_OUT]
    with open(f"{work}/train.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(train) + "\n")  # one verse a line, as spm_train reads sentences
    with open(f"{work}/held.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(held + HARD_LINES) + "\n")
    # One chapter a document, its verses joined by spaces: one line each for spm_encode.
    docs = [c.replace("\n", " ") for c in held]
    with open(f"{work}/docs.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    with open(f"{work}/docs.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(docs) + "\n")
    return docs


def sp_flags(model):
    return tokenizer_flags("SentencePieceTokenizer", model)


def check_encode_decode(trident, work, name, model):
    ref = spm_ids(model, f"{work}/held.txt")
    ours = [json.loads(line) for line in lines_of(
        [trident, "tokenize", "--lines", "--input", f"{work}/held.txt"] + sp_flags(model))]
    bad = [i for i, (a, b) in enumerate(zip(ref, ours)) if a != b]
    check(len(ref) == len(ours) and not bad,
          f"{name}: ids equal spm_encode's on {len(ref)} lines ({sum(map(len, ref))} tokens)",
          f"first differing line {bad[:1]}")
    with open(f"{work}/ids.txt", "w") as f:
        f.write("\n".join(" ".join(map(str, r)) for r in ref if r) + "\n")
    with open(f"{work}/ids.jsonl", "w") as f:
        f.write("\n".join(json.dumps(r) for r in ref if r) + "\n")
    ref_text = lines_of(["spm_decode", f"--model={model}", "--input_format=id",
                         f"--input={work}/ids.txt"])
    ours_text = [json.loads(line) for line in lines_of(
        [trident, "tokenize", "--decode", "--json-output", "--input", f"{work}/ids.jsonl"] +
        sp_flags(model))]
    check(ref_text == ours_text, f"{name}: decoded text equals spm_decode's")


def check_preprocess(trident, work, name, model, pieces, code):
    prefix = f"{work}/{name}"
    out = run([trident, "preprocess", "--input", f"{work}/docs.jsonl", "--output-prefix", prefix,
               "--append-eod", "--workers", "2"] + sp_flags(model))
    check(out.returncode == 0, f"{name}: preprocess runs", out.stderr)
    if out.returncode:
        return None
    eos = pieces.index("</s>")
    ref = [ids + [eos] for ids in spm_ids(model, f"{work}/docs.txt")]
    got_code, seqs, doc_idx = read_dataset(prefix + "_text_document")
    check(got_code == code, f"{name}: dtype code {got_code} (expected {code})")
    check(seqs == ref and doc_idx == list(range(len(ref) + 1)),
          f"{name}: numpy reads back spm_encode's ids + </s> ({eos}) for {len(ref)} documents")
    # --add-bos puts <s> first, as Megatron's and HF's Llama tokenizers do.
    out = run([trident, "preprocess", "--input", f"{work}/docs.jsonl", "--output-prefix",
               prefix + "_bos", "--append-eod", "--add-bos"] + sp_flags(model))
    bos = pieces.index("<s>")
    _, bos_seqs, _ = read_dataset(prefix + "_bos_text_document")
    check(out.returncode == 0 and bos_seqs == [[bos] + ids for ids in ref],
          f"{name}: --add-bos reads back <s> ({bos}) + spm_encode's ids + </s>", out.stderr)
    return prefix + "_text_document"


def check_train(trident, work, name, model, vocab, data, hf=None):
    cmd = [trident, "train", "--data-path", data, "--split", "1,0,0", "--num-layers", "1",
           "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "32",
           "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "3",
           "--lr", "1e-3", "--lr-warmup-iters", "0", "--log-interval", "1",
           "--peak-tflops", "1", "--threads", "2"] + sp_flags(model)
    out = run(cmd + (["--save-hf", hf] if hf else []))
    log = out.stdout + out.stderr
    losses = [float(x) for x in re.findall(r"lm loss: ([0-9.E+-]+)", log)]
    check(out.returncode == 0 and len(losses) == 3 and all(np.isfinite(losses)),
          f"{name}: train runs 3 iterations (losses {losses})", log[-2000:])
    check(f"vocab {vocab} padded to" in log, f"{name}: train takes vocab {vocab} from the model")
    # An untrained model predicts nearly uniformly over the padded vocabulary.
    padded = (vocab + 127) // 128 * 128
    check(bool(losses) and abs(losses[0] - np.log(padded)) < 0.5,
          f"{name}: first loss {losses[:1]} near ln({padded}) = {np.log(padded):.3f}")


def check_inference(trident, work, model, hf, eos):
    with open(f"{work}/score.txt", "w", encoding="utf-8") as f:
        f.write("And God said, Let there be light: and there was light.")
    ids = spm_ids(model, f"{work}/score.txt")[0]
    out = run([trident, "score", "--model", hf, "--text", f"{work}/score.txt"] + sp_flags(model))
    got = json.loads(out.stdout) if out.returncode == 0 else {}
    check(got.get("tokens") == len(ids) - 1,
          f"score --text predicts {len(ids) - 1} tokens (spm_encode's count - 1)", out.stderr)
    check_eval(trident, work, model, hf, ids, eos)
    prompt = "In the beginning God"
    out = run([trident, "generate", "--load-hf", hf, "--prompt", prompt, "--tokens-to-generate",
               "8", "--json", "--threads", "2"] + sp_flags(model))
    ok = out.returncode == 0
    check(ok, "generate runs", out.stderr)
    if not ok:
        return
    result = json.loads(out.stdout.splitlines()[0])
    with open(f"{work}/prompt.txt", "w", encoding="utf-8") as f:
        f.write(prompt + "\n")
    with open(f"{work}/gen_ids.txt", "w") as f:
        f.write(" ".join(map(str, spm_ids(model, f"{work}/prompt.txt")[0] + result["tokens"])))
    whole = lines_of(["spm_decode", f"--model={model}", "--input_format=id",
                      f"--input={work}/gen_ids.txt"])[0]
    check(prompt + result["text"] == whole,
          "generate: prompt + streamed text equals spm_decode of prompt and generated ids",
          f"{prompt + result['text']!r} vs {whole!r}")


def check_eval(trident, work, model, hf, ids, eos):
    """A text task is scored after </s> (the end-of-document token) on spm_encode's ids; its
    log-likelihood equals score's on the same ids."""
    with open(f"{work}/eos_ids.json", "w") as f:
        json.dump([eos] + ids, f)
    out = run([trident, "score", "--model", hf, "--tokens", f"{work}/eos_ids.json"])
    scored = json.loads(out.stdout) if out.returncode == 0 else {}
    out = run([trident, "eval", "--load-hf", hf, "--tasks", f"text:{work}/score.txt",
               "--threads", "2", "--log-samples", f"{work}/samples.jsonl"] + sp_flags(model))
    check(out.returncode == 0, "eval runs a text task", out.stderr[-1000:])
    if out.returncode or not scored:
        return
    sample = json.loads(open(f"{work}/samples.jsonl").readline())
    check(sample["context_tokens"] == [eos] and sample["continuation_tokens"] == ids,
          "eval: context </s>, continuation spm_encode's ids")
    nll = scored["loss"] * scored["tokens"]
    check(abs(-sample["logprob"] - nll) < 1e-3 * nll,
          f"eval: log-likelihood {sample['logprob']:.4f} equals score's {-nll:.4f}")


def check_serve(trident, work, model, hf):
    """serve's completion is generate's greedy text (itself checked against spm_decode)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from serve_client import Server
    prompt, tokens = "And God said", 6
    out = run([trident, "generate", "--load-hf", hf, "--prompt", prompt, "--greedy", "--json",
               "--tokens-to-generate", str(tokens), "--threads", "2"] + sp_flags(model))
    offline = json.loads(out.stdout.splitlines()[0])["text"] if out.returncode == 0 else None
    server = Server(trident, ["--load-hf", hf, "--threads", "2"] + sp_flags(model))
    try:
        status, body = server.request("POST", "/v1/completions", dict(
            prompt=prompt, max_tokens=tokens, temperature=0))
    finally:
        server.stop()
    text = body["choices"][0]["text"] if status == 200 else None
    check(offline is not None and text == offline,
          f"serve: /v1/completions text {text!r} equals generate --greedy's {offline!r}")


def check_refusals(trident, work, model):
    garbage = f"{work}/garbage.model"
    with open(garbage, "wb") as f:
        f.write(b"not a protobuf \xff\xfe" * 10)
    base = [trident, "preprocess", "--input", f"{work}/docs.jsonl", "--output-prefix",
            f"{work}/refused"]
    cases = [
        (base + ["--tokenizer-type", "SentencePieceTokenizer"], "--tokenizer-model"),
        (base + sp_flags(f"{work}/missing.model"), "--tokenizer-model " + f"{work}/missing.model"),
        (base + sp_flags(garbage), "not a SentencePiece model"),
        (base, "--vocab-file and --merge-file"),
        (base + ["--tokenizer-model", model], "--tokenizer-type SentencePieceTokenizer"),
        (base + ["--tokenizer-type", "Llama9Tokenizer"], "--tokenizer-type Llama9Tokenizer"),
        ([trident, "train", "--mock-data", "--train-iters", "1"] + sp_flags(f"{work}/missing.model"),
         "--tokenizer-model " + f"{work}/missing.model"),
        ([trident, "train", "--mock-data", "--train-iters", "1", "--vocab-size", "100"] +
         sp_flags(model), "--vocab-size 100 is smaller than the tokenizer's 2000 tokens"),
        ([trident, "tokenize", "--input", f"{work}/held.txt", "--tokenizer-type",
          "SentencePieceTokenizer", "--vocab-file", "v.json", "--merge-file", "m.bpe"],
         "--tokenizer-model"),
    ]
    for cmd, needle in cases:
        out = run(cmd)
        check(out.returncode == 2 and needle in out.stderr,
              f"{cmd[1]} refuses {' '.join(cmd[-2:])!r}: exit 2 naming {needle!r}",
              f"exit {out.returncode}: {out.stderr[-400:]}")
    check(not any(n.startswith("refused") for n in os.listdir(work)), "refusals write nothing")


def main():
    trident, src = sys.argv[1], sys.argv[2]
    if not os.path.exists(f"{src}/data/kjv/kjv.jsonl"):
        print("missing data/kjv/kjv.jsonl: run scripts/setup.sh first\n0 passed, 1 failed")
        return 1
    with tempfile.TemporaryDirectory() as work:
        write_corpus(work, src)
        unigram, pieces = spm_train(work, "unigram", f"{work}/train.txt", 2000)
        bpe, _ = spm_train(work, "bpe", f"{work}/train.txt", 2000,
                           ["--model_type=bpe", "--byte_fallback=true"])
        # 66,000 user-defined symbols come first, so every learned piece's id is > 65,535.
        with open(f"{work}/symbols.txt", "w") as f:
            f.write("".join(f"<w{i:05d}>\n" for i in range(66000)))
        big, big_pieces = spm_train(work, "big", f"{work}/train.txt", 68000,
                                    [f"--user_defined_symbols_file={work}/symbols.txt",
                                     "--hard_vocab_limit=false"])
        check(len(big_pieces) > 65535, f"the large model has {len(big_pieces)} pieces")
        for name, model in [("unigram", unigram), ("bpe", bpe), ("big", big)]:
            check_encode_decode(trident, work, name, model)
        small_data = check_preprocess(trident, work, "unigram", unigram, pieces, 8)
        big_data = check_preprocess(trident, work, "big", big, big_pieces, 4)
        if big_data:
            _, seqs, _ = read_dataset(big_data)
            check(max(max(s) for s in seqs) > 65535, "the int32 dataset holds ids above 65535")
        hf = f"{work}/hf"
        if small_data:
            check_train(trident, work, "unigram", unigram, len(pieces), small_data, hf)
            if os.path.exists(f"{hf}/config.json"):
                check_inference(trident, work, unigram, hf, pieces.index("</s>"))
                check_serve(trident, work, unigram, hf)
        if big_data:
            check_train(trident, work, "big (int32)", big, len(big_pieces), big_data)
        check_refusals(trident, work, unigram)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
