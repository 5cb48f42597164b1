// append_utf8, the one UTF-8 encoder (tokenizer, evaluation and curation use it), checked
// against glibc's iconv over every Unicode scalar value, against byte sequences written out by
// hand at each length boundary, and against decode_utf8 (the strict decoder) for round trips.
#include <gtest/gtest.h>
#include <iconv.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {
namespace {

std::string encode(char32_t cp) {
  std::string s;
  append_utf8(cp, &s);
  return s;
}

// iconv's UTF-8 for the code points given (UTF-32LE in, so no byte-order mark either way).
std::string iconv_utf8(const std::vector<char32_t>& cps) {
  std::string in;
  for (char32_t cp : cps)
    for (int k = 0; k < 4; ++k) in.push_back((char)((cp >> (8 * k)) & 0xff));
  std::string out(in.size(), '\0');  // UTF-8 never takes more bytes than UTF-32
  iconv_t cd = iconv_open("UTF-8", "UTF-32LE");
  EXPECT_NE(cd, (iconv_t)-1);
  char* src = in.data();
  char* dst = out.data();
  size_t src_left = in.size(), dst_left = out.size();
  EXPECT_NE(iconv(cd, &src, &src_left, &dst, &dst_left), (size_t)-1);
  EXPECT_EQ(src_left, 0u);
  iconv_close(cd);
  out.resize(out.size() - dst_left);
  return out;
}

TEST(AppendUtf8, MatchesHandWrittenSequencesAtEveryLengthBoundary) {
  const std::vector<std::pair<char32_t, std::string>> known = {
      {0x0, std::string(1, '\0')},
      {0x41, "A"},
      {0x7f, "\x7f"},
      {0x80, "\xc2\x80"},
      {0xe9, "\xc3\xa9"},
      {0x7ff, "\xdf\xbf"},
      {0x800, "\xe0\xa0\x80"},
      {0x20ac, "\xe2\x82\xac"},
      {0xd7ff, "\xed\x9f\xbf"},
      {0xe000, "\xee\x80\x80"},
      {0xfffd, "\xef\xbf\xbd"},
      {0xffff, "\xef\xbf\xbf"},
      {0x10000, "\xf0\x90\x80\x80"},
      {0x1f600, "\xf0\x9f\x98\x80"},
      {0x10ffff, "\xf4\x8f\xbf\xbf"},
  };
  for (const auto& [cp, bytes] : known)
    EXPECT_EQ(encode(cp), bytes) << std::hex << (unsigned long)cp;
}

TEST(AppendUtf8, MatchesIconvOnEveryScalarValue) {
  std::vector<char32_t> cps;
  std::string ours;
  for (char32_t cp = 0; cp <= 0x10ffff; ++cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;  // surrogates are no scalar values
    cps.push_back(cp);
    append_utf8(cp, &ours);
  }
  const std::string theirs = iconv_utf8(cps);
  ASSERT_EQ(ours.size(), theirs.size());
  EXPECT_EQ(std::mismatch(ours.begin(), ours.end(), theirs.begin()).first - ours.begin(),
            (long)ours.size())
      << "first differing byte";
}

TEST(AppendUtf8, DecodesBackToTheSameCodePoint) {
  for (char32_t cp = 0; cp <= 0x10ffff; ++cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const std::string s = encode(cp);
    char32_t back = 0;
    ASSERT_EQ(decode_utf8(s, 0, &back), (int)s.size()) << std::hex << (unsigned long)cp;
    ASSERT_EQ((unsigned long)back, (unsigned long)cp);
    ASSERT_EQ(s.size(), cp < 0x80 ? 1u : cp < 0x800 ? 2u : cp < 0x10000 ? 3u : 4u);
  }
}

// Text read leniently (evaluation's decoder takes a lone surrogate or a 4-byte form past
// U+10FFFF as a code point) must go back out as the bytes it came from; the strict decoder
// refuses them.
TEST(AppendUtf8, WritesSurrogatesAndValuesPastTheLastCodePointWithTheSameLayout) {
  char32_t cp = 0;
  EXPECT_EQ(encode(0xd800), "\xed\xa0\x80");
  EXPECT_EQ(encode(0xdfff), "\xed\xbf\xbf");
  EXPECT_EQ(decode_utf8(encode(0xd800), 0, &cp), 0);
  EXPECT_EQ(encode(0x110000), "\xf4\x90\x80\x80");
  EXPECT_EQ(encode(0x1fffff), "\xf7\xbf\xbf\xbf");
  EXPECT_EQ(decode_utf8(encode(0x110000), 0, &cp), 0);
}

TEST(AppendUtf8, Appends) {
  std::string s = "a";
  append_utf8(0xe9, &s);
  append_utf8(0x1f600, &s);
  EXPECT_EQ(s, "a\xc3\xa9\xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace trident::tokenizer
