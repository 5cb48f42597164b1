// The Llama 3 / Qwen split scanner against PCRE2 running the same pattern (the reference: HF's
// parity tests pass on the PCRE2 path): identical matches on hard strings, on the KJV, on
// every code point after each kind of neighbour, and on random mixed-script / emoji /
// whitespace strings; other patterns keep PCRE2.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/hf_regex.h"
#include "tokenizer/hf_split_scanner.h"
#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {
namespace {

using Matches = std::vector<std::pair<size_t, size_t>>;

Matches pcre2_matches(const HfRegex& re, const std::string& text) {
  Matches m;
  re.find_all(text, &m);
  return m;
}

Matches scanner_matches(const HfSplitScanner& s, const std::string& text) {
  Matches m;
  s.find_all(text, &m);
  return m;
}

std::string utf8(std::u32string_view cps) {
  std::string out;
  for (char32_t c : cps) append_utf8(c, &out);
  return out;
}

struct Both {
  std::string pattern;
  HfRegex pcre2;
  std::unique_ptr<HfSplitScanner> scanner;
  explicit Both(std::string_view p)
      : pattern(p), pcre2(std::string(p), false), scanner(HfSplitScanner::for_pattern(pattern)) {}
  void expect_same(const std::string& text) const {
    ASSERT_EQ(scanner_matches(*scanner, text), pcre2_matches(pcre2, text))
        << "pattern " << pattern << "\ntext '" << text << "'";
  }
};

std::vector<Both> both_patterns() {
  std::vector<Both> out;
  out.emplace_back(kLlama3SplitPattern);
  out.emplace_back(kQwenSplitPattern);
  return out;
}

// The hard strings of tests/reference/hf_reference.py, and the cases each alternative's
// backtracking decides (contractions in every case, ſ, newlines inside space runs).
const std::vector<std::string> kHardStrings = {
    "",
    " ",
    "  ",
    "\n",
    "\n\n\n",
    "\t\t x",
    "a  b   c    d",
    "trailing spaces   ",
    "   leading spaces",
    "\r\n windows\r\nlines\r\n",
    "emoji 🙂🙃 👩‍👩‍👧‍👦 flags 🇫🇷🇩🇪 ✓",
    "CJK 日本語のテキストと中文文本，한국어 텍스트",
    "combining e\u0301 a\u0300 n\u0303 \u0915\u093f",
    "ﬁ ligature Ｆｕｌｌｗｉｄｔｈ ①②③ ½ ™ Å Ω",
    "İstanbul ΣΊΣΥΦΟΣ straße ǅ",
    "numbers 1234567890 3.14159 1,000,000 ٠١٢٣ ١٢٣",
    "don't I'll we've they're she'd It's DON'T",
    "special <|endoftext|> inside<|endoftext|>text <|im_start|>user\nhi<|im_end|>",
    "code:\tif (x) {\n    y++;\n}",
    "mixed\u00a0nbsp\u2009thin\u3000ideographic\u2028line\u2029para"
    "\u0085nel",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    std::string("\0nul and \x01 control \x7f", sizeof("\0nul and \x01 control \x7f") - 1),
    "Ünïcödé ß straße café naïve",
    "$$$ ... !!! ??? ((())) --- ___ *** ###",
    "  \n  \n\t\n ",
    "العربية نص عربي",
    "עברית",
    "Ελληνικά κείμενο",
    "русский текст Ёё",
    "ไทย ภาษา",
    "'S 'T 'RE 'Ve 'lL 'M 'D 'ſ 'ſam 'x 're 'r 'l ' '",
    "a'\n'll\n",
    "x \r\n\r\n  y",
    "1234567 12 ٣٤٥٦ ⅫⅫⅫⅫ ²³¹",
    " ...\n\n\r x",
    "\u180e\u180e x\u180ey",
    "!!\r\n\r\n\n  ",
    "tab\tword\u3000word\u00a0word",
    "\v\f x\v\fy",
    "\u2028x \u2029 y"};

TEST(HfSplitScanner, OnlyTheTwoPatternsExactly) {
  EXPECT_NE(HfSplitScanner::for_pattern(std::string(kLlama3SplitPattern)), nullptr);
  EXPECT_NE(HfSplitScanner::for_pattern(std::string(kQwenSplitPattern)), nullptr);
  EXPECT_EQ(HfSplitScanner::for_pattern(std::string(kLlama3SplitPattern) + "|x"), nullptr);
  EXPECT_EQ(HfSplitScanner::for_pattern(R"(\p{L}+)"), nullptr);
}

TEST(HfSplitScanner, SplitsAsThePatternSays) {
  // Written out from the pattern's alternatives, independently of either engine.
  const HfSplitScanner llama(3);
  std::vector<std::string> pieces;
  const std::string text = "I'LL pay 12345 ſ's  \n\n x!!\n";
  for (auto [b, e] : scanner_matches(llama, text)) pieces.push_back(text.substr(b, e - b));
  EXPECT_EQ(pieces, (std::vector<std::string>{"I", "'LL", " pay", " ", "123", "45", " ſ", "'s",
                                              "  \n\n", " x", "!!\n"}));
}

TEST(HfSplitScanner, HardStringsEqualPcre2) {
  for (const Both& b : both_patterns())
    for (const std::string& s : kHardStrings) b.expect_same(s);
}

TEST(HfSplitScanner, KjvEqualsPcre2) {
  std::ifstream in(TRIDENT_SOURCE_DIR "/data/kjv/kjv.jsonl");
  if (!in) GTEST_SKIP() << "data/kjv/kjv.jsonl is missing (scripts/setup.sh writes it)";
  const std::string kjv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const Both& b : both_patterns()) b.expect_same(kjv.substr(0, 1 << 20));
}

// Every code point (surrogates aside) between each kind of neighbour: the class tables agree
// with PCRE2 everywhere, not only on the characters picked below.
TEST(HfSplitScanner, EveryCodePointEqualsPcre2) {
  const std::u32string contexts[] = {U"a", U" ", U"1", U"'", U"\n", U"!"};
  for (const Both& b : both_patterns()) {
    for (const std::u32string& ctx : contexts) {
      std::string text;
      for (char32_t cp = 0; cp < 0x110000; ++cp) {
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        text += utf8(ctx + cp + cp + ctx);
      }
      b.expect_same(text);
    }
  }
}

// Random strings over the characters each alternative tells apart, and any code point.
TEST(HfSplitScanner, RandomMixedStringsEqualPcre2) {
  const std::u32string alphabet =
      U"aAsStTrReEvVlLmMdDxz'''    \t\n\n\r\v\f0123456789.,!?-_()<>|\"$"
      U"\u00a0\u0085\u1680\u180e\u2000\u2009\u200a\u200b\u200d\u2028\u2029\u202f\u205f\u3000"
      U"\ufeff\u017f\u212a\u00e9\u0301\u0300\u0915\u093f\u65e5\u672c\u8a9e\u3042\ud55c\u0627"
      U"\u0661\u0663\u216b\u00b2\u00bd\u2460\U0001F642\U0001F44D\U0001F3FD\U0001F1EB\u2713"
      U"\u0130\u0131\u03a3\u00df\u01c5\ufb01\uff26\ufffd\u0000\u0e44\u05e2";
  std::mt19937 rng(30);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1), length(0, 40);
  std::uniform_int_distribution<char32_t> any(0, 0x10ffff);
  for (const Both& b : both_patterns()) {
    for (int n = 0; n < 20000; ++n) {
      std::u32string cps;
      for (size_t k = length(rng); k > 0; --k) {
        char32_t c = rng() % 8 ? alphabet[pick(rng)] : any(rng);
        if (c >= 0xd800 && c <= 0xdfff) c = U'?';
        cps += c;
      }
      b.expect_same(utf8(cps));
    }
  }
}

TEST(HfSplitScanner, InvalidUtf8IsNotReadPastItsEnd) {
  const HfSplitScanner s(3);
  for (const std::string text : {"\xff", "a\xe2\x82", "\xf4\x90\x80\x80 x", "\xc0\x80'", "'\xe2"}) {
    const Matches m = scanner_matches(s, text);
    size_t at = 0;
    for (auto [b, e] : m) {
      EXPECT_TRUE(b == at && e > b);
      at = e;
    }
    EXPECT_EQ(at, text.size());
  }
}

}  // namespace
}  // namespace trident::tokenizer
