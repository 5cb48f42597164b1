#!/usr/bin/python3
"""Writes the text of KJV chapters FIRST..LAST (1-based, as prepare_kjv.py numbers them:
Genesis 1 is 1, Revelation 22 is 1189) joined by newlines: the demo's tokenizer trains on
the training chapters, and `trident eval --tasks text:FILE` scores the held-out ones.

Usage: kjv_chapters.py KJV.jsonl FIRST LAST OUT.txt
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 5:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    source, first, last, out_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    with open(source, encoding="utf-8") as f:
        chapters = [json.loads(line)["text"] for line in f]
    if not 1 <= first <= last <= len(chapters):
        print(f"kjv_chapters.py: chapters {first}..{last} are not within 1..{len(chapters)}",
              file=sys.stderr)
        return 2
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(chapters[first - 1:last]))
    os.replace(tmp, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
