#pragma once
// Softmax + cross-entropy over a (possibly vocabulary-sharded) logits matrix, in pieces so
// the tensor-parallel caller can all-reduce the per-row statistics between them. Each
// logit is exponentiated once: the statistics pass leaves exp(logit - row max) in the
// buffer and the gradient pass scales those, writing d(loss)/d(logits) in place or, in
// bf16 runs, straight into the bf16 operand of the output layer's backward products.
// Columns >= valid_cols are vocabulary padding: they never enter the softmax and get a
// zero gradient.
#include "kernels/low_precision.h"

namespace trident::kernels {

// target_logit[r] = logits[r, targets[r] - vocab_start] if the target is in this shard, else 0.
// Read it before softmax_exp_inplace overwrites the logits.
void gather_target_logit(const float* logits, const int* targets, int rows, int cols,
                         int vocab_start, float* target_logit);

// Per row: row_max = max over valid columns, logits <- exp(logits - row_max) (padding <- 0),
// row_sumexp = their sum.
void softmax_exp_inplace(float* logits, int rows, int cols, int valid_cols, float* row_max,
                         float* row_sumexp);

// Rescale a rank's partial sum-exp to a new (global) max: sumexp *= exp(local_max - global_max).
void rebase_sumexp(const float* local_max, const float* global_max, float* sumexp, int rows);

// grad = scale * (softmax - onehot(target)), from the exps softmax_exp_inplace left (relative
// to local_max) and the global max and sum-exp. grad may be the exps buffer itself.
struct SoftmaxRows {
  const float* exps;
  const float* local_max;
  const float* global_max;
  const float* global_sumexp;
  int rows, cols, vocab_start;
};
void softmax_cross_entropy_backward(const SoftmaxRows& s, const int* targets, float scale,
                                    float* grad);
void softmax_cross_entropy_backward(const SoftmaxRows& s, const int* targets, float scale,
                                    bf16_t* grad);

}  // namespace trident::kernels
