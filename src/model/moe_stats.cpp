#include "model/moe_stats.h"

namespace trident {

void add_moe_stats(MoeLayerStats& stats, const MoeLosses& losses, const int* idx, long tokens,
                   int topk, int experts) {
  stats.aux += losses.aux, stats.z += losses.z;
  stats.tokens_per_expert.resize(experts, 0.0);
  for (long i = 0; i < tokens * topk; ++i)
    if (idx[i] >= 0 && idx[i] < experts) stats.tokens_per_expert[idx[i]] += 1;
}

}  // namespace trident
