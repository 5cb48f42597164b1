#include "curation/langid.h"

#include <algorithm>
#include <cmath>
// CLD2's public header uses FILE without including <cstdio>.
#include <cstdio>
// clang-format off
#include <cld2/public/compact_lang_det.h>
#include <cld2/internal/lang_script.h>
// clang-format on

namespace trident::curation {

namespace {

constexpr int kWindows = 16;
constexpr size_t kMinWindow = 64;

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t';
}
bool is_continuation(char c) {
  return ((unsigned char)c & 0xC0) == 0x80;
}

// [a, b) shrunk to whole words: it starts after a space and ends before one. A window with
// no space in it (CJK, one long token) is shrunk to whole UTF-8 characters instead.
std::string_view whole_words(std::string_view t, size_t a, size_t b) {
  size_t s = a, e = b;
  if (a > 0)
    while (s < b && !is_space(t[s - 1])) ++s;
  if (b < t.size())
    while (e > s && !is_space(t[e])) --e;
  if (s >= e) {
    s = a, e = b;
    while (s < e && is_continuation(t[s])) ++s;
    while (e > s && e < t.size() && is_continuation(t[e])) --e;
  }
  return t.substr(s, e - s);
}

// Could the whole document's answer be on the other side of the filter's decision, given
// the sample's? Only if the shares it measured are off by kSampleMargin or more.
bool decisive(const LanguageGuess& g, const LanguageFilter& f) {
  if (!g.reliable) return false;
  if (f.wanted(g.code)) return std::abs(g.confidence - f.threshold) >= kSampleMargin;
  // Kept instead needs a wanted language at >= threshold and above this one's share.
  return g.confidence >= std::min(1 - f.threshold, 0.5) + kSampleMargin;
}

}  // namespace

bool LanguageFilter::wanted(const std::string& code) const {
  return std::find(langs.begin(), langs.end(), code) != langs.end();
}

LanguageGuess identify_language(std::string_view text) {
  CLD2::Language language3[3];
  int percent3[3];
  int text_bytes = 0;
  bool reliable = false;
  CLD2::ExtDetectLanguageSummary(text.data(), (int)text.size(), /*is_plain_text=*/true, language3,
                                 percent3, &text_bytes, &reliable);
  LanguageGuess g;
  g.code = CLD2::LanguageCode(language3[0]);
  g.confidence = text_bytes > 0 ? percent3[0] / 100.0 : 0.0;
  g.reliable = reliable;
  return g;
}

LanguageGuess identify_language(std::string_view text, const LanguageFilter& filter,
                                size_t sample_bytes) {
  if (sample_bytes == 0 || text.size() <= sample_bytes) return identify_language(text);
  LanguageGuess g = identify_language(spread_sample(text, sample_bytes));
  return decisive(g, filter) ? g : identify_language(text);
}

std::string spread_sample(std::string_view text, size_t budget) {
  if (text.size() <= budget) return std::string(text);
  const int k = (int)std::clamp<size_t>(budget / kMinWindow, 1, kWindows);
  const size_t w = budget / k - (k > 1);  // room for the newlines
  std::string out;
  out.reserve(budget);
  for (int i = 0; i < k; ++i) {
    const size_t a = k > 1 ? (text.size() - w) * i / (k - 1) : 0;
    std::string_view piece = whole_words(text, a, a + w);
    if (piece.empty()) continue;
    if (!out.empty()) out.push_back('\n');
    out.append(piece);
  }
  return out;
}

}  // namespace trident::curation
