#pragma once
// The memory plan's rows of a chunk's expert buffer (expert parallelism): model/chunk_memory.cpp
// lists them whole, engine/rank_memory.cpp resizes them as the data-parallel sharding strategy
// shards the buffer over the expert-data group (its Adam row is chunk_memory.h's
// kExpertMomentsRow).
#include <string>

#include "config/model_config.h"
#include "kernels/low_precision.h"
#include "parameters/parameter_layout.h"

namespace trident {

inline constexpr const char* kExpertGradientsRow = "expert gradients";
// Its 16-bit copy in bf16 and fp16 runs: "expert bf16 weight copy".
inline std::string expert_weight_copy_row(kernels::Precision precision) {
  return "expert " + std::string(kernels::precision_name(precision)) + " weight copy";
}

// "expert weights (E/EP experts x L MoE layers)": the chunk's local experts and MoE layers.
inline std::string expert_weights_row(const ModelConfig& config, const ChunkPlacement& placement,
                                      int expert_parallel) {
  const int layers =
      placement.num_layers < 0 ? config.num_layers - placement.first_layer : placement.num_layers;
  int moe_layers = 0;
  for (int l = placement.first_layer; l < placement.first_layer + layers; ++l)
    moe_layers += config.is_moe_layer(l) ? 1 : 0;
  return "expert weights (" + std::to_string(config.moe.num_experts / expert_parallel) +
         " experts x " + std::to_string(moe_layers) + " MoE layers)";
}

}  // namespace trident
