#!/usr/bin/python3
"""A Llama 3.1-style model with RoPE scaling (--use-rope-scaling) and a sliding window
(--window-size, not a multiple of the 64-key tiles, over 80 positions so whole tiles are
skipped) trains the same model under t = 2, p = 2, d = 2 (8 ranks), sequence parallelism,
full recompute and ZB-H1 as in one process (losses, grad norms and final weights within
1e-5); --bf16 tracks fp32 with the window, the scaling and both; then the new flags'
argument checks and --help.
Usage: llama3_mistral_parallel_test.py /path/to/trident
"""
import json
import os
import subprocess
import sys
import tempfile

from llama_family_reference import read_safetensors_raw, to_bf16
from parity import Checks, read_safetensors, run_parity

MODEL = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--ffn-hidden-size", "96", "--seq-length", "80", "--vocab-size", "301",
         "--micro-batch-size", "2", "--global-batch-size", "8", "--lr", "1e-3",
         "--lr-warmup-iters", "2", "--eval-iters", "1", "--peak-tflops", "1", "--seed", "5",
         "--train-iters", "3", "--log-interval", "1",
         "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--swiglu",
         "--group-query-attention", "--num-query-groups", "2",
         "--untie-embeddings-and-output-weights", "--disable-bias-linear",
         "--rotary-base", "500000", "--use-rope-scaling", "--rope-scaling-factor", "8",
         "--window-size", "(21,0)"]
T2 = ["--tensor-model-parallel-size", "2"]
P2 = ["--pipeline-model-parallel-size", "2"]


def final_loss(trident, args):
    out = subprocess.run([trident, "train"] + args, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if "final train loss:" in line]
    if out.returncode != 0 or not lines:
        print(out.stdout[-1500:], out.stderr[-1500:])
        return float("nan")
    return float(lines[0].split(":")[1].split()[0])


def bf16_tracks_fp32(check, trident):
    """--bf16 (bf16 products, fp32 master weights) with the window, with the scaling and with
    both: the final loss within 2e-2 of fp32's, the bf16-against-fp32 tolerance of
    qwen_parallel_test.py and mixed_precision_test.py."""
    scaling = MODEL.index("--use-rope-scaling")
    window = MODEL.index("--window-size")
    variants = {"window": MODEL[:scaling] + MODEL[scaling + 3:],
                "rope scaling": MODEL[:window],
                "window + rope scaling": MODEL}
    for name, model in variants.items():
        model = model + ["--train-iters", "8"]
        fp32, bf16 = final_loss(trident, model), final_loss(trident, model + ["--bf16"])
        check(abs(bf16 - fp32) < 2e-2 * fp32,
              f"{name} trains in bf16: final loss {bf16:.4f} vs fp32 {fp32:.4f}")


def bf16_export(check, trident, tmp):
    """train --bf16 --save-hf writes BF16 (torch_dtype bfloat16): the fp32 master weights
    rounded to nearest even, bit for bit as numpy rounds them; --save-hf-dtype fp32 keeps F32."""
    run = MODEL + ["--train-iters", "1", "--lr-warmup-iters", "0", "--bf16"]
    dirs = {dtype: os.path.join(tmp, "hf_" + dtype) for dtype in ("bf16", "fp32")}
    outs = [subprocess.run([trident, "train"] + run + ["--save-hf", dirs["bf16"]],
                           capture_output=True, text=True),
            subprocess.run([trident, "train"] + run + ["--save-hf", dirs["fp32"],
                                                       "--save-hf-dtype", "fp32"],
                           capture_output=True, text=True)]
    ok = all(o.returncode == 0 for o in outs)
    if ok:
        stored = read_safetensors_raw(os.path.join(dirs["bf16"], "model.safetensors"))
        master = read_safetensors(os.path.join(dirs["fp32"], "model.safetensors"))
        config = json.load(open(os.path.join(dirs["bf16"], "config.json")))
        ok = (stored.keys() == master.keys() and config.get("torch_dtype") == "bfloat16" and
              all(dtype == "BF16" and data == to_bf16(master[name])[0].tobytes()
                  for name, (dtype, _, data) in stored.items()))
    check(ok, f"train --bf16 --save-hf writes BF16, the fp32 weights rounded to nearest even "
              f"{outs[0].stderr[-300:]}{outs[1].stderr[-300:]}")


def main():
    trident = sys.argv[1]
    check = Checks()
    layouts = [("window + rope scaling, t=2 p=2 d=2", T2 + P2, 8),
               ("window + rope scaling, t=2 sequence parallel, full recompute",
                T2 + ["--sequence-parallel", "--recompute-granularity", "full",
                      "--recompute-method", "uniform", "--recompute-num-layers", "1"], 2),
               ("window + rope scaling, p=2 zb-h1", P2 + ["--pipeline-schedule", "zb-h1"], 2)]
    check.add_parity(run_parity(trident, MODEL, layouts), len(layouts))

    bf16_tracks_fp32(check, trident)
    with tempfile.TemporaryDirectory() as tmp:  # the exported config.json says what was trained
        model = os.path.join(tmp, "hf")
        out = subprocess.run([trident, "train"] + MODEL + ["--train-iters", "1", "--lr-warmup-iters",
                                                           "0", "--save-hf", model], capture_output=True, text=True)
        cfg = json.load(open(os.path.join(model, "config.json"))) if out.returncode == 0 else {}
        check(cfg.get("sliding_window") == 21 and cfg.get("model_type") == "mistral" and
              cfg.get("rope_scaling", {}).get("rope_type") == "llama3" and
              cfg["rope_scaling"].get("factor") == 8 and
              cfg["rope_scaling"].get("original_max_position_embeddings") == 8192,
              f"--save-hf writes MistralForCausalLM with sliding_window and rope_scaling "
              f"{out.stderr[-300:]}")
        bf16_export(check, trident, tmp)

    bad = subprocess.run([trident, "train", "--mock-data", "--window-size", "(8,4)",
                          "--train-iters", "1"], capture_output=True, text=True)
    check(bad.returncode == 2 and "right window must be 0" in bad.stderr,
          f"--window-size (8,4) refused: {bad.stderr.strip()[:200]}")
    bad = subprocess.run([trident, "train", "--mock-data", "--use-rope-scaling",
                          "--rope-scaling-factor", "-1", "--train-iters", "1"],
                         capture_output=True, text=True)
    for rule in ("--use-rope-scaling needs --position-embedding-type rope",
                 "--rope-scaling-factor must be > 0"):
        check(bad.returncode == 2 and rule in bad.stderr, f"refused: {rule}")
    alone = subprocess.run([trident, "train", "--mock-data", "--position-embedding-type", "rope",
                            "--rope-scaling-factor", "8", "--train-iters", "1"],
                           capture_output=True, text=True)
    check(alone.returncode == 2 and "--rope-scaling-factor needs --use-rope-scaling" in alone.stderr,
          f"--rope-scaling-factor alone is refused, not ignored: {alone.stderr.strip()[:200]}")
    for flags, rule in (
            (["--rope-scaling-low-freq-factor", "2"],
             "--rope-scaling-low-freq-factor needs --use-rope-scaling"),
            (["--rotary-seq-len-interpolation-factor", "2", "--use-rope-scaling"],
             "--rotary-seq-len-interpolation-factor (linear scaling) excludes --use-rope-scaling"),
            (["--save-hf-dtype", "fp16"], "--save-hf-dtype must be bf16 or fp32")):
        bad = subprocess.run([trident, "train", "--mock-data", "--position-embedding-type", "rope",
                              "--train-iters", "1"] + flags, capture_output=True, text=True)
        check(bad.returncode == 2 and rule in bad.stderr, f"refused: {rule}")
    helptext = subprocess.run([trident, "train", "--help"], capture_output=True, text=True).stdout
    check("--window-size" in helptext and "(W,0)" in helptext and "--use-rope-scaling" in helptext,
          "--help lists --window-size (W or (W,0)) and --use-rope-scaling")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
