// Arbitrary bytes as a HuggingFace tokenizer.json: a malformed file is refused with
// FormatError; a file that is read encodes a few hard strings to ids inside its vocabulary
// (or refuses one with FormatError, a regex past PCRE2's limits) and decodes them to valid
// UTF-8.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"
#include "fuzz_util.h"
#include "tokenizer/huggingface_tokenizer.h"
#include "tokenizer/unicode_classes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident::tokenizer;
  std::unique_ptr<HuggingFaceTokenizer> tok;
  try {
    tok = HuggingFaceTokenizer::from_json_text(
        std::string_view(reinterpret_cast<const char*>(data), size), "tokenizer.json");
  } catch (const trident::FormatError&) {
    return 0;
  }
  FUZZ_CHECK(tok->vocab_size() > 0 && tok->eod() >= 0 && tok->eod() < tok->vocab_size());
  FUZZ_CHECK(tok->bos() < tok->vocab_size());
  for (const char* text : {"", "Hello  world's 123 \n\n", "<|endoftext|> é 日本 🙂 \t x"}) {
    std::vector<int> ids;
    try {
      tok->encode(text, &ids);
    } catch (const trident::FormatError&) {
      continue;
    }
    for (int id : ids) FUZZ_CHECK(id >= 0 && id < tok->vocab_size());
    FUZZ_CHECK(is_valid_utf8(tok->decode(ids)));
    tok->decode_bytes(ids);
  }
  return 0;
}
