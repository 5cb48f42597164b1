#pragma once
// The tokenizer files of a HuggingFace GPT-2 directory, as transformers' GPT2Tokenizer reads
// them: vocab.json and merges.txt (GPT-2's encoder.json and vocab.bpe are these files under
// other names, copied byte for byte), tokenizer_config.json and special_tokens_map.json
// (<|endoftext|> is GPT-2's beginning, end and unknown token).
#include <string>

namespace trident::io {

// Writes the four files into dir (created if missing), each atomically.
void save_hf_gpt2_tokenizer(const std::string& dir, const std::string& vocab_file,
                            const std::string& merge_file, int model_max_length);

// A HuggingFace tokenizer (--tokenizer-type HuggingFaceTokenizer): its tokenizer.json and,
// when there is one beside it, tokenizer_config.json, copied byte for byte into dir.
void save_hf_tokenizer_json(const std::string& dir, const std::string& tokenizer_model);

}  // namespace trident::io
