#!/usr/bin/python3
"""Checkpoints: exact resume (bit for bit: losses, grad norms, weights) in one process and
under (t, p) = (2, 2); resharding — saved under (2, 2, 1) with v = 2 and under (1, 2, 2) with
the distributed optimizer, loaded under (1, 1, 1), (4, 1, 1), (1, 4, 1) and (2, 1, 2), the
next steps compared with the run that never stopped; damaged checkpoints rejected with the
file and the problem, before anything changes.
Usage: checkpoint_test.py TRIDENT"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks, compare, read_safetensors

ARGS = ["--mock-data", "--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--train-iters", "20", "--lr", "1e-3", "--lr-warmup-iters", "2",
        "--log-interval", "1", "--eval-iters", "1", "--eval-interval", "5", "--peak-tflops", "1",
        "--seed", "21"]
LAYOUTS = {"(1,1,1)": ([], 1), "(4,1,1)": (["--tensor-model-parallel-size", "4"], 4),
           "(1,4,1)": (["--pipeline-model-parallel-size", "4"], 4),
           "(2,1,2)": (["--tensor-model-parallel-size", "2"], 4),
           "(2,2,1) v=2": (["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                            "--num-layers-per-virtual-pipeline-stage", "2"], 4),
           "(1,2,2) dist-opt": (["--pipeline-model-parallel-size", "2", "--use-distributed-optimizer"], 4)}
check = Checks()


def run(trident, flags, ranks, tmp, tag, extra):
    metrics = os.path.join(tmp, tag + ".jsonl")
    model = os.path.join(tmp, tag + "_hf")
    cmd = [trident, "train"] + ARGS + flags + extra + ["--metrics-file", metrics, "--save-hf", model]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd + ["--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    rows = [json.loads(line) for line in open(metrics)] if os.path.exists(metrics) else []
    weights = read_safetensors(os.path.join(model, "model.safetensors")) if out.returncode == 0 else {}
    return out, rows, weights


def at_iteration_10(save_dir, tmp, tag):
    copy = os.path.join(tmp, tag)
    shutil.copytree(save_dir, copy)
    with open(os.path.join(copy, "latest"), "w") as f:
        f.write("iter_0000010\n")
    return copy


def steps(rows, first=11):
    return [r for r in rows if "loss" in r and r["iteration"] >= first]


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        # The uninterrupted reference, saving at 10 and 20.
        ref_out, ref_rows, ref_w = run(trident, [], 1, tmp, "ref", ["--save", f"{tmp}/ref_ckpt", "--save-interval", "10"])
        check(ref_out.returncode == 0 and os.path.isdir(f"{tmp}/ref_ckpt/iter_0000010"), "reference run saves at 10 and 20")
        # Exact resume, one process and (t, p) = (2, 2).
        for name in ("(1,1,1)", "(2,2,1) v=2"):
            flags, ranks = LAYOUTS[name]
            tag = "exact" + str(ranks)
            full_out, full_rows, full_w = run(trident, flags, ranks, tmp, tag + "_full", ["--save", f"{tmp}/{tag}_ckpt", "--save-interval", "10"])
            resume = at_iteration_10(f"{tmp}/{tag}_ckpt", tmp, tag + "_resume_ckpt")
            out, rows, w = run(trident, flags, ranks, tmp, tag + "_resumed", ["--load", resume])
            same = (out.returncode == 0 and len(steps(rows)) == 10 and
                    all(a["loss"] == b["loss"] and a["grad_norm"] == b["grad_norm"]
                        for a, b in zip(steps(full_rows), steps(rows))) and
                    all((w[k] == full_w[k]).all() for k in full_w))
            check(same, f"{name}: resuming at 10 gives the uninterrupted run's steps 11-20 and weights bit for bit")
        # Resharding: save under two layouts, load under four others.
        for saved in ("(2,2,1) v=2", "(1,2,2) dist-opt"):
            flags, ranks = LAYOUTS[saved]
            tag = "save_" + str(abs(hash(saved)))
            out, _, _ = run(trident, flags, ranks, tmp, tag, ["--save", f"{tmp}/{tag}", "--save-interval", "10"])
            if out.returncode != 0:
                check(False, f"save under {saved}: {out.stderr[-500:]}")
                continue
            resume = at_iteration_10(f"{tmp}/{tag}", tmp, tag + "_at10")
            for target in ("(1,1,1)", "(4,1,1)", "(1,4,1)", "(2,1,2)"):
                tflags, tranks = LAYOUTS[target]
                out, rows, w = run(trident, tflags, tranks, tmp, tag + target, ["--load", resume])
                if out.returncode != 0:
                    check(False, f"saved under {saved}, loaded under {target}: {out.stderr[-800:]}")
                    continue
                summary, bad = compare((steps(ref_rows), ref_w), (steps(rows), w), 1e-5)
                check(not bad, f"saved under {saved}, loaded under {target}: steps 11-20 vs uninterrupted: {summary}")
        # Conversion: checkpoint -> HF -> checkpoint -> HF is identical, and scores agree.
        conv = [[trident, "convert", "--load", f"{tmp}/ref_ckpt", "--save-hf", f"{tmp}/conv_hf"],
                [trident, "convert", "--load-hf", f"{tmp}/conv_hf", "--save", f"{tmp}/conv_ckpt"],
                [trident, "convert", "--load", f"{tmp}/conv_ckpt", "--save-hf", f"{tmp}/conv_hf2"]]
        ok = all(subprocess.run(cmd, capture_output=True).returncode == 0 for cmd in conv)
        a = read_safetensors(f"{tmp}/conv_hf/model.safetensors") if ok else {}
        b = read_safetensors(f"{tmp}/conv_hf2/model.safetensors") if ok else {}
        same = ok and a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a) and \
            all((a[k] == ref_w[k]).all() for k in ref_w)
        with open(f"{tmp}/ids.json", "w") as f:
            json.dump([[(7 * i) % 301 for i in range(40)]], f)
        scores = [subprocess.run([trident, "score", "--model", m, "--tokens", f"{tmp}/ids.json"],
                                 capture_output=True, text=True).stdout for m in (f"{tmp}/conv_hf", f"{tmp}/conv_hf2")]
        check(bool(same and scores[0] == scores[1] and scores[0]),
              f"checkpoint -> HF -> checkpoint -> HF is identical to the trained weights; score {scores[0].strip()}")
        # Damaged checkpoints.
        base = f"{tmp}/ref_ckpt"
        def damaged(tag, mutate, message):
            d = at_iteration_10(base, tmp, "bad_" + tag)
            mutate(os.path.join(d, "iter_0000010"))
            before = sorted(os.listdir(d))
            out, _, _ = run(trident, ["--save", d], 1, tmp, "bad_" + tag, ["--load", d])
            check(out.returncode == 2 and message in out.stderr and sorted(os.listdir(d)) == before,
                  f"{tag}: exit {out.returncode}, '{message}' reported, checkpoint directory unchanged")
        def truncate(path):
            f = os.path.join(path, "model_tp0_pp0.safetensors")
            os.truncate(f, os.path.getsize(f) - 100)
        def flip(path):
            f = os.path.join(path, "model_tp0_pp0.safetensors")
            with open(f, "r+b") as h:
                h.seek(5000)
                b = h.read(1)
                h.seek(5000)
                h.write(bytes([b[0] ^ 1]))
        def edit_manifest(key, value):
            def mutate(path):
                m = json.load(open(os.path.join(path, "manifest.json")))
                m[key] = value
                json.dump(m, open(os.path.join(path, "manifest.json"), "w"))
            return mutate
        damaged("missing", lambda p: os.remove(os.path.join(p, "model_tp0_pp0.safetensors")), "model_tp0_pp0.safetensors: missing")
        damaged("truncated", truncate, "(truncated?)")
        damaged("altered", flip, "does not match the manifest")
        damaged("version", edit_manifest("version", 99), "format version 99")
        def edit_model(path):
            m = json.load(open(os.path.join(path, "manifest.json")))
            m["model"]["num_layers"] = 3
            json.dump(m, open(os.path.join(path, "manifest.json"), "w"))
        damaged("config", edit_model, "does not match this run")
        # A manifest is checked on its own first, then against the files it names.
        damaged("no_model", edit_manifest("model", {"num_layers": 3}), "model.hidden_size is missing")
        def edit_file(key, value):
            def mutate(path):
                m = json.load(open(os.path.join(path, "manifest.json")))
                m["files"][0][key] = value
                json.dump(m, open(os.path.join(path, "manifest.json"), "w"))
            return mutate
        damaged("escape", edit_file("file", "../ref_ckpt/iter_0000010/model_tp0_pp0.safetensors"),
                "files[0].file must be a plain file name")
        def shrink_tensor(path):  # the manifest's shape of one tensor no longer the file's
            m = json.load(open(os.path.join(path, "manifest.json")))
            t = next(t for t in m["files"][0]["tensors"] if t["name"] == "final_layernorm.bias")
            t["global_shape"][0] -= 1
            t["local_shape"][0] -= 1
            json.dump(m, open(os.path.join(path, "manifest.json"), "w"))
        damaged("shape", shrink_tensor, "tensor final_layernorm.bias is F32")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
