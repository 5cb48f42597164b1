#include "curation/minhash.h"

#include <xxhash.h>

#include <algorithm>
#include <random>

#include "curation/words.h"

namespace trident::curation {

namespace {

inline bool is_word_separator(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// Calls f(hash) for every shingle of the text.
template <class F>
void for_each_shingle(std::string_view text, int n, F&& f) {
  std::vector<std::uint64_t> words;
  words.reserve(text.size() / 5 + 1);
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_word_separator(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !is_word_separator(text[j])) ++j;
    if (j > i) words.push_back(XXH3_64bits(text.data() + i, j - i));
    i = j;
  }
  if (words.empty()) return;
  if ((int)words.size() < n) return f(ngram_hash(words.data(), (int)words.size()));
  for (size_t k = 0; k + n <= words.size(); ++k) f(ngram_hash(words.data() + k, n));
}

}  // namespace

std::vector<std::uint64_t> shingle_hashes(std::string_view text, int shingle_size) {
  std::vector<std::uint64_t> out;
  for_each_shingle(text, shingle_size, [&](std::uint64_t h) { out.push_back(h); });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double jaccard(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t i = 0, j = 0, common = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++common, ++i, ++j;
    }
  }
  return (double)common / (double)(a.size() + b.size() - common);
}

MinHasher::MinHasher(int permutations, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < permutations; ++i) {
    a_.push_back(rng() | 1);
    b_.push_back(rng());
  }
}

void MinHasher::signature(std::string_view text, int shingle_size, std::uint32_t* out) const {
  const int p = permutations();
  std::fill(out, out + p, 0xFFFFFFFFu);
  const std::uint64_t* a = a_.data();
  const std::uint64_t* b = b_.data();
  for_each_shingle(text, shingle_size, [&](std::uint64_t x) {
    for (int i = 0; i < p; ++i) {
      // Permutation i: x xor a random key, then a multiply-xorshift finaliser (two
      // multiplies), whose high half behaves like an independent random hash per key.
      std::uint64_t h = (x ^ a[i]) * 0xbf58476d1ce4e5b9ULL;
      h ^= h >> 31;
      h = (h + b[i]) * 0x94d049bb133111ebULL;
      const std::uint32_t v = (std::uint32_t)(h >> 32);
      out[i] = v < out[i] ? v : out[i];
    }
  });
}

}  // namespace trident::curation
