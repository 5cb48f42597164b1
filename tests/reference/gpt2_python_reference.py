#!/usr/bin/python3
"""GPT-2's encoder semantics in Python with the `regex` module (Unicode White_Space for
\\s), written here from the published algorithm: the reference for trident's default mode.
Usage: gpt2_python_reference.py ENCODER_JSON VOCAB_BPE IN.jsonl KEY  -> one JSON list per line
"""
import json
import sys

import regex

PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_map():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def main():
    encoder = json.load(open(sys.argv[1], encoding="utf-8"))
    lines = open(sys.argv[2], encoding="utf-8").read().split("\n")[1:-1]
    ranks = {tuple(line.split()): i for i, line in enumerate(lines)}
    to_char = byte_map()
    cache = {}

    def bpe(word):
        if word in cache:
            return cache[word]
        parts = list(word)
        while len(parts) > 1:
            pairs = {(parts[i], parts[i + 1]) for i in range(len(parts) - 1)}
            best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
            if best not in ranks:
                break
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == best[0] and parts[i + 1] == best[1]:
                    merged.append(best[0] + best[1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        cache[word] = [encoder[p] for p in parts]
        return cache[word]

    out = sys.stdout
    for line in open(sys.argv[3], encoding="utf-8"):
        text = json.loads(line)[sys.argv[4]]
        ids = []
        for piece in PATTERN.findall(text):
            ids.extend(bpe("".join(to_char[b] for b in piece.encode("utf-8"))))
        out.write("[" + ",".join(map(str, ids)) + "]\n")


if __name__ == "__main__":
    main()
