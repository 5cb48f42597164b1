#pragma once
// The decoders of a tokenizer.json ("decoder"), as HF `tokenizers` defines them: ByteLevel,
// Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence. Each rewrites the list of token
// strings; the decoded text is the final list joined.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trident::tokenizer {

class HfDecoder {
 public:
  virtual ~HfDecoder() = default;
  // Rewrites the tokens. `alone`: the tokens are decoded one at a time, each as a token
  // inside a sequence (none is first, and <0xXX> bytes stay raw bytes even when not UTF-8),
  // so the pieces concatenate to a stream's text.
  virtual void decode_chain(std::vector<std::string>* tokens, bool alone) const = 0;
};

// nullptr for JSON null (tokens joined with spaces, as HF). Throws std::runtime_error naming a
// type trident does not implement, or a malformed field.
std::unique_ptr<HfDecoder> parse_decoder(const nlohmann::json& j);

}  // namespace trident::tokenizer
