"""Shared by the HuggingFaceTokenizer tests: the documents they encode (KJV chapters, Debian's
licence texts, fortunes in five languages, trident's C++ sources, hard strings) and HF's own
`tokenizers` library (npm, driven by hf_tokenizers_reference.js) as the reference."""
import glob
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))

HARD_STRINGS = [
    "", " ", "  ", "\n", "\n\n\n", "\t\t x", "a  b   c    d", "trailing spaces   ",
    "   leading spaces", "\r\n windows\r\nlines\r\n", "emoji 🙂🙃 👩‍👩‍👧‍👦 flags 🇫🇷🇩🇪 ✓",
    "CJK 日本語のテキストと中文文本，한국어 텍스트", "combining e\u0301 a\u0300 n\u0303 \u0915\u093f",
    "ﬁ ligature Ｆｕｌｌｗｉｄｔｈ ①②③ ½ ™ Å Ω", "İstanbul ΣΊΣΥΦΟΣ straße ǅ",
    "numbers 1234567890 3.14159 1,000,000 ٠١٢٣ ١٢٣", "don't I'll we've they're she'd It's DON'T",
    "special <|endoftext|> inside<|endoftext|>text <|im_start|>user\nhi<|im_end|>",
    "<|begin_of_text|>llama<|eot_id|> <|start_header_id|>x<|end_header_id|>",
    "<|endoftext|><|endoftext|>", "<|endoftext", "< |endoftext|>", "code:\tif (x) {\n    y++;\n}",
    "mixed\u00a0nbsp\u2009thin\u3000ideographic\u2028line\u2029para\u0085nel",
    "zero\u200bwidth\u200djoiner\ufeffbom", "\u0000nul and \u0001 control \u007f",
    "Ünïcödé ß straße café naïve", "$$$ ... !!! ??? ((())) --- ___ *** ###",
    "long " + "a" * 300 + " " * 200 + "b" * 50, "  \n  \n\t\n ",
    "العربية نص عربي", "עברית", "Ελληνικά κείμενο", "русский текст Ёё", "ไทย ภาษา",
]


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, IsADirectoryError, PermissionError):
        return None


def fortunes(per_file=40, total=2000):
    docs = []
    files = [p for p in sorted(glob.glob("/usr/share/games/fortunes*/**", recursive=True))
             if os.path.isfile(p) and not os.path.islink(p) and not p.endswith(".dat")]
    for path in files:
        text = read_text(path)
        if text:
            docs += [d for d in text.split("\n%\n") if d.strip()][:per_file]
    return docs[:total]


def corpus(src):
    """Thousands of documents: every KJV chapter, every licence, fortunes, C++ sources."""
    docs = [json.loads(line)["text"] for line in open(f"{src}/data/kjv/kjv.jsonl",
                                                        encoding="utf-8")]
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        text = read_text(path)
        if text:
            docs.append(text)
    docs += fortunes()
    for path in sorted(glob.glob(f"{src}/src/**/*.cpp", recursive=True))[:400]:
        docs.append(read_text(path) or "")
    return docs + HARD_STRINGS


def small_corpus(src):
    """A few hundred documents of every kind, for the synthetic tokenizers."""
    kjv = [json.loads(line)["text"] for line in open(f"{src}/data/kjv/kjv.jsonl",
                                                       encoding="utf-8")][:40]
    code = [read_text(p) or "" for p in sorted(glob.glob(f"{src}/src/tokenizer/*.cpp"))[:5]]
    return kjv + fortunes(per_file=3, total=200) + code + HARD_STRINGS


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")


def hf(src, mode, tokenizer_json, input_path):
    """HF tokenizers' encode (ids per document) or decode (text per id list)."""
    out = subprocess.run(["node", f"{HERE}/hf_tokenizers_reference.js",
                          f"{src}/third_party/npm/node_modules", mode, tokenizer_json, input_path],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("HF tokenizers failed: " + out.stderr[-2000:])
    return [json.loads(line) for line in out.stdout.split("\n") if line]


def trident_encode(trident, model, input_path):
    """trident tokenize --jsonl: (ids per document or None, the process)."""
    out = subprocess.run([trident, "tokenize", "--tokenizer-type", "HuggingFaceTokenizer",
                          "--tokenizer-model", model, "--jsonl", "--input", input_path],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return None, out
    return [json.loads(line) for line in out.stdout.split("\n") if line], out


def trident_decode(trident, model, ids_path):
    out = subprocess.run([trident, "tokenize", "--tokenizer-type", "HuggingFaceTokenizer",
                          "--tokenizer-model", model, "--decode", "--json-output", "--input",
                          ids_path], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return None, out
    return [json.loads(line) for line in out.stdout.split("\n") if line], out


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
