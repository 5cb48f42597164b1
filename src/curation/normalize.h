#pragma once
// Stage 1: text normalisation. Unicode NFC (so that the same text typed with combining marks
// or precomposed characters hashes the same in exact and fuzzy dedup), control characters
// removed, whitespace runs collapsed. Pure functions.
#include <string>
#include <string_view>

namespace trident::curation {

// NFC; C0/C1 control characters other than tab and newline removed (CR and CRLF become a
// newline, U+FEFF removed); each run of horizontal whitespace (Unicode White_Space) becomes
// one space; spaces at line ends are dropped; more than two newlines in a row become two (a
// paragraph break survives); leading and trailing whitespace of the document is dropped.
// The input must be valid UTF-8.
std::string normalize_text(std::string_view text);

// Number of code points (the unit of every length threshold in curation).
long count_chars(std::string_view text);

}  // namespace trident::curation
