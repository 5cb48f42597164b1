"""What the tokenizer tests (hf_tokenizer*, sentencepiece, hf_tokenizer_inference) share: the
ok/FAIL lines with a detail on failure and a closing count naming what failed, running a
command, the tokenizer flags, and a Megatron dataset read back by numpy."""
import struct
import subprocess

import numpy as np

from parity import Checks


class TokenizerChecks(Checks):
    """parity.Checks, with what went wrong printed under a failure and listed at the end."""

    def __init__(self):
        super().__init__()
        self.failed = []

    def __call__(self, ok, what, detail=""):
        super().__call__(ok, what)
        if not ok:
            self.failed.append(what)
            if detail:
                print("     ", detail)

    def summary(self):
        code = super().summary()
        for what in self.failed:
            print("  failed:", what)
        return code


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def tokenizer_flags(kind, model):
    """--tokenizer-type kind --tokenizer-model model (kind: HuggingFaceTokenizer, ...)."""
    return ["--tokenizer-type", kind, "--tokenizer-model", model]


def read_dataset(prefix):
    """The MMIDIDX layout as Megatron's indexed_dataset.py reads it: (dtype code, sequences,
    document index)."""
    raw = open(prefix + ".idx", "rb").read()
    assert raw[:9] == b"MMIDIDX\x00\x00", "magic"
    assert struct.unpack("<Q", raw[9:17])[0] == 1, "version"
    code = raw[17]
    n, d = struct.unpack("<QQ", raw[18:34])
    sizes = np.frombuffer(raw, np.int32, n, 34)
    pointers = np.frombuffer(raw, np.int64, n, 34 + 4 * n)
    doc_idx = np.frombuffer(raw, np.int64, d, 34 + 12 * n)
    dtype = {8: np.uint16, 4: np.int32, 1: np.uint8}[code]
    data = np.fromfile(prefix + ".bin", dtype)
    item = np.dtype(dtype).itemsize
    seqs = [data[p // item:p // item + s].tolist() for p, s in zip(pointers, sizes)]
    return code, seqs, doc_idx.tolist()
