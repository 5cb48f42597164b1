#pragma once
// Stage 5, first half: MinHash signatures over word n-gram shingles. A shingle is n
// consecutive words, a word a maximal run of non-whitespace characters of the normalised text
// (so case and punctuation count: near-duplicates are copies, not paraphrases); a document
// of fewer than n words is one shingle. No C/C++ MinHash library is packaged in Debian, so
// this is written here.
#include <cstdint>
#include <string_view>
#include <vector>

namespace trident::curation {

// Sorted, unique 64-bit hashes of the document's shingles: what Jaccard similarity is
// computed on when candidate pairs are verified.
std::vector<std::uint64_t> shingle_hashes(std::string_view text, int shingle_size);

// |a ∩ b| / |a ∪ b| of two sorted, unique sets (1 when both are empty).
double jaccard(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b);

class MinHasher {
 public:
  MinHasher(int permutations, std::uint64_t seed);
  int permutations() const { return (int)a_.size(); }
  // out[i] = min over shingles of permutation i's 32-bit hash (all ones for no shingles).
  void signature(std::string_view text, int shingle_size, std::uint32_t* out) const;

 private:
  // Random keys of the permutations. Plain multiply-shift ((a_i x + b_i) >> 32, one
  // multiply) is only 2-universal, and its detection rates strayed ~3 sigma from the S-curve
  // in one similarity band of the test; two multiplies per permutation still run at ~3x
  // the 30 MB/s target and vectorise.
  std::vector<std::uint64_t> a_, b_;
};

}  // namespace trident::curation
