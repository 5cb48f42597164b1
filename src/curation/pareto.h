#pragma once
// Stage 3's filter: GPT-3's (and MT-NLG's) "keep a document when np.random.pareto(alpha) >
// 1 - score". The draw is a pure function of (seed, document id), so a rerun, another number
// of workers or ranks, or another order of the input keeps the same documents.
#include <cstdint>
#include <string_view>

namespace trident::curation {

// A Lomax (Pareto II, numpy's `pareto`) draw: P(X > x) = (1 + x)^-alpha.
double pareto_draw(std::uint64_t seed, std::string_view id, double alpha);

inline bool pareto_keep(double score, double draw) {
  return draw > 1.0 - score;
}

// P(kept) for a document of this score: (2 - score)^-alpha.
double pareto_keep_probability(double score, double alpha);

}  // namespace trident::curation
