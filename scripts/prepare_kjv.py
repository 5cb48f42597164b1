#!/usr/bin/python3
"""Writes the King James Bible (Debian's bible-kjv) as JSONL, one chapter per document.

Usage: prepare_kjv.py OUT.jsonl   (reads `bible -f gen1:1-rev22:21`)
"""
import json
import re
import subprocess
import sys

VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def main():
    out_path = sys.argv[1]
    text = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True,
                          check=True).stdout
    chapters, order = {}, []
    for line in text.splitlines():
        m = VERSE.match(line)
        if not m:
            continue
        key = (m.group(1), int(m.group(2)))
        if key not in chapters:
            chapters[key] = []
            order.append(key)
        chapters[key].append(m.group(4).strip())
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for book, chapter in order:
            f.write(json.dumps({"text": "\n".join(chapters[(book, chapter)]) + "\n",
                                "book": book, "chapter": chapter}) + "\n")
    import os
    os.replace(tmp, out_path)
    print(f"prepare_kjv: {len(order)} chapters -> {out_path}")


if __name__ == "__main__":
    main()
