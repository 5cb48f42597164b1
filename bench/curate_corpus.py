#!/usr/bin/python3
"""Builds the curation benchmark's corpus: >= 100 MB of real Debian text as JSONL, one file
per source (so ranks share the input). Reads packages unpacked under ROOT (see curate.sh).

Usage: curate_corpus.py ROOT OUT_DIR
"""
import glob
import gzip
import json
import os
import re
import subprocess
import sys

root, out_dir = sys.argv[1], sys.argv[2]
os.makedirs(out_dir, exist_ok=True)


def write(name, docs):
    path = os.path.join(out_dir, name + ".jsonl")
    n = size = 0
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            line = json.dumps({"id": f"{name}/{i}", "text": d, "source": name}, ensure_ascii=False)
            f.write(line + "\n")
            n += 1
            size += len(line) + 1
    os.replace(path + ".tmp", path)
    print(f"  {name}: {n} documents, {size / 1e6:.1f} MB")


def read(path):
    data = gzip.open(path).read() if path.endswith((".gz", ".dz")) else open(path, "rb").read()
    return data.decode("utf-8", errors="replace")


def grouped(items, k):
    for i in range(0, len(items), k):
        yield "\n".join(items[i:i + k])


def linux_doc():
    for p in sorted(glob.glob(f"{root}/usr/share/doc/linux-doc-6.1/Documentation/**/*.gz", recursive=True)):
        yield read(p)


def python_doc():
    for p in sorted(glob.glob(f"{root}/usr/share/doc/python3.11/html/_sources/**/*.rst.txt", recursive=True)):
        yield read(p)


def perl_doc():
    for p in sorted(glob.glob(f"{root}/usr/share/perl/5.36.0/pod/*.pod")):
        yield read(p)


def gcide():
    # Dictionary entries are short: 20 consecutive headwords' entries make one document.
    text = read(f"{root}/usr/share/dictd/gcide.dict.dz")
    entries = [e for e in re.split(r"\n\n(?=\S)", text) if e.strip()]  # an entry starts at column 0
    return grouped(entries, 20)


def wordnet():
    glosses = []
    for pos in ["noun", "verb", "adj", "adv"]:
        for line in open(f"{root}/usr/share/wordnet/data.{pos}", encoding="utf-8", errors="replace"):
            if "| " in line and not line.startswith("  "):
                glosses.append(line.split("| ", 1)[1].strip())
    return grouped(glosses, 50)


def kjv():
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True).stdout
    chapters = {}
    for line in out.splitlines():
        m = re.match(r"^(\d?[A-Za-z]+\d+):\d+ (.*)$", line)
        if m:
            chapters.setdefault(m.group(1), []).append(m.group(2))
    return ["\n".join(v) for v in chapters.values()]


def fortunes():
    for p in sorted(glob.glob("/usr/share/games/fortunes/**/*", recursive=True)):
        if os.path.isfile(p) and not os.path.islink(p) and not p.endswith((".dat", ".u8")):
            for c in re.split(r"^%\s*$", read(p), flags=re.M):
                if c.strip():
                    yield c


for name, gen in [("linux_doc", linux_doc), ("python_doc", python_doc), ("perl_doc", perl_doc),
                  ("gcide", gcide), ("wordnet", wordnet), ("kjv", kjv), ("fortunes", fortunes)]:
    write(name, gen())
