#include "tokenizer/hf_added_tokens.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "tokenizer/hf_chars.h"
#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

namespace {

// Rust regex's Unicode \w, which HF's single_word test uses.
bool is_word_char(char32_t c) {
  const int32_t mask = U_GET_GC_MASK((UChar32)c);
  return u_isUAlphabetic((UChar32)c) || (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         c == 0x200c || c == 0x200d;
}

char32_t last_char(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && ((unsigned char)s[start] & 0xc0) == 0x80) --start;
  char32_t cp = 0;
  decode_utf8(s, start, &cp);
  return cp;
}

// The start of the whitespace run ending text[..end].
size_t whitespace_start(std::string_view text, size_t end) {
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && ((unsigned char)text[start] & 0xc0) == 0x80) --start;
    char32_t cp = 0;
    decode_utf8(text, start, &cp);
    if (!is_rust_whitespace(cp)) break;
    end = start;
  }
  return end;
}

// The end of the whitespace run starting at text[begin].
size_t whitespace_end(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    char32_t cp = 0;
    int n = std::max(decode_utf8(text, begin, &cp), 1);
    if (!is_rust_whitespace(cp)) break;
    begin += n;
  }
  return begin;
}

}  // namespace

int HfAddedTokens::assign_id(const std::string& content, const TokenIds& model_vocab) const {
  for (const HfAddedToken& t : tokens_)
    if (t.content == content) return t.id;
  auto it = model_vocab.find(content);
  if (it != model_vocab.end()) return it->second;
  const int size = (int)model_vocab.size();
  int max = -1;
  for (const HfAddedToken& t : tokens_) max = std::max(max, t.id);
  if (max < 0) return size;
  return max >= size || size == 0 ? max + 1 : size;
}

HfAddedTokens::HfAddedTokens(const nlohmann::json& added_tokens, const HfNormalizer* normalizer,
                             const TokenIds& model_vocab) {
  if (added_tokens.is_null()) return;
  if (!added_tokens.is_array()) throw std::runtime_error("added_tokens must be a list");
  for (const nlohmann::json& t : added_tokens) {
    HfAddedToken token;
    token.content = t.at("content").get<std::string>();
    token.single_word = t.value("single_word", false);
    token.lstrip = t.value("lstrip", false);
    token.rstrip = t.value("rstrip", false);
    token.normalized = t.value("normalized", true);
    token.special = t.value("special", false);
    if (token.content.empty()) continue;
    token.id = assign_id(token.content, model_vocab);
    auto same = std::find_if(tokens_.begin(), tokens_.end(),
                             [&](const HfAddedToken& o) { return o.content == token.content; });
    if (same != tokens_.end())
      *same = token;  // a later entry redefines the token
    else
      tokens_.push_back(token);
  }
  for (int i = 0; i < (int)tokens_.size(); ++i) {
    std::string& text = tokens_[i].text;
    text = tokens_[i].content;
    const bool normalized = tokens_[i].normalized;
    if (normalized && normalizer) normalizer->normalize(&text);
    if (text.empty()) continue;
    patterns_[normalized].push_back({text, i});
    first_byte_[normalized][(unsigned char)text[0]] = true;
  }
  for (int normalized : {0, 1}) {
    int count = 0;
    for (int b = 0; b < 256; ++b)
      if (first_byte_[normalized][b]) ++count, single_first_byte_[normalized] = b;
    if (count != 1) single_first_byte_[normalized] = -1;
  }
  for (auto& set : patterns_)
    std::stable_sort(set.begin(), set.end(), [](const Pattern& a, const Pattern& b) {
      return a.text.size() > b.text.size();
    });
}

size_t HfAddedTokens::next_candidate(std::string_view text, size_t at, bool normalized) const {
  // Added tokens mostly share their first byte ('<' of <|...|>): memchr finds it fast.
  if (single_first_byte_[normalized] >= 0) {
    const void* found = std::memchr(text.data() + at, single_first_byte_[normalized],
                                    text.size() - std::min(at, text.size()));
    return found ? (const char*)found - text.data() : text.size();
  }
  const std::array<bool, 256>& first = first_byte_[normalized];
  while (at < text.size() && !first[(unsigned char)text[at]]) ++at;
  return at;
}

int HfAddedTokens::match_at(std::string_view text, size_t at, bool normalized) const {
  if (!first_byte_[normalized][(unsigned char)text[at]]) return -1;
  for (const Pattern& p : patterns_[normalized])
    if (text.compare(at, p.text.size(), p.text) == 0 && at + p.text.size() <= text.size())
      return (int)(&p - patterns_[normalized].data());
  return -1;
}

void HfAddedTokens::split(std::string_view text, bool normalized,
                          std::vector<HfSegment>* segments) const {
  size_t done = 0;  // the end of the last segment emitted
  const std::array<bool, 256>& first = first_byte_[normalized];
  for (size_t at = 0; at < text.size();) {
    if (!first[(unsigned char)text[at]]) {
      at = next_candidate(text, at + 1, normalized);
      continue;
    }
    const int p = match_at(text, at, normalized);
    if (p < 0) {
      ++at;
      continue;
    }
    const Pattern& pattern = patterns_[normalized][p];
    const HfAddedToken& token = tokens_[pattern.token];
    size_t begin = at, end = at + pattern.text.size();
    at = end;  // a refused match is not retried inside itself (as Aho-Corasick's iterator)
    if (token.single_word) {
      const bool word_before = begin > 0 && is_word_char(last_char(text.substr(0, begin)));
      char32_t next = 0;
      const bool word_after =
          end < text.size() && decode_utf8(text, end, &next) > 0 && is_word_char(next);
      if (word_before || word_after) continue;
    }
    if (token.lstrip) begin = std::max(whitespace_start(text, begin), done);
    if (token.rstrip) end = whitespace_end(text, end);
    if (done < begin) segments->push_back({done, begin, -1});
    segments->push_back({begin, end, token.id});
    done = end;
    at = std::max(at, end);
  }
  if (done < text.size()) segments->push_back({done, text.size(), -1});
}

}  // namespace trident::tokenizer
