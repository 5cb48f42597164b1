#pragma once
// Model FLOPs, for the TFLOP/s and MFU columns of the log, the planner's throughput and the
// cost-balanced pipeline split (engine/pipeline_split.h): one formula, summed here per layer.
#include "config/model_config.h"

namespace trident {

// FLOPs of one training iteration without recomputation (Narayanan et al. 2021, eq. 3
// with 3 instead of 4 passes through the layers):
//   72 B s l h^2 (1 + s / (6h)) + 6 B s h V
// where V is the padded vocabulary; the logit layer is never recomputed. With a sliding
// window the attention term's s / (6h) counts only the attended keys
// (ModelConfig::attention_keys). An MoE layer counts each token's k experts and the
// router instead of the dense MLP.
double training_flops_per_iteration(const ModelConfig& c, long global_batch, int seq,
                                    int padded_vocab);

// Forward FLOPs of one token of a sequence of `seq` through layer `layer` (0-based): its
// attention and its dense or MoE MLP. Backward is twice this.
double layer_forward_flops_per_token(const ModelConfig& c, int layer, int seq);
// Forward FLOPs of one token through the output layer: 2 h V (V: the padded vocabulary).
double logits_forward_flops_per_token(const ModelConfig& c, int padded_vocab);

}  // namespace trident
