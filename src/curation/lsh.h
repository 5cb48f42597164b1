#pragma once
// Stage 5, second half: locality-sensitive hashing over MinHash signatures. A signature is
// cut into b bands of r rows; two documents become a candidate pair when any band is equal,
// which happens with probability 1 - (1 - s^r)^b at Jaccard similarity s (the S-curve).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trident::curation {

struct LshParams {
  int bands = 0, rows = 0;
};

// P(candidate pair | Jaccard s).
double lsh_probability(double s, LshParams p);

// The (b, r) with b * r <= permutations minimising 0.1 x the false-positive area (the
// S-curve's integral below the threshold) + 0.9 x the false-negative area (1 minus it,
// above), datasketch's MinHashLSH criterion with recall weighted up: every candidate pair is
// verified on its true Jaccard, so a false positive costs one comparison, while a missed pair
// is a duplicate kept for good. At 0.7 with 128 permutations: 20 bands x 6 rows, P = 0.98 at
// 0.75 (equal weights would give 14 x 9 and P = 0.67 there).
LshParams choose_lsh_params(double threshold, int permutations);

// A printable table of the S-curve at s = 0.1, 0.2, ..., 1.0 and at the threshold.
std::string s_curve_table(LshParams p, double threshold);

// One 64-bit hash per band of a signature.
void band_hashes(const std::uint32_t* signature, LshParams p, std::uint64_t* out);

// Candidate pairs (i < j) of n documents whose band hashes are hashes[i * bands + k]: every
// pair sharing a bucket, except in buckets of more than max_bucket documents, where each one
// is paired with the bucket's first only (enough to connect a cluster, and linear in its
// size). Sorted and unique.
std::vector<std::pair<std::uint32_t, std::uint32_t>> candidate_pairs(
    const std::vector<std::uint64_t>& hashes, long n, int bands, int max_bucket);

}  // namespace trident::curation
