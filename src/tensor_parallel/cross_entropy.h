#pragma once
// Vocabulary-parallel softmax cross-entropy: each rank holds logits for its vocabulary
// range; three all-reduces of one float per row (max, sum of exp, target logit) give the
// exact loss, and the full logits are never gathered.
#include <vector>

#include "comm/communicator.h"

namespace trident::tensor_parallel {

struct VocabParallelCrossEntropy {
  int vocab_start = 0;
  int vocab_local = 0;  // columns of the logits buffer on this rank
  int valid_local = 0;  // of those, how many are real tokens (the rest is padding)
  comm::Communicator* tp = nullptr;

  // losses[r] = -log softmax(logits[r])[targets[r]]. When grad_scale != 0, logits are
  // overwritten with grad_scale * d(loss_r)/d(logits).
  void forward(float* logits, const int* targets, int rows, float* losses, float grad_scale) const;
};

}  // namespace trident::tensor_parallel
