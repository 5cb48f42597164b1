#pragma once
// Vocabulary-parallel softmax cross-entropy: each rank holds logits for its vocabulary
// range; three all-reduces of one float per row (max, sum of exp, target logit) give the
// exact loss, and the full logits are never gathered.
#include <vector>

#include "comm/communicator.h"
#include "kernels/low_precision.h"

namespace trident::tensor_parallel {

struct VocabParallelCrossEntropy {
  int vocab_start = 0;
  int vocab_local = 0;  // columns of the logits buffer on this rank
  int valid_local = 0;  // of those, how many are real tokens (the rest is padding)
  comm::Communicator* tp = nullptr;

  // losses[r] = -log softmax(logits[r])[targets[r]], 0 where targets[r] < 0 (a target the
  // loss does not count, which gets no gradient either); the logits buffer is consumed. When
  // grad_scale != 0, grad_scale * d(loss_r)/d(logits) goes to grad16 when given (bf16
  // runs), else over the logits.
  void forward(float* logits, const int* targets, int rows, float* losses, float grad_scale,
               kernels::bf16_t* grad16 = nullptr) const;
};

}  // namespace trident::tensor_parallel
