#!/usr/bin/python3
"""Megatron's indexed-dataset format and GPT sampling, checked from outside trident:
  1. .bin/.idx pairs written here (numpy + struct, from the documented layout) are read
     by trident exactly (uint16 and int32 tokens, multi-sequence documents);
  2. trident preprocess output is read back by this script's own reader, and holds the
     Python reference tokenizer's ids plus <|endoftext|>;
  3. the document/sample/shuffle indices trident caches (.npy) equal Megatron's algorithm
     computed here with numpy.random.RandomState, over several epochs.
Usage: dataset_reference_test.py TRIDENT SOURCE_DIR
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

DTYPES = {8: np.uint16, 4: np.int32}
failures, passes = [], 0


def check(ok, what):
    global passes
    if ok:
        passes += 1
        print("ok  ", what)
    else:
        failures.append(what)
        print("FAIL", what)


def write_dataset(prefix, documents, code):
    """documents: list of lists of sequences (each a list of ids)."""
    dtype = DTYPES[code]
    sizes, pointers, doc_idx, offset = [], [], [0], 0
    with open(prefix + ".bin", "wb") as f:
        for doc in documents:
            for seq in doc:
                arr = np.asarray(seq, dtype=dtype)
                f.write(arr.tobytes())
                sizes.append(len(seq))
                pointers.append(offset)
                offset += arr.nbytes
            doc_idx.append(len(sizes))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(sizes)) + struct.pack("<Q", len(doc_idx)))
        f.write(np.asarray(sizes, dtype=np.int32).tobytes())
        f.write(np.asarray(pointers, dtype=np.int64).tobytes())
        f.write(np.asarray(doc_idx, dtype=np.int64).tobytes())


def read_dataset(prefix):
    raw = open(prefix + ".idx", "rb").read()
    assert raw[:9] == b"MMIDIDX\x00\x00", "magic"
    (version,) = struct.unpack("<Q", raw[9:17])
    code = raw[17]
    n, d = struct.unpack("<QQ", raw[18:34])
    assert version == 1
    sizes = np.frombuffer(raw, np.int32, n, 34)
    pointers = np.frombuffer(raw, np.int64, n, 34 + 4 * n)
    doc_idx = np.frombuffer(raw, np.int64, d, 34 + 12 * n)
    data = np.fromfile(prefix + ".bin", dtype=DTYPES[code])
    item = np.dtype(DTYPES[code]).itemsize
    return code, doc_idx, [data[p // item:p // item + s].tolist() for p, s in zip(pointers, sizes)]


def megatron_indices(sizes, first, end, num_samples, seq, seed):
    tokens_per_epoch = int(sizes[first:end].sum())
    epochs, total = 1, tokens_per_epoch
    while total < num_samples * seq + 1:
        epochs += 1
        total += tokens_per_epoch
    separate = False
    if epochs > 1:
        sans = ((epochs - 1) * tokens_per_epoch - 1) // seq
        per_epoch = (tokens_per_epoch - 1) // seq
        separate = (num_samples - sans) < int(0.80 * per_epoch)
    rng = np.random.RandomState(seed)

    def doc_index(n_epochs, sep):
        if not sep or n_epochs == 1:
            idx = np.mgrid[0:n_epochs, first:end][1].reshape(-1).astype(np.int32)
            rng.shuffle(idx)
            return idx
        return np.concatenate([doc_index(n_epochs - 1, False), doc_index(1, False)])

    docs = doc_index(epochs, separate)
    n = (epochs * tokens_per_epoch - 1) // seq
    samples = [(0, 0)]
    pos, off = 0, 0
    for _ in range(n):
        remaining = seq + 1
        while remaining:
            length = int(sizes[docs[pos]]) - off
            remaining -= length
            if remaining <= 0:
                off += remaining + length - 1
                remaining = 0
            else:
                pos, off = pos + 1, 0
        samples.append((pos, off))
    k = ((epochs - 1) * tokens_per_epoch - 1) // seq if separate else n
    first_part = np.arange(k, dtype=np.int64)
    rng.shuffle(first_part)
    if k == n:
        shuffle = first_part
    else:
        last = np.arange(k, n, dtype=np.int64)
        rng.shuffle(last)
        shuffle = np.concatenate([first_part, last])
    return docs, np.asarray(samples, dtype=np.int64), shuffle, epochs, separate


def main():
    trident, src = sys.argv[1], sys.argv[2]
    vocab, merges = f"{src}/data/gpt2/encoder.json", f"{src}/data/gpt2/vocab.bpe"
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        # 1. datasets written here, read by trident
        docs16 = [[rng.integers(0, 50257, rng.integers(1, 300)).tolist()] for _ in range(60)]
        docs32 = [[rng.integers(0, 100000, rng.integers(1, 40)).tolist() for _ in range(rng.integers(1, 4))]
                  for _ in range(20)]
        for name, docs, code in (("u16", docs16, 8), ("i32", docs32, 4)):
            prefix = os.path.join(tmp, name)
            write_dataset(prefix, docs, code)
            out = subprocess.run([trident, "inspect-data", "--data-path", prefix, "--count", "-1"],
                                 capture_output=True, text=True)
            lines = out.stdout.split("\n")
            summary = json.loads(lines[0]) if out.returncode == 0 else {}
            seqs = [json.loads(line) for line in lines[1:] if line]
            expect = [s for d in docs for s in d]
            check(out.returncode == 0 and seqs == expect and summary.get("documents") == len(docs),
                  f"trident reads an independently written {name} dataset ({len(expect)} sequences)")

        # 2. trident preprocess, read back here
        corpus = os.path.join(tmp, "corpus.jsonl")
        texts = ["In the beginning", "", "Hello world\n\nagain", "naïve café 😀", "x" * 1000]
        with open(corpus, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps({"text": t, "id": len(t)}) + "\n")
        out = subprocess.run([trident, "preprocess", "--input", corpus, "--output-prefix",
                              os.path.join(tmp, "pre"), "--vocab-file", vocab, "--merge-file", merges,
                              "--append-eod", "--workers", "2"], capture_output=True, text=True)
        check(out.returncode == 0, "trident preprocess runs")
        ref = subprocess.run(["/usr/bin/python3", f"{src}/tests/reference/gpt2_python_reference.py", vocab, merges,
                              corpus, "text"], capture_output=True, text=True).stdout.split("\n")
        expect = [json.loads(r) + [50256] for r in ref if r and json.loads(r)]  # empty docs skipped
        code, doc_idx, seqs = read_dataset(os.path.join(tmp, "pre_text_document"))
        check(code == 8 and seqs == expect and doc_idx.tolist() == list(range(len(expect) + 1)),
              "preprocess output read by this script's reader: uint16, reference ids + EOD")

        # 3. sampling indices against numpy
        seq, seed, iters, batch = 32, 4321, 40, 8  # 2 epochs with a separate final epoch
        eval_interval, eval_iters = 10, 2
        # Megatron's get_train_valid_test_num_samples: every evaluation during training plus
        # the one at the end, eval_iters global batches each.
        valid_samples = (iters // eval_interval + 1) * eval_iters * batch
        cache = os.path.join(tmp, "cache")
        prefix = os.path.join(tmp, "u16")
        cmd = [trident, "train", "--data-path", prefix, "--split", "90,10,0", "--seq-length", str(seq),
               "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
               "--micro-batch-size", str(batch), "--global-batch-size", str(batch),
               "--train-iters", str(iters), "--eval-iters", str(eval_iters),
               "--eval-interval", str(eval_interval), "--log-interval", "1000",
               "--seed", str(seed), "--data-cache-path", cache, "--peak-tflops", "1", "--lr", "1e-4"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        check(out.returncode == 0, "trident train on the dataset builds its index caches")
        sizes = np.asarray([len(d[0]) for d in docs16], dtype=np.int64)
        bounds = [0, 54, 60]  # Megatron's split of 60 documents by 90,10,0
        for split, (first, end), samples in (("train", (0, 54), iters * batch), ("valid", (54, 60), valid_samples)):
            files = {k: glob.glob(os.path.join(cache, f"*-GPTDataset-{split}-{k}.npy")) for k in
                     ("document_index", "sample_index", "shuffle_index")}
            if not all(len(v) == 1 for v in files.values()):
                check(False, f"{split}: one cache file of each kind ({files})")
                continue
            docs, smp, shf, epochs, sep = megatron_indices(sizes, first, end, samples, seq, seed)
            ours = {k: np.load(v[0]) for k, v in files.items()}
            check(np.array_equal(ours["document_index"], docs) and np.array_equal(ours["sample_index"], smp)
                  and np.array_equal(ours["shuffle_index"], shf),
                  f"{split}: document, sample and shuffle indices equal numpy's Megatron algorithm "
                  f"({epochs} epochs, separate final epoch: {sep}, {len(shf)} samples)")
        # a second run reuses the caches
        again = subprocess.run(cmd, capture_output=True, text=True)
        check("loaded indices" in again.stdout, "a second run loads the cached indices")
    print(f"{passes} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
