#pragma once
// What the routers did in one step's training forwards, per MoE layer of a chunk: the two
// router losses (coefficients included) and the tokens sent to each expert, summed over the
// micro-batches. The trainer reduces them over the ranks and logs them (Megatron's
// load_balancing_loss per layer, and the experts' load); nothing in the model reads them.
#include <map>
#include <vector>

#include "model/moe_layer.h"

namespace trident {

struct MoeLayerStats {
  double aux = 0.0, z = 0.0;
  std::vector<double> tokens_per_expert;  // [E]
};

using MoeStats = std::map<int, MoeLayerStats>;  // by global layer index

// One micro-batch's forward of a layer: its losses, and the choices idx [tokens, k] counted
// per expert (the k experts of a token are distinct: each choice is one token sent).
void add_moe_stats(MoeLayerStats& stats, const MoeLosses& losses, const int* idx, long tokens,
                   int topk, int experts);

}  // namespace trident
