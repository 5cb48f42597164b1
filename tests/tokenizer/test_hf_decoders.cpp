// tokenizer.json decoders on token lists worked by hand from HF's definitions.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/hf_decoders.h"

namespace trident::tokenizer {
namespace {

std::string decoded(const nlohmann::json& spec, std::vector<std::string> tokens,
                    bool alone = false) {
  parse_decoder(spec)->decode_chain(&tokens, alone);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

const std::string kSp = "\xe2\x96\x81";  // ▁

TEST(HfDecoders, ByteLevelBackToBytes) {
  EXPECT_EQ(decoded({{"type", "ByteLevel"}}, {"Hi", "\xc4\xa0you", "\xc4\x8a", "<|x|>"}),
            "Hi you\n<|x|>");
}

TEST(HfDecoders, ByteFallbackInvalidBytesAreOneReplacementEach) {
  const nlohmann::json fb = {{"type", "ByteFallback"}};
  EXPECT_EQ(decoded(fb, {"a", "<0xC3>", "<0xA9>", "b"}),
            "a\xc3\xa9"
            "b");
  EXPECT_EQ(decoded(fb, {"<0xC3>", "<0x41>"}), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(decoded(fb, {"<0xC3>"}, true), "\xc3");  // a stream's piece keeps its raw byte
}

TEST(HfDecoders, SentencePieceChainAndMetaspace) {
  const nlohmann::json chain = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", kSp}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(decoded(chain, {kSp + "Hello", kSp + "wor", "ld"}), "Hello world");
  const nlohmann::json meta = {
      {"type", "Metaspace"}, {"replacement", kSp}, {"prepend_scheme", "always"}};
  EXPECT_EQ(decoded(meta, {kSp + "Hello", kSp + "world"}), "Hello world");
  EXPECT_EQ(decoded(meta, {kSp + "world"}, true), " world");
}

TEST(HfDecoders, UnknownIsNamed) {
  try {
    parse_decoder({{"type", "CTC"}});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'CTC'"), std::string::npos);
  }
}

// A negative or fractional count, or one past the integers (1e30), is refused, not converted.
TEST(HfDecoders, StripCountsMustBeNonNegativeIntegers) {
  for (const nlohmann::json& start :
       {nlohmann::json(-1), nlohmann::json(1e30), nlohmann::json(0.5)})
    EXPECT_THROW(parse_decoder({{"type", "Strip"}, {"content", " "}, {"start", start}}),
                 std::runtime_error);
  EXPECT_NE(parse_decoder({{"type", "Strip"}, {"content", " "}, {"start", 1}}), nullptr);
}

}  // namespace
}  // namespace trident::tokenizer
