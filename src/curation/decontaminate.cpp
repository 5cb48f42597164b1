#include "curation/decontaminate.h"

#include <unicode/uchar.h>
#include <xxhash.h>

#include <algorithm>

#include "curation/words.h"
#include "tokenizer/unicode_classes.h"

namespace trident::curation {

std::vector<Word> task_words(std::string_view text) {
  const auto& classes = tokenizer::UnicodeClasses::instance();
  std::vector<Word> words;
  std::string lower;
  size_t i = 0;
  bool in_word = false;
  Word w;
  while (i <= text.size()) {
    char32_t cp = 0;
    int len = 1;
    bool word_char = false;
    if (i < text.size()) {
      const unsigned char c = (unsigned char)text[i];
      if (c < 0x80) {
        cp = c;
        word_char =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      } else {
        len = tokenizer::decode_utf8(text, i, &cp);
        if (len == 0) len = 1, cp = 0xFFFD;
        word_char = (classes.of(cp) & (tokenizer::kLetter | tokenizer::kNumber)) != 0;
      }
    }
    if (word_char) {
      if (!in_word) in_word = true, w.begin = i, lower.clear();
      if (cp < 0x80)
        lower.push_back(cp >= 'A' && cp <= 'Z' ? (char)(cp - 'A' + 'a') : (char)cp);
      else
        tokenizer::append_utf8((char32_t)u_tolower((UChar32)cp), &lower);
    } else if (in_word) {
      in_word = false;
      w.end = i;
      w.hash = XXH3_64bits(lower.data(), lower.size());
      words.push_back(w);
    }
    i += len;
  }
  return words;
}

void NgramIndex::add_text(std::string_view text) {
  std::vector<Word> words = task_words(text);
  if ((int)words.size() < n_) return;
  std::vector<std::uint64_t> h(words.size());
  for (size_t i = 0; i < words.size(); ++i) h[i] = words[i].hash;
  for (size_t i = 0; i + n_ <= h.size(); ++i) {
    set_.insert(ngram_hash(h.data() + i, n_));
    const std::uint64_t bit = h[i] & (kStartBits - 1);
    starts_[bit / 64] |= 1ULL << (bit % 64);
  }
}

Decontaminated decontaminate(std::string_view text, const NgramIndex& index,
                             const DecontaminationRules& rules) {
  Decontaminated r;
  const int n = index.n();
  std::vector<Word> words = task_words(text);
  if ((int)words.size() < n || index.size() == 0) return r;
  std::vector<std::uint64_t> h(words.size());
  for (size_t i = 0; i < words.size(); ++i) h[i] = words[i].hash;
  std::vector<std::pair<size_t, size_t>> spans;  // matched byte ranges
  // Positions whose first word starts no task n-gram are skipped: they could match only
  // through a 64-bit collision of n-gram hashes, which would be a false match anyway.
  for (size_t i = 0; i + n <= h.size(); ++i)
    if (index.may_start(h[i]) && index.contains(ngram_hash(h.data() + i, n))) {
      spans.emplace_back(words[i].begin, words[i + n - 1].end);
      if (r.matches.size() < 5)
        r.matches.emplace_back(text.substr(words[i].begin, words[i + n - 1].end - words[i].begin));
    }
  if (spans.empty()) return r;
  r.matched = true;
  // Code point index of every byte offset (the rules count characters, not bytes).
  std::vector<long> char_at(text.size() + 1);
  std::vector<size_t> byte_of;  // code point index -> byte offset
  long chars = 0;
  for (size_t b = 0; b < text.size(); ++b) {
    char_at[b] = chars;
    if (((unsigned char)text[b] & 0xC0) != 0x80) byte_of.push_back(b), ++chars;
  }
  char_at[text.size()] = chars;
  byte_of.push_back(text.size());
  // Removed intervals in characters, merged.
  std::vector<std::pair<long, long>> cut;
  for (auto [b, e] : spans) {
    long lo = std::max(0L, char_at[b] - rules.context_chars);
    long hi = std::min(chars, char_at[e] + rules.context_chars);
    if (!cut.empty() && lo <= cut.back().second)
      cut.back().second = std::max(cut.back().second, hi);
    else
      cut.emplace_back(lo, hi);
  }
  std::vector<std::pair<long, long>> pieces;
  long at = 0;
  for (auto [lo, hi] : cut) {
    if (lo > at) pieces.emplace_back(at, lo);
    at = hi;
  }
  if (at < chars) pieces.emplace_back(at, chars);
  r.pieces_before_drop = (int)pieces.size();
  if ((int)pieces.size() > rules.max_pieces) {
    r.dropped = true;
    return r;
  }
  for (auto [lo, hi] : pieces)
    if (hi - lo >= rules.min_piece_chars)
      r.pieces.emplace_back(text.substr(byte_of[lo], byte_of[hi] - byte_of[lo]));
  r.dropped = r.pieces.empty();
  return r;
}

}  // namespace trident::curation
