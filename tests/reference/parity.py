"""The parity harness: train the same model under different parallel layouts and compare
every step's loss and grad norm, and the final (gathered) weights, with the one-process
run. Used by the tensor-, pipeline- and data-parallel parity tests."""
import json
import os
import struct
import subprocess
import tempfile

import numpy as np

MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")


class Checks:
    """The ok/FAIL lines and the closing count that every test script prints."""

    def __init__(self):
        self.results = []

    def __call__(self, ok, what):
        self.results.append(bool(ok))
        print("ok  " if ok else "FAIL", what)

    def add_parity(self, failed, layouts):
        """Count run_parity's layouts (it prints their lines itself)."""
        self.results += [True] * (layouts - failed) + [False] * failed

    def summary(self):
        passed = sum(self.results)
        print(f"{passed} passed, {len(self.results) - passed} failed")
        return 0 if all(self.results) else 1


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name != "__metadata__":
            b, t = e["data_offsets"]
            data = raw[8 + n + b:8 + n + t]
            if e["dtype"] == "BF16":  # the upper halves of float32s: exact as float32
                values = (np.frombuffer(data, dtype="<u2").astype("<u4") << 16).view("<f4")
            else:
                values = np.frombuffer(data, dtype="<f4")
            out[name] = values.reshape(e["shape"])
    return out


def metrics_by_iteration(path):
    """Iteration -> (loss, grad norm, lr) of the steps a --metrics-file logged; a line cut
    short is skipped, and where a resumed run appended, the last row of an iteration wins."""
    out = {}
    for line in open(path) if os.path.exists(path) else []:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "loss" in r and "lr" in r:
            out[r["iteration"]] = (r["loss"], r["grad_norm"], r["lr"])
    return out


def write_safetensors(path, tensors):
    """F32 tensors (name -> array) in file order, as trident and HuggingFace read them."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def train(trident, args, ranks, workdir, tag, launcher=("mpirun", "--oversubscribe"), logs=None):
    """Runs `trident train ARGS` on `ranks` ranks under `launcher` (an mpirun command line);
    returns (metrics rows, weights). logs, a list, gets the run's standard output."""
    metrics = os.path.join(workdir, f"{tag}.jsonl")
    model = os.path.join(workdir, f"{tag}_model")
    # fp32 even for bf16 runs: the layouts' fp32 master weights are what parity compares.
    cmd = [trident, "train"] + args + ["--metrics-file", metrics, "--save-hf", model,
                                       "--save-hf-dtype", "fp32"]
    if ranks > 1:
        cmd = list(launcher) + ["-np", str(ranks)] + cmd + ["--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    if logs is not None:
        logs.append(out.stdout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    # The file's leading "run" row describes the run (for trident report): not a metric.
    rows = [r for r in map(json.loads, open(metrics)) if "run" not in r]
    return rows, read_safetensors(os.path.join(model, "model.safetensors"))


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def compare(reference, candidate, tolerance):
    """Worst relative differences of losses, grad norms and weights; list of failures."""
    ref_rows, ref_w = reference
    rows, w = candidate
    steps = [(r, c) for r, c in zip(ref_rows, rows) if "loss" in r]
    failures = []
    if len(steps) != sum("loss" in r for r in ref_rows) or sum("loss" in r for r in rows) != len(steps):
        failures.append("different number of logged steps")
    worst_loss = max(relative(c["loss"], r["loss"]) for r, c in steps)
    worst_norm = max(relative(c["grad_norm"], r["grad_norm"]) for r, c in steps)
    # Weights are compared on the model's scale (max |a - b| over all weights divided by
    # max |w|). The key bias is left out: its true gradient is exactly zero (softmax ignores
    # a per-query constant), so Adam turns rounding noise of either sign into steps of
    # about lr in every layout, and its difference says nothing about the layout.
    worst_weight, scale, worst_name = 0.0, 0.0, ""
    for name, ref in ref_w.items():
        got = w.get(name)
        if got is None or got.shape != ref.shape:
            failures.append(f"{name}: missing or shape {None if got is None else got.shape}")
            continue
        if name.endswith("attn.c_attn.bias"):  # [q | k | v]
            h = ref.shape[0] // 3
            ref, got = np.delete(ref, np.s_[h:2 * h]), np.delete(got, np.s_[h:2 * h])
        scale = max(scale, float(np.abs(ref).max()))
        diff = float(np.abs(got - ref).max())
        if diff > worst_weight:
            worst_weight, worst_name = diff, name
    worst_weight /= max(scale, 1e-12)
    for what, value in (("loss", worst_loss), ("grad norm", worst_norm), ("weights", worst_weight)):
        if value > tolerance:
            failures.append(f"{what} differs by {value:.2e} > {tolerance:.0e}")
    summary = (f"{len(steps)} steps: loss {worst_loss:.1e}, grad norm {worst_norm:.1e}, "
               f"weights {worst_weight:.1e} (worst: {worst_name})")
    return summary, failures


def run_parity(trident, args, layouts, tolerance=1e-5):
    """layouts: list of (name, extra flags, ranks). Prints one line each; returns failures."""
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        reference = train(trident, args, 1, tmp, "reference")
        for name, flags, ranks in layouts:
            try:
                summary, bad = compare(reference, train(trident, args + flags, ranks, tmp, name), tolerance)
            except RuntimeError as e:
                summary, bad = "run failed", [str(e)]
            print(("ok  " if not bad else "FAIL"), f"{name} vs one process: {summary}")
            for b in bad:
                print("     ", b)
            failures += bool(bad)
    return failures


def first_iteration(trident, work, tag, model, prefix, length, extra, ranks=1):
    """`train --load-hf MODEL` for one iteration at learning rate 0 on the dataset PREFIX
    (every sample of `length` tokens, micro-batch 2, global batch 4): ((loss, grad_norm) of
    iteration 1 from the metrics file, or None; the process)."""
    metrics = f"{work}/{tag}.jsonl"
    cmd = [trident, "train", "--load-hf", model, "--data-path", prefix, "--split", "100,0,0",
           "--seq-length", str(length), "--micro-batch-size", "2", "--global-batch-size", "4",
           "--train-iters", "1", "--lr", "0", "--min-lr", "0", "--eval-iters", "0",
           "--threads", "1", "--metrics-file", metrics, "--data-cache-path", f"{work}/cache"]
    cmd += extra
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=600,
                         cwd=work)
    if out.returncode != 0:
        return None, out
    rows = [json.loads(l) for l in open(metrics) if '"loss"' in l and '"iteration"' in l]
    return (rows[-1]["loss"], rows[-1]["grad_norm"]), out
