#!/usr/bin/python3
"""The fine-tuning walk-through's data (scripts/sft_demo.sh), written from this machine's
Python standard library (Debian's python3), nothing downloaded:
- OUT/docs.txt and OUT/docs.jsonl: every docstring of the modules below, their functions and
  classes and the classes' methods: the base model's pretraining text (and its tokenizer's);
- OUT/chats.jsonl: one conversation per documented function or class, a question and its
  docstring's first paragraph as the answer, {"messages": [...]}: training conversations
  first, then the held-out ones (1 in 12, by a hash of the name, so every module has some);
- OUT/heldout_prompts.jsonl: 4 held-out questions (their system prompt and question), for `generate --prompt-file`.
Prints `split=TRAIN,HELDOUT,0`: train's --split, which makes the held-out conversations the
validation set exactly (Megatron's split is by document order).
Usage: sft_demo_data.py OUT"""
import importlib
import inspect
import json
import os
import re
import sys
import warnings
import zlib

MODULES = ["os", "os.path", "shutil", "json", "re", "math", "cmath", "string", "textwrap",
           "itertools", "functools", "operator", "collections", "random", "statistics", "heapq",
           "bisect", "datetime", "time", "calendar", "pathlib", "glob", "fnmatch", "tempfile",
           "io", "csv", "base64", "binascii", "hashlib", "hmac", "zlib", "gzip", "tarfile",
           "zipfile", "struct", "copy", "pprint", "difflib", "unicodedata", "locale", "argparse",
           "logging", "threading", "queue", "subprocess", "socket", "select", "signal",
           "urllib.parse", "html", "email.utils", "uuid", "secrets", "fractions", "decimal",
           "array", "weakref", "types", "inspect", "ast", "keyword", "platform", "sys",
           "sysconfig", "codecs", "contextlib", "abc", "enum", "dataclasses", "typing", "shlex",
           "filecmp", "stat", "traceback", "warnings", "sched", "mimetypes", "colorsys",
           "configparser", "graphlib", "zoneinfo"]
SYSTEM = "You answer questions about the Python standard library in one or two sentences."
HELDOUT_EVERY = 12


def public(obj):
    return [(a, getattr(obj, a, None)) for a in sorted(dir(obj)) if not a.startswith("_")]


def documented(module):
    """(qualified name, object) of the module's documented functions and classes."""
    for attr, obj in public(module):
        if (inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.isclass(obj)) and \
                inspect.getdoc(obj):
            yield f"{module.__name__}.{attr}", obj


def first_paragraph(doc):
    """The docstring's summary: its first paragraph, less a leading signature line."""
    lines = [l.strip() for l in inspect.cleandoc(doc).split("\n\n")[0].splitlines() if l.strip()]
    if lines and re.match(r"^[\w.]+\(.*\)( -> .*)?$", lines[0]):
        lines = lines[1:]
    return " ".join(lines)


def pretraining_text(modules):
    """Each module's docstring and its members' (methods included), each once."""
    seen, texts = set(), []

    def add(name, obj):
        doc = inspect.getdoc(obj)
        if doc and doc not in seen:
            seen.add(doc)
            texts.append(f"{name}\n{doc}")

    for module in modules:
        add(module.__name__, module)
        for name, obj in documented(module):
            add(name, obj)
            if inspect.isclass(obj):
                for attr, member in public(obj):
                    if callable(member):
                        add(f"{name}.{attr}", member)
    return texts


def conversations(modules):
    """(name, messages) per documented function or class whose summary is an answer."""
    answers = {}
    for module in modules:
        for name, obj in documented(module):
            answer = first_paragraph(inspect.getdoc(obj))
            kind = "class" if inspect.isclass(obj) else "function"
            if 20 <= len(answer) <= 300 and answer not in answers.values():
                answers[(name, kind)] = answer
    for (name, kind), answer in answers.items():
        yield name, [{"role": "system", "content": SYSTEM},
                     {"role": "user", "content": f"What does the {kind} {name} do?"},
                     {"role": "assistant", "content": answer}]


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    warnings.simplefilter("ignore")  # typing.re and such are deprecated, not wanted here
    modules = [importlib.import_module(m) for m in MODULES]
    texts = pretraining_text(modules)
    with open(os.path.join(out, "docs.txt"), "w") as f:
        f.write("\n\n".join(texts) + "\n")
    write_jsonl(os.path.join(out, "docs.jsonl"), ({"text": t} for t in texts))
    train, heldout = [], []
    for name, messages in conversations(modules):
        held = zlib.crc32(name.encode()) % HELDOUT_EVERY == 0
        (heldout if held else train).append({"messages": messages})
    write_jsonl(os.path.join(out, "chats.jsonl"), train + heldout)
    write_jsonl(os.path.join(out, "heldout_prompts.jsonl"),
                ({"messages": c["messages"][:2]} for c in heldout[::len(heldout) // 4][:4]))
    print(f"split={len(train)},{len(heldout)},0")


if __name__ == "__main__":
    main()
