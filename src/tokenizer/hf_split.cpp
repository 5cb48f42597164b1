#include "tokenizer/hf_split.h"

#include <algorithm>
#include <stdexcept>

namespace trident::tokenizer {

SplitBehavior parse_split_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw std::runtime_error("split behavior '" + name +
                           "' is not one of Removed, Isolated, MergedWithPrevious, "
                           "MergedWithNext, Contiguous");
}

std::vector<SplitSpan> spans_from_matches(size_t length,
                                          const std::vector<std::pair<size_t, size_t>>& matches,
                                          bool invert) {
  std::vector<SplitSpan> spans;
  if (length == 0) return {{0, 0, invert}};
  size_t previous = 0;
  for (const auto& [begin, end] : matches) {
    if (previous != begin) spans.push_back({previous, begin, invert});
    spans.push_back({begin, end, !invert});
    previous = end;
  }
  if (previous != length) spans.push_back({previous, length, invert});
  return spans;
}

namespace {

// MergedWithPrevious over spans in order; MergedWithNext is the same over the spans reversed,
// extending the piece's start instead of its end.
std::vector<SplitSpan> merge_matches_into_neighbour(std::vector<SplitSpan> spans, bool next) {
  if (next) std::reverse(spans.begin(), spans.end());
  std::vector<SplitSpan> out;
  bool previous_match = false;
  for (const SplitSpan& s : spans) {
    if (s.is_match && !previous_match && !out.empty()) {
      (next ? out.back().begin : out.back().end) = next ? s.begin : s.end;
    } else {
      out.push_back({s.begin, s.end, false});
    }
    previous_match = s.is_match;
  }
  if (next) std::reverse(out.begin(), out.end());
  return out;
}

std::vector<SplitSpan> contiguous(const std::vector<SplitSpan>& spans) {
  std::vector<SplitSpan> out;
  bool previous_match = false;
  for (const SplitSpan& s : spans) {
    if (s.is_match == previous_match && !out.empty())
      out.back().end = s.end;
    else
      out.push_back({s.begin, s.end, false});
    previous_match = s.is_match;
  }
  return out;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> apply_split_behavior(const std::vector<SplitSpan>& spans,
                                                            SplitBehavior behavior) {
  std::vector<SplitSpan> kept;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const SplitSpan& s : spans)
        if (!s.is_match) kept.push_back(s);
      break;
    case SplitBehavior::kIsolated:
      kept = spans;
      break;
    case SplitBehavior::kMergedWithPrevious:
      kept = merge_matches_into_neighbour(spans, false);
      break;
    case SplitBehavior::kMergedWithNext:
      kept = merge_matches_into_neighbour(spans, true);
      break;
    case SplitBehavior::kContiguous:
      kept = contiguous(spans);
      break;
  }
  std::vector<std::pair<size_t, size_t>> pieces;
  for (const SplitSpan& s : kept)
    if (s.end > s.begin) pieces.emplace_back(s.begin, s.end);
  return pieces;
}

}  // namespace trident::tokenizer
