#pragma once
// A tokenizer as llama.cpp reads it from GGUF (gguf-py's Keys.Tokenizer). Byte-level BPE
// ("gpt2": GPT-2's vocab.json/merges.txt, or a HuggingFace tokenizer.json whose model is BPE
// after a ByteLevel pre-tokenizer, as Llama 3 and Qwen) with its tokens in id order, their
// types (normal, control for special added tokens, user-defined for other added ones, unused
// for ids the model has beyond the tokenizer's), the merges, the pre-tokenizer llama.cpp
// implements for its regex (tokenizer.ggml.pre: gpt-2, llama-bpe, qwen2), the BOS/EOS/padding
// ids, whether BOS is added (the tokenizer's post-processor or tokenizer_config.json), and
// the chat template when the tokenizer has one. Or a SentencePiece model ("llama": pieces,
// scores, types, the unknown id, its space prefix); BOS is not added, as trident adds none.
#include <string>
#include <vector>

#include "deploy/gguf_file.h"
#include "tokenizer/build_tokenizer.h"

namespace trident::deploy {

// The tokenizer.* keys into w for a model of `model_vocab` ids; FormatError naming the rule
// when llama.cpp has no tokenizer for it (SentencePiece, another pre-tokenizer) or it has
// more ids than the model. Returns notes for the log.
std::vector<std::string> add_vocabulary(GgufWriter& w, const tokenizer::TokenizerOptions& t,
                                        int model_vocab);

// llama.cpp's pre-tokenizer name for a HuggingFace pre_tokenizer (tokenizer.json), or "".
std::string llama_cpp_pre_tokenizer(const std::string& pre_tokenizer_json);

}  // namespace trident::deploy
