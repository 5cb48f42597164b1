// GPT-2's pre-tokenizer and byte-level BPE on arbitrary bytes (the encoder is documented
// for valid UTF-8; anything else must still not crash). Byte-level BPE loses nothing: the
// pieces tile the input, and decoding the ids gives the input back, byte for byte.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode_classes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident::tokenizer;
  static GPT2Tokenizer tok(trident::fuzz::gpt2_file("encoder.json"),
                           trident::fuzz::gpt2_file("vocab.bpe"));
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = is_valid_utf8(text);
  for (bool js_whitespace : {false, true}) {
    std::vector<Piece> pieces;
    pretokenize(text, js_whitespace, &pieces);
    size_t at = 0;
    for (const Piece& p : pieces) {
      FUZZ_CHECK(p.begin == at && p.end > p.begin);
      at = p.end;
    }
    FUZZ_CHECK(at == text.size());
    tok.set_js_whitespace(js_whitespace);
    std::vector<int> ids = tok.encode(text);
    for (int id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
    FUZZ_CHECK(tok.decode_bytes(ids) == text);
    const std::string decoded = tok.decode(ids);
    FUZZ_CHECK(is_valid_utf8(decoded));
    if (valid) FUZZ_CHECK(decoded == text);
  }
  return 0;
}
