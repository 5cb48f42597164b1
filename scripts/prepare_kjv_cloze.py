#!/usr/bin/python3
"""A LAMBADA-style cloze task from held-out KJV chapters: predict the last word of a verse.

The demo trains with --split 98,2,0 over data/kjv/kjv.jsonl's 1189 chapters, so the last 2%
(24 chapters) are never trained on; the items come from the last 20 of them. Each item is
one verse (10-40 words) with its final punctuation removed, so its last space-separated word
is the target, in lambada_openai's layout ({"text": ...}).
Usage: prepare_kjv_cloze.py data/kjv/kjv.jsonl data/tasks/kjv_cloze/test.jsonl
"""
import json
import os
import sys

HELD_OUT_CHAPTERS = 20
MAX_ITEMS = 300


def main():
    chapters = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
    items = []
    for ch in chapters[-HELD_OUT_CHAPTERS:]:
        for verse in ch["text"].strip().split("\n"):
            verse = verse.strip().rstrip(".,;:!?'\"")
            words = verse.split(" ")
            if 10 <= len(words) <= 40 and words[-1].isalpha() and len(words[-1]) >= 3:
                items.append({"text": verse})
    items = items[:MAX_ITEMS]
    os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(i) + "\n" for i in items)
    os.replace(tmp, sys.argv[2])
    print(f"prepare_kjv_cloze: {len(items)} items -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
