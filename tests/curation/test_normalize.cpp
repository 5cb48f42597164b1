// normalize_text: its rules (NFC, control characters, whitespace) on hand-made strings, and its
// ASCII fast path against the plain per-code-point loop it replaced (kept here as the
// reference), on real text and on random strings of the characters its rules single out.
#include <gtest/gtest.h>
#include <unicode/normalizer2.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "curation/normalize.h"
#include "tokenizer/unicode_classes.h"

using namespace trident;
using namespace trident::curation;
namespace fs = std::filesystem;

namespace {

std::string reference_normalize(std::string_view input) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
  std::string text;
  icu::StringByteSink<std::string> sink(&text);
  n->normalizeUTF8(0, icu::StringPiece(input.data(), (int32_t)input.size()), sink, nullptr, status);
  const auto& classes = tokenizer::UnicodeClasses::instance();
  std::string out;
  bool pending_space = false;
  int newlines = 0;
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp;
    const int len = tokenizer::decode_utf8(text, i, &cp);
    const size_t at = i;
    i += len;
    if (cp == '\r') {
      if (i < text.size() && text[i] == '\n') continue;
      cp = '\n';
    }
    if (cp == '\n') {
      ++newlines;
      pending_space = false;
      continue;
    }
    const bool control = cp < 0x20 ? cp != '\t' : (cp == 0x7F || (cp >= 0x80 && cp < 0xA0));
    if (control || cp == 0xFEFF) continue;
    if (cp == '\t' || (classes.of(cp) & tokenizer::kSpace)) {
      pending_space = true;
      continue;
    }
    if (!out.empty()) {
      if (newlines)
        out.append(newlines >= 2 ? "\n\n" : "\n");
      else if (pending_space)
        out.push_back(' ');
    }
    newlines = 0;
    pending_space = false;
    out.append(text, at, len);
  }
  return out;
}

void add_files(const fs::path& dir, std::vector<std::string>* docs) {
  if (!fs::is_directory(dir)) return;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().extension() == ".dat") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    if (tokenizer::is_valid_utf8(s.str())) docs->push_back(s.str());
  }
}

}  // namespace

TEST(CurationNormalize, NfcControlsAndWhitespace) {
  EXPECT_EQ(normalize_text("cafe\u0301"), "caf\u00e9");
  EXPECT_EQ(normalize_text("  a\t\tb \u00a0 c  \r\nd\x01\x7f e\n\n\n\nf  "), "a b c\nd e\n\nf");
  EXPECT_EQ(normalize_text("\xef\xbb\xbfx\xc2\x85y"), "xy");  // BOM and C1 NEL removed
  EXPECT_EQ(count_chars("caf\u00e9"), 4);
}

TEST(CurationNormalize, FastPathEqualsReference) {
  std::vector<std::string> docs;
  add_files("/usr/share/common-licenses", &docs);
  add_files("/usr/share/games/fortunes", &docs);
  ASSERT_GT(docs.size(), 10u);
  // Random strings over the characters the rules treat specially.
  const std::vector<std::string> palette = {
      "a",      "Z",      "7",          ".",      " ",        "  ",     "\t",
      "\n",     "\r",     "\r\n",       "\v",     "\f",       "\x01",   "\x1f",
      "\x7f",   "\u00a0", "\u0085",     "\u2028", "\u3000",   "\ufeff", "e\u0301",
      "\u00e9", "\u65e5", "\U0001F600", "word",   "two words"};
  std::mt19937 rng(7);
  for (int d = 0; d < 20000; ++d) {
    std::string s;
    const int n = (int)(rng() % 40);
    for (int k = 0; k < n; ++k) s += palette[rng() % palette.size()];
    docs.push_back(s);
  }
  int different = 0;
  for (const std::string& d : docs)
    if (curation::normalize_text(d) != reference_normalize(d) && ++different <= 5)
      ADD_FAILURE() << "differs on \"" << d.substr(0, 60) << "\"";
  EXPECT_EQ(different, 0) << "of " << docs.size();
}
