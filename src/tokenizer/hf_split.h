#pragma once
// How HF `tokenizers` cuts a string at a pattern's matches (SplitDelimiterBehavior): the
// matches and the text between them are pieces; the behaviour removes the matches, keeps
// them alone, or joins them to the piece before or after, or joins runs of them.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace trident::tokenizer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Throws std::runtime_error naming `name` when it is none of HF's five behaviours.
SplitBehavior parse_split_behavior(const std::string& name);

// A range of the string and whether the pattern matched it.
struct SplitSpan {
  size_t begin, end;
  bool is_match;
};

// Every byte of a string of `length` bytes in order, as matches and the ranges between them
// (HF's find_matches); `matches` are sorted and non-overlapping (an empty one cuts the text).
std::vector<SplitSpan> spans_from_matches(size_t length,
                                          const std::vector<std::pair<size_t, size_t>>& matches,
                                          bool invert);

// The pieces (byte ranges) the behaviour makes of the spans, empty ones dropped.
std::vector<std::pair<size_t, size_t>> apply_split_behavior(const std::vector<SplitSpan>& spans,
                                                            SplitBehavior behavior);

// Each code point of valid UTF-8 `text` for which `predicate` holds is a match of its own
// (HF's patterns given as a function of one character).
template <class Predicate>
std::vector<std::pair<size_t, size_t>> char_matches(std::string_view text, Predicate predicate);

}  // namespace trident::tokenizer

#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

template <class Predicate>
std::vector<std::pair<size_t, size_t>> char_matches(std::string_view text, Predicate predicate) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    int n = decode_utf8(text, i, &cp);
    if (n <= 0) n = 1;
    if (predicate(cp)) matches.emplace_back(i, i + n);
    i += n;
  }
  return matches;
}

}  // namespace trident::tokenizer
