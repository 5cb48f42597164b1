#pragma once
// Supervised fine-tuning documents from a conversation: its tokens and a loss mask that
// counts only what the assistant says. The assistant's turn i is what the template adds
// between render(messages[:i], add_generation_prompt) and render(messages[:i+1]): the form
// the model generates it in at inference, after the prompt of the turns before it.
// Where the full render holds that form (most templates), the turn is a target there. Where
// it does not (the template rewrites earlier turns: Qwen3 drops their <think> blocks), the
// turn is trained in a document of its own, render(messages[:i+1]), and its rewritten form
// in the full render is context only.
#include <cstdint>
#include <string>
#include <vector>

#include "chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace trident::data {

struct MaskedDocument {
  std::vector<int> ids;
  std::vector<uint8_t> loss_mask;  // 1: the token is a target
};

// The documents of one conversation, the full render first; a std::runtime_error says why a
// conversation cannot be cut (a template error, a turn that is not a suffix of its prompt, a
// tokenizer that rewrites the text).
std::vector<MaskedDocument> chat_documents(const chat_template::ChatTemplate& t,
                                           const chat_template::ChatOptions& options,
                                           const nlohmann::ordered_json& messages,
                                           const tokenizer::Tokenizer& tok);

// Tokens of `text` with the byte offset where each starts; a std::runtime_error when the
// tokens' bytes do not spell the text (a normalizing tokenizer).
std::vector<int> encode_with_offsets(const std::string& text, const tokenizer::Tokenizer& tok,
                                     std::vector<size_t>* offsets);

}  // namespace trident::data
