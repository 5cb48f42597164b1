#!/usr/bin/python3
"""trident's GPT-2 tokenizer id-for-id against two independent implementations:
  * the npm package gpt-3-encoder (JavaScript \\s), compared with --js-whitespace;
  * GPT-2's encoder semantics in Python with `regex` (Unicode White_Space), the default;
on the KJV corpus (4.4 MB, built by setup) and hand-picked hard strings; then every
document decodes back to its text.
Usage: tokenizer_parity_test.py TRIDENT SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {out.stderr}")
    return [line for line in out.stdout.split("\n") if line]


def main():
    trident, src = sys.argv[1], sys.argv[2]
    vocab, merges = f"{src}/data/gpt2/encoder.json", f"{src}/data/gpt2/vocab.bpe"
    modules = f"{src}/third_party/npm/node_modules"
    corpora = [f"{src}/data/kjv/kjv.jsonl", f"{src}/tests/fixtures/hard_strings.jsonl"]
    for path in [vocab, merges, modules] + corpora:
        if not os.path.exists(path):
            print(f"missing {path}: run scripts/setup.sh first")
            print("0 passed, 1 failed")
            return 1
    tok = [trident, "tokenize", "--vocab-file", vocab, "--merge-file", merges, "--jsonl"]
    passed = failed = 0
    for corpus in corpora:
        texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
        checks = {
            "npm gpt-3-encoder vs --js-whitespace":
                (run(["node", f"{src}/tests/reference/gpt2_reference.js", modules, "encode-jsonl", corpus, "text"]),
                 run(tok + ["--input", corpus, "--js-whitespace"])),
            "python regex GPT-2 vs default":
                (run(["/usr/bin/python3", f"{src}/tests/reference/gpt2_python_reference.py", vocab, merges, corpus, "text"]),
                 run(tok + ["--input", corpus])),
        }
        name = os.path.basename(corpus)
        for what, (ref, ours) in checks.items():
            bad = [i for i, (a, b) in enumerate(zip(ref, ours)) if json.loads(a) != json.loads(b)]
            if len(ref) != len(ours) or bad:
                failed += 1
                first = bad[0] if bad else None
                print(f"FAIL {name}: {what}: {len(bad)} documents differ (first: {first})")
                if first is not None:
                    print("  text:", repr(texts[first][:200]))
                    print("  ref: ", ref[first][:200])
                    print("  ours:", ours[first][:200])
            else:
                passed += 1
                tokens = sum(len(json.loads(line)) for line in ours)
                print(f"ok   {name}: {what}: {len(ours)} documents, {tokens} tokens identical")
        ids = run(tok + ["--input", corpus])
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("\n".join(ids) + "\n")
        decoded = [json.loads(line) for line in run(
            [trident, "tokenize", "--vocab-file", vocab, "--merge-file", merges, "--decode",
             "--input", f.name, "--json-output"])]
        os.unlink(f.name)
        mismatch = [i for i, (a, b) in enumerate(zip(texts, decoded)) if a != b]
        if mismatch or len(decoded) != len(texts):
            failed += 1
            print(f"FAIL {name}: round trip differs for {len(mismatch)} documents")
        else:
            passed += 1
            print(f"ok   {name}: decode(encode(text)) == text for all {len(texts)} documents")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
