#!/usr/bin/python3
"""Megatron's mixture-of-experts flags on `trident train`, end to end: every rule of
Megatron's MoE argument checks (and trident's refusals by name of what it does not build)
gives its message and exit 2, with nothing written; all broken rules are listed at once;
a flag that shapes MoE layers without --num-experts is refused (Megatron would ignore it
and train a dense model); the same keys from a TOML config; a run whose MoE flags are all
valid trains (t = 1, fp32, with token dropping and gated shared experts; bf16 and fp16 train:
moe_bf16_test.py, moe_fp16_test.py); t > 1 without --sequence-parallel is refused with
Megatron's rule (t = 2 with it trains: moe_tp_parity.py). The data-parallel size that EP
must divide is checked under mpirun -np 2 as well, where EP 2 trains, and with whole experts
(t 2, --expert-tensor-parallel-size 1) EP dividing t x d / ETP and a multiple of t.
--num-experts 0 is Megatron's "no MoE" and trains.
Usage: moe_flags_test.py TRIDENT"""
import os
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks

TINY = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "2",
        "--seq-length", "32", "--vocab-size", "128", "--micro-batch-size", "2", "--train-iters", "1",
        "--eval-iters", "0", "--log-interval", "1", "--peak-tflops", "1", "--threads", "1"]
MOE = ["--num-experts", "8", "--moe-router-topk", "2"]
check = Checks()


def train(trident, tmp, tag, args, ranks=1):
    metrics = os.path.join(tmp, tag + ".jsonl")
    cmd = [trident, "train"] + TINY + args + ["--metrics-file", metrics]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--allow-run-as-root", "--oversubscribe"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)
    return out.returncode, out.stderr + out.stdout, os.path.exists(metrics)


def refused(trident, tmp, tag, args, wanted, ranks=1, what=None):
    code, text, wrote = train(trident, tmp, tag, args, ranks)
    missing = [w for w in wanted if w not in text]
    check(code == 2 and not missing and not wrote,
          f"{what or tag}: exit 2 with {wanted}" +
          ("" if code == 2 and not missing and not wrote else
           f" (exit {code}, missing {missing}, metrics written {wrote}: {text.strip()[-600:]})"))


def test_each_rule(trident, tmp):
    """One broken rule at a time, each with its message."""
    cases = [
        ("ep_not_dividing_d", ["--expert-model-parallel-size", "2"],
         "--expert-model-parallel-size (2) must divide the data-parallel size (1 = world size 1"),
        ("experts_not_divisible_by_ep", ["--expert-model-parallel-size", "3"],
         "--num-experts (8) must be divisible by --expert-model-parallel-size (3)"),
        ("topk_above_experts", ["--moe-router-topk", "9"],
         "--moe-router-topk (9) must be in [1, --num-experts] (8)"),
        ("top1_without_pre_softmax", ["--moe-router-topk", "1"],
         "--moe-router-topk 1 needs --moe-router-pre-softmax"),
        ("tp_without_sp", ["--tensor-model-parallel-size", "2"],
         "--num-experts with --tensor-model-parallel-size 2 needs --sequence-parallel "
         "(Megatron's rule"),
        ("pad_without_capacity", ["--moe-pad-expert-input-to-capacity"],
         "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor"),
        ("allgather", ["--moe-token-dispatcher-type", "allgather"],
         "--moe-token-dispatcher-type allgather is not implemented in trident: alltoall only"),
        ("flex", ["--moe-token-dispatcher-type", "flex"],
         "--moe-token-dispatcher-type flex is not implemented in trident"),
        ("etp_not_dividing_t", ["--tensor-model-parallel-size", "2", "--sequence-parallel",
                                "--expert-tensor-parallel-size", "3"],
         "--expert-tensor-parallel-size (3) must divide --tensor-model-parallel-size (2)"),
        ("etp_between_1_and_t", ["--tensor-model-parallel-size", "4", "--sequence-parallel",
                                 "--expert-tensor-parallel-size", "2"],
         "--expert-tensor-parallel-size 2 is not built: trident takes 1 (whole experts) or "
         "--tensor-model-parallel-size (4)"),
        ("sigmoid", ["--moe-router-score-function", "sigmoid"],
         "--moe-router-score-function sigmoid is not implemented in trident (softmax only)"),
        ("layer_freq_length", ["--moe-layer-freq", "([1]*3+[0]*1)*3"],
         "--moe-layer-freq '([1]*3+[0]*1)*3' gives 12 layers; --num-layers is 4"),
        ("layer_freq_entry", ["--moe-layer-freq", "[1,0,2,0]"], "entry 2 is 2"),
        ("layer_freq_zero", ["--moe-layer-freq", "0"], "--moe-layer-freq '0': an integer N >= 1"),
        ("layer_freq_syntax", ["--moe-layer-freq", "[1,0]*2+import"], "unexpected 'i'"),
        ("capacity_zero", ["--moe-expert-capacity-factor", "0"],
         "--moe-expert-capacity-factor must be > 0"),
        ("jitter", ["--moe-input-jitter-eps", "0.01"], "--moe-input-jitter-eps is not implemented"),
    ]
    for balancing in ["seq_aux_loss", "global_aux_loss", "sinkhorn", "quantile_balancing"]:
        cases.append((balancing, ["--moe-router-load-balancing-type", balancing],
                      f"--moe-router-load-balancing-type {balancing} is not implemented in trident"))
    for tag, args, message in cases:
        refused(trident, tmp, tag, MOE + args, [message])


def test_all_at_once_and_config(trident, tmp):
    """Every broken rule listed in one refusal; a TOML config's keys are the same flags."""
    args = ["--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "3",
            "--moe-router-topk", "9", "--moe-token-dispatcher-type", "allgather"]
    refused(trident, tmp, "all_at_once", ["--num-experts", "8"] + args,
            ["--num-experts (8) must be divisible by --expert-model-parallel-size (3)",
             "--expert-model-parallel-size (3) must divide the data-parallel size",
             "--moe-router-topk (9) must be in [1, --num-experts] (8)",
             "needs --sequence-parallel", "allgather is not implemented"],
            what="four broken MoE rules at once")
    config = os.path.join(tmp, "moe.toml")
    with open(config, "w") as f:
        f.write('num-experts = 8\nmoe-router-topk = 2\nmoe-layer-freq = "[1,0]*2"\n'
                'moe-aux-loss-coeff = [0.01]\nmoe-router-load-balancing-type = ["sinkhorn"]\n')
    refused(trident, tmp, "toml", ["--config", config],
            ["--moe-router-load-balancing-type sinkhorn is not implemented"],
            what="MoE keys in a TOML config")


def test_valid_and_without_experts(trident, tmp):
    """A valid MoE run trains; MoE flags without experts are refused by name; --num-experts
    0 trains a dense model."""
    code, text, wrote = train(trident, tmp, "valid", MOE + [
        "--moe-layer-freq", "([1]*1+[0]*1)*2", "--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff",
        "1e-3", "--moe-grouped-gemm", "--moe-ffn-hidden-size", "96", "--moe-router-pre-softmax",
        "--moe-expert-capacity-factor", "1.5", "--moe-token-drop-policy", "position",
        "--moe-pad-expert-input-to-capacity", "--moe-shared-expert-intermediate-size", "64",
        "--moe-shared-expert-gate"])
    check(code == 0 and wrote, f"a valid MoE run trains (exit {code}: {text.strip()[-400:]})")
    refused(trident, tmp, "no_experts",
            ["--moe-router-topk", "4", "--moe-aux-loss-coeff", "0.01", "--expert-model-parallel-size", "2"],
            ["--moe-router-topk needs --num-experts", "--moe-aux-loss-coeff needs --num-experts",
             "--expert-model-parallel-size 2 needs --num-experts"],
            what="MoE flags without --num-experts")
    code, text, wrote = train(trident, tmp, "zero_experts", ["--num-experts", "0"])
    check(code == 0 and wrote, f"--num-experts 0 (Megatron's no MoE) trains (exit {code})")


def test_under_mpirun(trident, tmp):
    """d = world / (t x p) = 2: EP 2 trains, EP 4 is refused."""
    code, text, wrote = train(trident, tmp, "mpi_ep2", MOE + ["--expert-model-parallel-size", "2"],
                              ranks=2)
    check(code == 0 and wrote,
          f"mpirun -np 2, EP 2 trains (exit {code}: {text.strip()[-400:]})")
    refused(trident, tmp, "mpi_ep4", MOE + ["--expert-model-parallel-size", "4"],
            ["--expert-model-parallel-size (4) must divide the data-parallel size (2 = world size 2"],
            ranks=2, what="mpirun -np 2, EP 4")
    # Whole experts at t 2 (ETP 1): EP may take the tensor ranks, up to t x d / ETP = 2.
    whole = ["--tensor-model-parallel-size", "2", "--sequence-parallel",
             "--expert-tensor-parallel-size", "1"]
    refused(trident, tmp, "mpi_etp1_ep4", MOE + whole + ["--expert-model-parallel-size", "4"],
            ["--expert-model-parallel-size (4) must divide t x d / ETP (2 x 1 / 1 = 2"],
            ranks=2, what="mpirun -np 2, t 2, ETP 1, EP 4")
    refused(trident, tmp, "mpi_etp1_ep1", MOE + whole,
            ["--expert-tensor-parallel-size 1 with --tensor-model-parallel-size 2: "
             "--expert-model-parallel-size (1) must be a multiple of t"],
            ranks=2, what="mpirun -np 2, t 2, ETP 1, EP 1")


def main():
    trident = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        test_each_rule(trident, tmp)
        test_all_at_once_and_config(trident, tmp)
        test_valid_and_without_experts(trident, tmp)
        test_under_mpirun(trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
