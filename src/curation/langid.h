#pragma once
// Stage 2: language identification with CLD2 (Debian's libcld2: Google's Compact Language
// Detector 2, its models built into the library, so nothing to download).
#include <string>
#include <string_view>
#include <vector>

namespace trident::curation {

struct LanguageGuess {
  std::string code;       // ISO 639-1 where CLD2 has one ("en", "de", "zh"), "un" if none
  double confidence = 0;  // share of the document's letters in that language, 0..1
  bool reliable = false;  // CLD2's own verdict
};

// What the stage decides from a guess: keep when its language is wanted with at least
// threshold of the text.
struct LanguageFilter {
  std::vector<std::string> langs;
  double threshold = 0.5;
  bool wanted(const std::string& code) const;
  bool keeps(const LanguageGuess& g) const { return wanted(g.code) && g.confidence >= threshold; }
};

// Thread-safe (CLD2 keeps no mutable global state). The whole document.
LanguageGuess identify_language(std::string_view text);

// CLD2 costs ~25 ns a byte; on documents longer than sample_bytes it is run on an evenly
// spread sample of them first (spread_sample), and again on the whole document only where
// the sample's answer is unreliable or within kSampleMargin of turning the filter's decision
// the other way. sample_bytes 0: always the whole document. On the bench's 40,907 documents
// the decision is the whole document's for all but 5 (markup CLD2 calls unknown as a whole),
// at 2.6x the speed; see bench/curate.sh.
LanguageGuess identify_language(std::string_view text, const LanguageFilter& filter,
                                size_t sample_bytes);
constexpr double kSampleMargin = 0.2;

// At most budget bytes of text: 16 windows (fewer for a small budget) at even intervals from
// its start to its end, each cut to whole words (whole UTF-8 characters where a window has
// no space), joined by newlines. The text itself when it fits.
std::string spread_sample(std::string_view text, size_t budget);

}  // namespace trident::curation
