#pragma once
// Stage 4: exact dedup. Documents whose normalised text has the same 128-bit XXH3 hash are
// copies (a collision among 2^64 documents has probability ~2^-64); the first in input order
// (file, then line) is kept.
#include <cstdint>
#include <string_view>
#include <vector>

namespace trident::curation {

struct HashedDoc {
  std::uint64_t hash_lo = 0, hash_hi = 0;
  std::uint64_t order = 0;  // position in the whole input: file index << 40 | line
};

HashedDoc exact_hash(std::string_view normalised_text, std::uint64_t order);

// For each document, the index (into docs) of the one kept for its text: itself when it is the
// first occurrence.
std::vector<std::uint32_t> exact_keepers(const std::vector<HashedDoc>& docs);

}  // namespace trident::curation
