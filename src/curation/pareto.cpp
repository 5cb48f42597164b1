#include "curation/pareto.h"

#include <xxhash.h>

#include <cmath>

namespace trident::curation {

double pareto_draw(std::uint64_t seed, std::string_view id, double alpha) {
  // 53 hash bits give a uniform u in [0, 1); inverting the survival function gives the draw.
  const double u = (double)(XXH64(id.data(), id.size(), seed) >> 11) * 0x1.0p-53;
  return std::pow(1.0 - u, -1.0 / alpha) - 1.0;
}

double pareto_keep_probability(double score, double alpha) {
  return std::pow(2.0 - score, -alpha);
}

}  // namespace trident::curation
