// tokenizer.json pre-tokenizers on short strings, their pieces worked out from HF's
// definitions: ByteLevel's alphabet and prefix space, Metaspace's prepend schemes, Digits,
// Whitespace, Punctuation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/hf_pre_tokenizers.h"

namespace trident::tokenizer {
namespace {

std::vector<std::string> pieces(const nlohmann::json& spec, const std::string& text,
                                bool at_start = true) {
  std::vector<HfPiece> p = {{text, at_start}};
  parse_pre_tokenizer(spec)->pre_tokenize(&p);
  std::vector<std::string> out;
  for (const HfPiece& x : p) out.push_back(x.text);
  return out;
}

using V = std::vector<std::string>;
const std::string kG = "\xc4\xa0";       // Ġ, GPT-2's character for the space byte
const std::string kSp = "\xe2\x96\x81";  // ▁

TEST(HfPreTokenizers, ByteLevelMapsBytesAndSplitsAsGpt2) {
  const nlohmann::json plain = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  EXPECT_EQ(pieces(plain, "Hi you"), (V{"Hi", kG + "you"}));
  EXPECT_EQ(pieces({{"type", "ByteLevel"}, {"add_prefix_space", true}}, "Hi"), (V{kG + "Hi"}));
  EXPECT_EQ(
      pieces({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}, "a b\n"),
      (V{"a" + kG + "b\xc4\x8a"}));  // \n is U+010A
}

TEST(HfPreTokenizers, MetaspacePrependSchemes) {
  auto meta = [](const char* scheme, bool split) {
    return nlohmann::json{
        {"type", "Metaspace"}, {"replacement", kSp}, {"prepend_scheme", scheme}, {"split", split}};
  };
  EXPECT_EQ(pieces(meta("always", true), "a b"), (V{kSp + "a", kSp + "b"}));
  EXPECT_EQ(pieces(meta("always", false), "a b"), (V{kSp + "a" + kSp + "b"}));
  EXPECT_EQ(pieces(meta("never", true), "a b"), (V{"a", kSp + "b"}));
  EXPECT_EQ(pieces(meta("first", true), "a", true), (V{kSp + "a"}));
  EXPECT_EQ(pieces(meta("first", true), "a", false), (V{"a"}));
}

TEST(HfPreTokenizers, DigitsWhitespacePunctuation) {
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", false}}, "a123b"),
            (V{"a", "123", "b"}));
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", true}}, "a12"), (V{"a", "1", "2"}));
  EXPECT_EQ(pieces({{"type", "Whitespace"}}, "Hey friend!  How?"),
            (V{"Hey", "friend", "!", "How", "?"}));
  EXPECT_EQ(pieces({{"type", "WhitespaceSplit"}}, "Hey friend!  How?"),
            (V{"Hey", "friend!", "How?"}));
  EXPECT_EQ(pieces({{"type", "Punctuation"}, {"behavior", "Isolated"}}, "a,b!!"),
            (V{"a", ",", "b", "!", "!"}));
}

TEST(HfPreTokenizers, UnknownIsNamed) {
  try {
    parse_pre_tokenizer({{"type", "UnicodeScripts"}});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'UnicodeScripts'"), std::string::npos);
  }
}

}  // namespace
}  // namespace trident::tokenizer
