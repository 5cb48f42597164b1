#include "tensor_parallel/cross_entropy.h"

#include <cmath>

#include "kernels/cross_entropy.h"

namespace trident::tensor_parallel {

void VocabParallelCrossEntropy::forward(float* logits, const int* targets, int rows, float* losses,
                                        float grad_scale, kernels::bf16_t* grad16) const {
  std::vector<float> local_max(rows), global_max(rows), sumexp(rows), target(rows);
  kernels::gather_target_logit(logits, targets, rows, vocab_local, vocab_start, target.data());
  kernels::softmax_exp_inplace(logits, rows, vocab_local, valid_local, local_max.data(),
                               sumexp.data());
  global_max = local_max;
  tp->all_reduce(global_max.data(), rows, comm::ReduceOp::kMax);
  kernels::rebase_sumexp(local_max.data(), global_max.data(), sumexp.data(), rows);
  tp->all_reduce(sumexp.data(), rows, comm::ReduceOp::kSum);
  tp->all_reduce(target.data(), rows, comm::ReduceOp::kSum);
  for (int r = 0; r < rows; ++r)
    losses[r] = targets[r] < 0 ? 0.f : std::log(sumexp[r]) + global_max[r] - target[r];
  if (grad_scale == 0.f) return;
  const kernels::SoftmaxRows softmax{logits, local_max.data(), global_max.data(), sumexp.data(),
                                     rows,   vocab_local,      vocab_start};
  if (grad16)
    kernels::softmax_cross_entropy_backward(softmax, targets, grad_scale, grad16);
  else
    kernels::softmax_cross_entropy_backward(softmax, targets, grad_scale, logits);
}

}  // namespace trident::tensor_parallel
