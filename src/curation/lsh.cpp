#include "curation/lsh.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace trident::curation {

double lsh_probability(double s, LshParams p) {
  return 1.0 - std::pow(1.0 - std::pow(s, p.rows), p.bands);
}

namespace {
double integrate(double lo, double hi, LshParams p, bool false_negative) {
  const int steps = 200;
  double sum = 0, h = (hi - lo) / steps;
  for (int i = 0; i < steps; ++i) {
    double s = lo + (i + 0.5) * h, q = lsh_probability(s, p);
    sum += (false_negative ? 1.0 - q : q) * h;
  }
  return sum;
}
}  // namespace

LshParams choose_lsh_params(double threshold, int permutations) {
  LshParams best;
  double best_error = std::numeric_limits<double>::infinity();
  for (int b = 1; b <= permutations; ++b)
    for (int r = 1; r * b <= permutations; ++r) {
      LshParams p{b, r};
      double e =
          0.1 * integrate(0.0, threshold, p, false) + 0.9 * integrate(threshold, 1.0, p, true);
      if (e < best_error) best_error = e, best = p;
    }
  return best;
}

std::string s_curve_table(LshParams p, double threshold) {
  std::string out;
  char line[128];
  std::snprintf(line, sizeof line,
                "LSH: %d bands x %d rows; P(candidate | Jaccard s) = 1 - (1 - s^%d)^%d\n", p.bands,
                p.rows, p.rows, p.bands);
  out += line;
  for (int i = 1; i <= 10; ++i) {
    double s = i / 10.0;
    std::snprintf(line, sizeof line, "  s = %.2f  P = %.4f\n", s, lsh_probability(s, p));
    out += line;
    if (threshold > s && threshold < s + 0.1) {
      std::snprintf(line, sizeof line, "  s = %.2f  P = %.4f  (threshold)\n", threshold,
                    lsh_probability(threshold, p));
      out += line;
    }
  }
  return out;
}

void band_hashes(const std::uint32_t* signature, LshParams p, std::uint64_t* out) {
  for (int k = 0; k < p.bands; ++k)
    out[k] = XXH3_64bits_withSeed(signature + (size_t)k * p.rows, sizeof(std::uint32_t) * p.rows,
                                  (std::uint64_t)k);
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> candidate_pairs(
    const std::vector<std::uint64_t>& hashes, long n, int bands, int max_bucket) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> bucket(n);
  for (int k = 0; k < bands; ++k) {
    for (long i = 0; i < n; ++i) bucket[i] = {hashes[(size_t)i * bands + k], (std::uint32_t)i};
    std::sort(bucket.begin(), bucket.end());
    for (long lo = 0; lo < n;) {
      long hi = lo + 1;
      while (hi < n && bucket[hi].first == bucket[lo].first) ++hi;
      if (hi - lo <= max_bucket) {
        for (long x = lo; x < hi; ++x)
          for (long y = x + 1; y < hi; ++y) pairs.emplace_back(bucket[x].second, bucket[y].second);
      } else {
        for (long y = lo + 1; y < hi; ++y) pairs.emplace_back(bucket[lo].second, bucket[y].second);
      }
      lo = hi;
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

}  // namespace trident::curation
