#pragma once
// Softmax + cross-entropy over a (possibly vocabulary-sharded) logits matrix, in pieces so
// the tensor-parallel caller can all-reduce the per-row statistics between them. The
// logits buffer is overwritten with d(loss)/d(logits): probabilities are never stored
// separately. Columns >= valid_cols are vocabulary padding and never enter the softmax.
namespace trident::kernels {

// Per row: max over valid columns and sum of exp(logit - max), in one online pass.
void softmax_row_stats(const float* logits, int rows, int cols, int valid_cols, float* row_max,
                       float* row_sumexp);

// Rescale a rank's partial sum-exp to a new (global) max: sumexp *= exp(local_max - global_max).
void rebase_sumexp(const float* local_max, const float* global_max, float* sumexp, int rows);

// target_logit[r] = logits[r, targets[r] - vocab_start] if the target is in this shard, else 0.
void gather_target_logit(const float* logits, const int* targets, int rows, int cols,
                         int vocab_start, float* target_logit);

// logits <- scale * (softmax - onehot(target)); padding columns <- 0.
void softmax_cross_entropy_backward_inplace(float* logits, const int* targets, const float* row_max,
                                            const float* row_sumexp, int rows, int cols,
                                            int valid_cols, int vocab_start, float scale);

}  // namespace trident::kernels
