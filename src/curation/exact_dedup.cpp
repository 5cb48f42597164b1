#include "curation/exact_dedup.h"

#include <xxhash.h>

#include <algorithm>
#include <numeric>
#include <tuple>

namespace trident::curation {

HashedDoc exact_hash(std::string_view text, std::uint64_t order) {
  XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return {h.low64, h.high64, order};
}

std::vector<std::uint32_t> exact_keepers(const std::vector<HashedDoc>& docs) {
  std::vector<std::uint32_t> idx(docs.size());
  std::iota(idx.begin(), idx.end(), 0u);
  auto key = [&](std::uint32_t i) {
    return std::tie(docs[i].hash_hi, docs[i].hash_lo, docs[i].order);
  };
  std::sort(idx.begin(), idx.end(),
            [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
  std::vector<std::uint32_t> keeper(docs.size());
  for (size_t lo = 0; lo < idx.size();) {
    size_t hi = lo + 1;
    while (hi < idx.size() && docs[idx[hi]].hash_hi == docs[idx[lo]].hash_hi &&
           docs[idx[hi]].hash_lo == docs[idx[lo]].hash_lo)
      ++hi;
    for (size_t k = lo; k < hi; ++k) keeper[idx[k]] = idx[lo];  // the smallest order
    lo = hi;
  }
  return keeper;
}

}  // namespace trident::curation
