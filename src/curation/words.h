#pragma once
// Word and n-gram hashing shared by fuzzy dedup (shingles) and decontamination (13-grams).
#include <cstdint>
#include <string_view>

namespace trident::curation {

// A 64-bit hash of a sequence of word hashes (order matters), finished with a full avalanche
// so that MinHash's per-permutation hashes see well-mixed input.
inline std::uint64_t mix64(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

inline std::uint64_t ngram_hash(const std::uint64_t* word_hashes, int n) {
  std::uint64_t h = 0x9E3779B97F4A7C15ULL * (std::uint64_t)n;
  for (int i = 0; i < n; ++i) h = (h ^ word_hashes[i]) * 0x100000001b3ULL + (h >> 29);
  return mix64(h);
}

}  // namespace trident::curation
