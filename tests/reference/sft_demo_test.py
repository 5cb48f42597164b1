#!/usr/bin/python3
"""The fine-tuning walk-through's data step (`scripts/sft_demo.sh --data-only`), which CI does
not otherwise run: the conversations are {"messages": [system, user, assistant]}; the
SentencePiece tokenizer it trains
spells ChatML renders, so `preprocess --apply-chat-template` keeps every conversation and
its loss mask counts exactly the tokens of each answer and its `<|im_end|>\\n` (spelled by
the tokenizer's .vocab pieces); the rendered prompts end with the generation prompt.
Usage: sft_demo_test.py TRIDENT SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from parity import Checks

check = Checks()


def read_dataset(prefix, dtype):
    """Documents of a Megatron .bin/.idx pair (MMIDIDX: sizes int32 after the header)."""
    idx = open(prefix + ".idx", "rb").read()
    count = int(np.frombuffer(idx, np.int64, 1, 18)[0])
    sizes = np.frombuffer(idx, np.int32, count, 34)
    data = np.fromfile(prefix + ".bin", dtype)
    return np.split(data, np.cumsum(sizes)[:-1])


def main():
    src = sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TMPDIR=tmp)
        out = subprocess.run(["bash", f"{src}/scripts/sft_demo.sh", "--data-only"],
                             capture_output=True, text=True, env=env, timeout=600)
        run = f"{tmp}/trident_sft_demo"
        check(out.returncode == 0, "sft_demo.sh --data-only" + out.stderr[-800:])
        if out.returncode:
            return check.summary()
        chats = [json.loads(l) for l in open(f"{run}/chats.jsonl")]
        roles = {tuple(m["role"] for m in c["messages"]) for c in chats}
        check(roles == {("system", "user", "assistant")} and len(chats) > 500,
              f"{len(chats)} conversations of system, user, assistant")
        tokens = read_dataset(f"{run}/chats_messages_document", np.uint16)
        masks = read_dataset(f"{run}/chats_messages_loss_mask", np.uint8)
        check(len(tokens) == len(chats) == len(masks),
              f"preprocess kept every conversation: {len(tokens)} documents, {len(masks)} masks")
        pieces = [l.split("\t")[0] for l in open(f"{run}/pydocs.vocab", encoding="utf-8")]

        def text(ids):
            return "".join(pieces[i] for i in ids).replace("\u2581", " ")

        answers = [c["messages"][2]["content"] for c in chats]
        ascii_only = [i for i, a in enumerate(answers) if a.isascii()]  # no byte pieces
        wrong = [i for i in ascii_only
                 if text(tokens[i][masks[i] == 1]) != answers[i] + "<|im_end|><0x0A>"]
        check(len(ascii_only) > 500 and not wrong,
              f"the loss mask counts each answer and its <|im_end|>\\n exactly ({len(wrong)} of "
              f"{len(ascii_only)} conversations differ" +
              (f", e.g. {text(tokens[wrong[0]][masks[wrong[0]] == 1])!r})" if wrong else ")"))
        prompts = [json.loads(l)["prompt"] for l in open(f"{run}/heldout_prompts_rendered.jsonl")]
        check(len(prompts) == 4 and all(p.endswith("<|im_start|>assistant\n") for p in prompts),
              "4 held-out prompts rendered with the generation prompt")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
