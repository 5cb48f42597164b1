#!/usr/bin/env bash
# The fine-tuning walk-through (README "Fine-tuning a chat model"), from this machine's own
# text: Python's standard-library docstrings. About 5 minutes on 2 cores:
#  1. data (scripts/sft_demo_data.py): the docstrings as pretraining text, and ~1100
#     conversations "What does the function X do?" -> its docstring's summary, 1 in 12 held
#     out; a 4096-piece BPE tokenizer (SentencePiece) trained on the docstrings, with the
#     ChatML markers as whole pieces and no normalization (its tokens must spell the rendered
#     text for the assistant spans to be found);
#  2. a base model: a small Llama-shaped GPT pretrained on the docstrings and exported as a
#     HuggingFace directory (it continues text, it does not answer);
#  3. before: the base's loss on the held-out answers (train --skip-train, masked as --sft) and
#     its greedy replies to four held-out questions;
#  4. SFT: train --sft on the training conversations, packed, ChatML-rendered
#     (configs/chatml.jinja), only the assistant's tokens counted: every weight, then LoRA
#     (rank-16 adapters, the base frozen), each from the base's HuggingFace export;
#  5. after: the same loss and the same questions for both.
# Extra arguments go to both fine-tuning runs (`trident train`); `--data-only` alone stops
# after step 1 (tests/reference/sft_demo_test.py).
set -euo pipefail
cd "$(dirname "$0")/.."
data_only=0
[[ ${1:-} == --data-only ]] && data_only=1 && shift
RUN="${TMPDIR:-/tmp}/trident_sft_demo"
rm -rf "$RUN"
mkdir -p "$RUN"

echo "== data: docstrings and conversations from $(python3 --version)"
split=$(/usr/bin/python3 scripts/sft_demo_data.py "$RUN" | sed -n 's/^split=//p')
spm_train --input="$RUN/docs.txt" --model_prefix="$RUN/pydocs" --model_type=bpe \
  --vocab_size=4096 --byte_fallback=true --character_coverage=1.0 --split_digits=true \
  --add_dummy_prefix=false --normalization_rule_name=identity --remove_extra_whitespaces=false \
  --user_defined_symbols='<|im_start|>,<|im_end|>' --max_sentence_length=100000 \
  --num_threads="$(nproc)" --minloglevel=2 > /dev/null 2>&1
TOKENIZER=(--tokenizer-type SentencePieceTokenizer --tokenizer-model "$RUN/pydocs.model")
build/trident preprocess --input "$RUN/docs.jsonl" --output-prefix "$RUN/docs" "${TOKENIZER[@]}" \
  --append-eod --workers "$(nproc)" > /dev/null
# Each conversation ends with the tokenizer's </s>, which the template never writes: packed
# conversations are kept apart at it.
build/trident preprocess --input "$RUN/chats.jsonl" --json-keys messages --apply-chat-template \
  --chat-template configs/chatml.jinja --append-eod --output-prefix "$RUN/chats" \
  "${TOKENIZER[@]}" --workers "$(nproc)" > /dev/null
build/trident tokenize --jsonl --apply-chat-template --render-only --add-generation-prompt \
  --chat-template configs/chatml.jinja --input "$RUN/heldout_prompts.jsonl" "${TOKENIZER[@]}" |
  /usr/bin/python3 -c 'import json, sys; [print(json.dumps({"prompt": json.loads(l)})) for l in sys.stdin]' \
    > "$RUN/heldout_prompts_rendered.jsonl"

((data_only)) && exit 0

MODEL=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --group-query-attention
  --num-query-groups 2 --seq-length 256
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
  --micro-batch-size 8 --global-batch-size 8 --log-interval 50)
# The held-out conversations are the validation split; packed as in training.
CHATS=(--data-path "$RUN/chats_messages_document" --split "$split" --sft --pack-documents
  --reset-attention-mask --reset-position-ids --eod-mask-loss --eval-iters 3)

echo "== base: pretraining on the docstrings (exported as a HuggingFace Llama directory)"
build/trident train "${MODEL[@]}" "${TOKENIZER[@]}" --data-path "$RUN/docs_text_document" \
  --split 98,2,0 --train-iters 400 --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine \
  --lr-warmup-iters 20 --weight-decay 0.1 --clip-grad 1.0 --eval-iters 2 \
  --save-hf "$RUN/base_hf" | grep -E "iteration +(200|400)/|validation loss at"

replies() {  # greedy replies of HF directory $1 to the held-out questions
  build/trident generate --load-hf "$1" "${TOKENIZER[@]}" \
    --prompt-file "$RUN/heldout_prompts_rendered.jsonl" --greedy --tokens-to-generate 48 \
    --stop '<|im_end|>' --json 2>/dev/null |
    /usr/bin/python3 -c '
import json, sys
for prompt, reply in zip(open(sys.argv[1]), sys.stdin):
    question = json.loads(prompt)["prompt"].split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
    answer = json.dumps(json.loads(reply)["text"], ensure_ascii=False)  # newlines shown as \n
    print(f"  Q: {question}\n  A: {answer[:160]}")' \
      "$RUN/heldout_prompts_rendered.jsonl"
}
heldout_loss() {  # the mean loss of HF directory $1 on the held-out conversations' answers
  build/trident train "${MODEL[@]}" "${TOKENIZER[@]}" "${CHATS[@]}" --load-hf "$1" \
    --skip-train --train-iters 1 | sed -n 's/.*validation loss at iteration.*| lm loss value: \([^ ]*\) .*/\1/p'
}
SFT=(--train-iters 150 --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1
  --clip-grad 1.0)

echo "== before: the base model"
echo "held-out answers' loss: $(heldout_loss "$RUN/base_hf")"
replies "$RUN/base_hf"

echo "== SFT: every weight, on the training conversations' assistant tokens"
build/trident train "${MODEL[@]}" "${TOKENIZER[@]}" "${CHATS[@]}" --load-hf "$RUN/base_hf" \
  "${SFT[@]}" --lr 1e-3 --min-lr 1e-4 --save-hf "$RUN/sft_hf" "$@" |
  grep -E "iteration +(50|100|150)/|parameters|validation loss at"

echo "== LoRA: rank-16 adapters on every linear, the base frozen"
build/trident train "${MODEL[@]}" "${TOKENIZER[@]}" "${CHATS[@]}" --load-hf "$RUN/base_hf" \
  "${SFT[@]}" --lr 2e-3 --min-lr 2e-4 --lora-rank 16 --lora-alpha 32 --save "$RUN/lora" \
  --save-interval 150 --save-hf "$RUN/lora_hf" "$@" |
  grep -E "iteration +(50|100|150)/|lora|validation loss at"

echo "== after"
echo "held-out answers' loss: SFT $(heldout_loss "$RUN/sft_hf"), LoRA $(heldout_loss "$RUN/lora_hf") (base: see above)"
echo "SFT:"
replies "$RUN/sft_hf"
echo "LoRA (merged):"
replies "$RUN/lora_hf"
echo "checkpoint sizes: LoRA adapters $(du -sh "$RUN/lora" | cut -f1), merged model $(du -sh "$RUN/lora_hf" | cut -f1)"
