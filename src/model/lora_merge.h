#pragma once
// Folds LoRA adapters into their base weights: W' = W + (alpha / R) B A for every adapted
// linear, so the merged model computes what base + adapters compute (without dropout).
#include "config/lora_config.h"
#include "parameters/parameters.h"

namespace trident {

// model and adapters: one-rank layouts (tensor-parallel size 1) of the same layers, e.g.
// gather_to_single_rank's. Grouped-query attention's fused A goes with linear_q's and
// linear_kv's B into linear_q and linear_kv.
void merge_lora_adapters(Parameters& model, const Parameters& adapters, const LoraConfig& lora);

}  // namespace trident
