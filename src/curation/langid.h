#pragma once
// Stage 2: language identification with CLD2 (Debian's libcld2: Google's Compact Language
// Detector 2, its models built into the library, so nothing to download).
#include <string>
#include <string_view>

namespace trident::curation {

struct LanguageGuess {
  std::string code;       // ISO 639-1 where CLD2 has one ("en", "de", "zh"), "un" if none
  double confidence = 0;  // share of the document's letters in that language, 0..1
  bool reliable = false;  // CLD2's own verdict
};

// Thread-safe (CLD2 keeps no mutable global state).
LanguageGuess identify_language(std::string_view text);

}  // namespace trident::curation
