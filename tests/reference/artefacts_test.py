#!/usr/bin/python3
"""Self-contained artefacts and the command line around them:
  * a checkpoint carries its tokenizer (tokenizer/ inside iter_N, each file's size and
    checksum in the manifest): moved to another directory, with the original tokenizer files
    deleted, it generates the same text, from another working directory;
  * `convert --save-hf` and `train --save-hf` write the tokenizer files HF's GPT2Tokenizer
    reads: vocab.json and merges.txt byte for byte GPT-2's encoder.json and vocab.bpe;
  * `score --load CKPT` scores as `score --load-hf` of the converted model;
  * defaults relative to the installation: `tokenize` from another directory finds GPT-2's
    vocabulary, `--input -` reads standard input ("Hello world" is [15496, 995] in GPT-2;
    preprocess counts its 2 tokens);
  * did-you-mean for flags and commands (exit 2), `--version`, testing flags hidden from
    --help but accepted;
  * a one-rank run prints no collectives heading and writes no collectives entry.
Usage: artefacts_test.py TRIDENT SOURCE_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from parity import Checks

MODEL = ["--mock-data", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "2",
         "--seq-length", "16", "--micro-batch-size", "2", "--global-batch-size", "2",
         "--train-iters", "3", "--lr", "1e-3", "--log-interval", "1", "--eval-iters", "0",
         "--peak-tflops", "1", "--seed", "5", "--inject-grad-overflow-iteration", "1000"]
check = Checks()


def run(args, cwd=None, stdin=None):
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, input=stdin, timeout=300)


def why(ok, text):
    """What a failed step printed (nothing when it passed)."""
    return "" if ok else " " + text[-300:]


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def generate(trident, load, cwd, extra=()):
    out = run([trident, "generate", "--load", load, "--prompt", "And God said", "--greedy",
               "--tokens-to-generate", "12", "--json"] + list(extra), cwd=cwd)
    return out.returncode, out.stdout, out.stderr


def tokenizer_travels(trident, source, tmp):
    tok = os.path.join(tmp, "tok")
    os.makedirs(tok)
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copy(os.path.join(source, "data", "gpt2", name), tok)
    ckpt, hf_train = os.path.join(tmp, "ckpt"), os.path.join(tmp, "hf_train")
    metrics = os.path.join(tmp, "metrics.jsonl")
    out = run([trident, "train"] + MODEL + ["--vocab-file", f"{tok}/encoder.json", "--merge-file",
              f"{tok}/vocab.bpe", "--save", ckpt, "--save-hf", hf_train, "--metrics-file", metrics])
    check(out.returncode == 0, "train with a GPT-2 tokenizer saves" + why(out.returncode == 0, out.stderr))
    iteration = os.path.join(ckpt, "iter_0000003")
    manifest = json.load(open(os.path.join(iteration, "manifest.json")))
    entry = manifest.get("tokenizer", {})
    names = sorted(f["file"] for f in entry.get("files", []))
    check(entry.get("type") == "GPT2BPETokenizer" and names == ["merges.txt", "vocab.json"],
          f"the manifest lists the tokenizer: {entry.get('type')} {names}")
    sizes_ok = all(f["bytes"] == os.path.getsize(os.path.join(iteration, "tokenizer", f["file"]))
                   for f in entry.get("files", []))
    check(sizes_ok and same_bytes(os.path.join(iteration, "tokenizer", "vocab.json"), f"{tok}/encoder.json")
          and same_bytes(os.path.join(iteration, "tokenizer", "merges.txt"), f"{tok}/vocab.bpe"),
          "the checkpoint's tokenizer/ holds the files, sizes as listed")
    for name in ("vocab.json", "merges.txt"):
        check(same_bytes(os.path.join(hf_train, name),
                         f"{tok}/{'encoder.json' if name == 'vocab.json' else 'vocab.bpe'}"),
              f"train --save-hf writes {name} byte for byte")
    rows = [json.loads(line) for line in open(metrics)]
    check(not any("collectives" in r for r in rows) and "collectives of rank 0" not in out.stdout,
          "a one-rank run prints and writes no collectives")
    code, before, err = generate(trident, ckpt, tmp, ["--vocab-file", f"{tok}/encoder.json",
                                                       "--merge-file", f"{tok}/vocab.bpe"])
    check(code == 0 and before, "generate with the training tokenizer" + why(code == 0, err))
    shutil.rmtree(tok)
    moved = os.path.join(tmp, "elsewhere", "ckpt")
    shutil.move(ckpt, moved)
    other_cwd = os.path.join(tmp, "cwd")
    os.makedirs(other_cwd)
    code, after, err = generate(trident, moved, other_cwd)
    check(code == 0 and after == before,
          "moved, tokenizer files deleted, generates the same text" + why(code == 0, err))
    return moved, other_cwd


def convert_carries_tokenizer(trident, source, moved, cwd, tmp):
    hf = os.path.join(tmp, "hf")
    out = run([trident, "convert", "--load", moved, "--save-hf", hf], cwd=cwd)
    check(out.returncode == 0, "convert --save-hf" + why(out.returncode == 0, out.stderr))
    gpt2 = os.path.join(source, "data", "gpt2")
    check(same_bytes(f"{hf}/vocab.json", f"{gpt2}/encoder.json") and
          same_bytes(f"{hf}/merges.txt", f"{gpt2}/vocab.bpe"),
          "convert --save-hf: vocab.json and merges.txt equal GPT-2's encoder.json and vocab.bpe")
    config = json.load(open(f"{hf}/tokenizer_config.json"))
    special = json.load(open(f"{hf}/special_tokens_map.json"))
    eot = "<|endoftext|>"
    check(config.get("tokenizer_class") == "GPT2Tokenizer" and config.get("model_max_length") == 16
          and special == {"bos_token": eot, "eos_token": eot, "unk_token": eot},
          f"tokenizer_config.json and special_tokens_map.json as GPT-2's: {config} {special}")
    text = "In the beginning God created the heaven and the earth."
    scores = [run([trident, "score", flag, model, "--text", "-"], cwd=cwd, stdin=text)
              for flag, model in (("--load", moved), ("--load-hf", hf))]
    check(all(s.returncode == 0 for s in scores), "score --load and --load-hf with --text -"
          + "".join(why(s.returncode == 0, s.stderr) for s in scores))
    if all(s.returncode == 0 for s in scores):
        a, b = (json.loads(s.stdout.strip().splitlines()[-1]) for s in scores)
        check(a["tokens"] == b["tokens"] == 10 and abs(a["loss"] - b["loss"]) < 1e-5,
              f"score --load CKPT equals score --load-hf of its conversion: {a} {b}")


def command_line(trident, source, tmp):
    out = run([trident, "tokenize", "--input", "-"], cwd=tmp, stdin="Hello world")
    check(out.returncode == 0 and out.stdout.strip() == "[15496,995]",
          f"tokenize --input - from another directory: {out.stdout.strip()} {out.stderr[-200:]}")
    gpt2 = [os.path.join(source, "data", "gpt2", name) for name in ("encoder.json", "vocab.bpe")]
    out = run([trident, "preprocess", "--input", "-", "--output-prefix", "kjv", "--vocab-file",
               gpt2[0], "--merge-file", gpt2[1]], cwd=tmp, stdin='{"text": "Hello world"}\n')
    idx = os.path.join(tmp, "kjv_text_document.idx")
    check(out.returncode == 0 and os.path.exists(idx) and "2 tokens" in out.stdout,
          "preprocess --input - writes the dataset" + why(out.returncode == 0, out.stderr))
    out = run([trident, "train", "--mock-data", "--hiden-size", "8"])
    check(out.returncode == 2 and "unknown flag --hiden-size; did you mean --hidden-size?" in out.stderr,
          f"a mistyped flag: exit {out.returncode}, {out.stderr.strip()[:200]}")
    out = run([trident, "trian"])
    check(out.returncode == 2 and "unknown command 'trian'; did you mean 'train'?" in out.stderr,
          f"a mistyped command: exit {out.returncode}, {out.stderr.splitlines()[:1]}")
    out = run([trident, "--version"])
    check(out.returncode == 0 and out.stdout.startswith("trident 0.1.0"), f"--version: {out.stdout.strip()}")
    out = run([trident, "train", "--help"])
    check(out.returncode == 0 and "--inject-" not in out.stdout and "--hidden-size" in out.stdout,
          "train --help lists no --inject-* flag (the training run above accepted one)")


def main():
    trident, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        moved, cwd = tokenizer_travels(trident, source, tmp)
        convert_carries_tokenizer(trident, source, moved, cwd, tmp)
        command_line(trident, source, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
