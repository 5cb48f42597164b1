#pragma once
// How the transformer layers split over the pipeline stages, one function per rule, shared
// by training (TrainingConfig::rank_layout), the planner (IterationModel::rank_layout) and
// the memory check's remedies, so what `trident plan` predicts is the split training runs.
//
// - even: L / p layers each (Megatron's default; RankLayout::even_split);
// - Megatron's --decoder-first/last-pipeline-num-layers: the given counts on the end
//   stages, the rest evenly over the others;
// - Megatron's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-
//   split: the embedding and the loss each count as one layer of an even split of L + e + l
//   over the p x v virtual stages, and the first (last) virtual stage builds one layer
//   fewer;
// - balanced (trident's default for p > 1, v = 1): whole layers placed so the stages' model
//   FLOPs are as equal as whole layers allow, the last stage carrying the output layer and
//   the loss (model/flops.h).
// Each returns one count per virtual stage j * p + s, or {} when the rule cannot split.
#include <vector>

#include "config/model_config.h"

namespace trident::engine {

// p >= 2 stages, first / last: 0 when not given. {} unless the others get an equal positive
// share (Megatron's rule) and the given counts are positive.
std::vector<int> decoder_split(int num_layers, int stages, int first, int last);

// Megatron's rule: (L + e + l) divisible by p x v, and no virtual stage left with fewer than
// zero layers; trident also needs at least one layer in every virtual stage.
std::vector<int> account_for_split(int num_layers, int stages, int virtual_stages, bool embedding,
                                   bool loss);

// Cost of one micro-batch through each part of the model, in any one unit: each layer's,
// and what the first and the last stage carry besides their layers.
struct StageCosts {
  std::vector<double> layers;
  double first_extra = 0, last_extra = 0;
};
// The model's training FLOPs per token (model/flops.h: forward + backward, a fourth pass
// through the layers under full recomputation): layers, and on the last stage the output
// layer and the loss (its matrix products; the softmax is element-wise and uncounted, as
// is the embedding's gather on the first stage: neither has FLOPs in the model's count).
StageCosts model_stage_costs(const ModelConfig& m, int tensor, bool full_recompute);

// Contiguous counts, at least one layer per stage, that minimise the largest stage cost;
// among those, each stage in turn takes the count nearest to the average of what is left,
// so the slack spreads instead of piling onto the first stages. {} when stages exceed the
// layers.
std::vector<int> balanced_split(const StageCosts& costs, int stages);

// The model's balanced split (model_stage_costs); beyond 2^16 layers the even one, where the
// output layer is under a ten-thousandth of a stage.
std::vector<int> balanced_model_split(const ModelConfig& m, int tensor, int stages,
                                      bool full_recompute);

// The split a run gets without a split flag: balanced for p > 1 without virtual stages,
// else even (interleaved schedules keep Megatron's even chunks: the last chunk's output
// layer is one of v chunks on its rank, and their order in the schedule, not the sum,
// decides the wait). {} when the layers do not divide as that rule needs.
std::vector<int> default_split(const ModelConfig& m, int tensor, int stages, int virtual_stages,
                               bool full_recompute);

// Each stage's cost under a split (p entries; v = 1).
std::vector<double> stage_costs(const StageCosts& costs, const std::vector<int>& split);

}  // namespace trident::engine
