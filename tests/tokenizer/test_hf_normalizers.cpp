// tokenizer.json normalizers on strings whose normal forms the Unicode standard fixes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/hf_normalizers.h"

namespace trident::tokenizer {
namespace {

std::string normalized(const nlohmann::json& spec, std::string text) {
  parse_normalizer(spec)->normalize(&text);
  return text;
}

TEST(HfNormalizers, UnicodeForms) {
  const std::string decomposed = "e\xcc\x81", composed = "\xc3\xa9";  // e + U+0301, é
  EXPECT_EQ(normalized({{"type", "NFC"}}, decomposed), composed);
  EXPECT_EQ(normalized({{"type", "NFD"}}, composed), decomposed);
  EXPECT_EQ(normalized({{"type", "NFKC"}}, "\xef\xac\x81"), "fi");  // U+FB01 ligature
  EXPECT_EQ(normalized({{"type", "NFC"}}, "\xef\xac\x81"), "\xef\xac\x81");
  EXPECT_EQ(normalized({{"type", "NFKD"}}, "\xc2\xbd"),
            "1\xe2\x81\x84"
            "2");  // ½ -> 1⁄2
}

TEST(HfNormalizers, LowercaseOneCharacterAtATime) {
  // İ lowercases to i + U+0307; a final Σ stays σ (no context, as Rust's char::to_lowercase).
  EXPECT_EQ(normalized({{"type", "Lowercase"}}, "\xc4\xb0X"), "i\xcc\x87x");
  EXPECT_EQ(normalized({{"type", "Lowercase"}}, "\xce\xa3\xce\xa3"), "\xcf\x83\xcf\x83");
}

TEST(HfNormalizers, StripPrependReplaceSequence) {
  EXPECT_EQ(normalized({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}},
                       " \t\xe3\x80\x80x \n"),
            "x \n");
  EXPECT_EQ(normalized({{"type", "Prepend"}, {"prepend", "_"}}, "x"), "_x");
  EXPECT_EQ(normalized({{"type", "Prepend"}, {"prepend", "_"}}, ""), "");
  EXPECT_EQ(
      normalized({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "_"}}, "a b  c"),
      "a_b__c");
  EXPECT_EQ(normalized({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}},
                       "a \t b"),
            "a b");
  EXPECT_EQ(normalized({{"type", "Sequence"},
                        {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}},
                       "caf\xc3\xa9"),
            "cafe");
}

TEST(HfNormalizers, NullIsNoneAndUnknownIsNamed) {
  EXPECT_EQ(parse_normalizer(nullptr), nullptr);
  try {
    parse_normalizer({{"type", "Precompiled"}});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'Precompiled'"), std::string::npos);
  }
}

}  // namespace
}  // namespace trident::tokenizer
