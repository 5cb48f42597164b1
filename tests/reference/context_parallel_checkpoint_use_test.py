#!/usr/bin/python3
"""generate and eval (which run at c = 1) load a checkpoint trained with context parallelism:
the same training run at c = 1 (one rank) and at c = 2 (two ranks, the ring) saves a
checkpoint each; on both, `trident generate --greedy` must print the same tokens and
`trident eval` (a rolling-perplexity text task and a multiple-choice task) must score every
request's log-likelihood within 1e-5 (the runs' weights agree to float rounding: training
parity, context_parallel_test.py).
Usage: context_parallel_checkpoint_use_test.py TRIDENT SOURCE"""
import json
import os
import subprocess
import sys
import tempfile

from parity import MPI_ENV, Checks

TRAIN = ["--mock-data", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
         "--vocab-size", "50257", "--micro-batch-size", "2", "--global-batch-size", "4",
         "--lr", "1e-4", "--eval-iters", "0", "--seed", "5", "--num-layers", "2",
         "--train-iters", "3", "--threads", "1",
         # Tied weights make a barely trained model's greedy choice the largest embedding
         # whatever the context; an output layer of its own makes the tokens depend on it.
         "--untie-embeddings-and-output-weights"]
PROMPTS = ["In the beginning", "And the earth was", "light water stone"]
check = Checks()


def run(cmd, ranks=1):
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)


def write_tasks(tmp):
    """A text file for rolling perplexity and a multiple-choice task (mc:NAME)."""
    text = os.path.join(tmp, "story.txt")
    with open(text, "w") as f:
        f.write("In the beginning the light was upon the water.\nAnd the stone was bread.\n")
    root = os.path.join(tmp, "tasks")
    os.makedirs(os.path.join(root, "pick"))
    docs = [{"context": f"Q: which is {w}? A:", "choices": [" stone", " river", " house"],
             "label": i % 3} for i, w in enumerate(["hard", "wet", "home", "old"])]
    with open(os.path.join(root, "pick", "test.jsonl"), "w") as f:
        f.write("".join(json.dumps(d) + "\n" for d in docs))
    return ["--task-dir", root, "--tasks", f"text:{text},mc:pick"]


def use(trident, tok, checkpoint, tasks, tmp, name):
    """(greedy continuations, [(request, log-likelihood)]) of one checkpoint, or None."""
    prompts = os.path.join(tmp, "prompts.txt")
    with open(prompts, "w") as f:
        f.write("\n".join(PROMPTS) + "\n")
    gen = run([trident, "generate", "--load", checkpoint, "--prompt-file", prompts, "--greedy",
               "--tokens-to-generate", "12", "--threads", "1"] + tok)
    # Sampling (seeded) too: a draw flips only where the probabilities differ by more than
    # float rounding.
    sampled = run([trident, "generate", "--load", checkpoint, "--prompt-file", prompts,
                   "--seed", "7", "--tokens-to-generate", "12", "--threads", "1"] + tok)
    log = os.path.join(tmp, name + ".jsonl")
    ev = run([trident, "eval", "--load", checkpoint, "--log-samples", log, "--threads", "1",
              "--bootstrap-iters", "10"] + tasks + tok)
    for what, out in (("generate --greedy", gen), ("generate", sampled), ("eval", ev)):
        check(out.returncode == 0, f"{what} loads the {name} checkpoint")
        if out.returncode != 0:
            print(out.stdout[-2000:], out.stderr[-2000:])
            return None
    samples = [json.loads(line) for line in open(log)]
    scores = [((s["task"], s["doc_id"], s["index"]), s["logprob"]) for s in samples]
    return gen.stdout + sampled.stdout, scores


def main():
    trident, source = sys.argv[1], sys.argv[2]
    tok = ["--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
           "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
    with tempfile.TemporaryDirectory() as tmp:
        tasks = write_tasks(tmp)
        used = {}
        for name, ranks, flags in (("c=1", 1, []), ("c=2", 2, ["--context-parallel-size", "2"])):
            checkpoint = os.path.join(tmp, name)
            out = run([trident, "train"] + TRAIN + flags + ["--save", checkpoint], ranks)
            check(out.returncode == 0, f"training at {name} saves its checkpoint")
            if out.returncode != 0:
                print(out.stdout[-2000:], out.stderr[-2000:])
                return check.summary()
            used[name] = use(trident, tok, checkpoint, tasks, tmp, name)
        if None in used.values():
            return check.summary()
        (text1, scores1), (text2, scores2) = used["c=1"], used["c=2"]
        lines = [l for l in text2.splitlines() if l.strip()]
        check(text1 == text2 and len(lines) >= 2 * len(PROMPTS),
              f"generation (greedy, and sampled with one seed) from the c=2 checkpoint prints "
              f"the c=1 checkpoint's tokens: {lines[:1]}")
        same = [k for k, _ in scores1] == [k for k, _ in scores2] and len(scores1) > 10
        worst = max((abs(a - b) / max(1.0, abs(a)) for (_, a), (_, b) in zip(scores1, scores2)),
                    default=1.0)
        check(same and worst < 1e-5,
              f"eval scores the same {len(scores2)} requests from both checkpoints; "
              f"log-likelihoods within {worst:.1e} (relative, 1e-5 allowed)")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
