#pragma once
// AdamW over the flat parameter buffer, with global gradient-norm clipping. Weight decay
// applies to matrices (and embeddings) only, never to biases or LayerNorm parameters.
#include <vector>

#include "comm/communicator.h"
#include "model/parameters.h"

namespace trident {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float clip_grad = 1.0f;  // 0: no clipping
};

class AdamW {
 public:
  AdamW(const AdamWConfig& config, long size);
  // Global L2 norm of the gradients: sharded tensors are summed over the tensor-parallel
  // group, replicated ones (identical on every rank) counted once.
  static double grad_norm(const Parameters& params, comm::Communicator& tp);
  // Clips to clip_grad using grad_norm, then updates. Returns the pre-clip norm.
  double step(Parameters& params, float lr, comm::Communicator& tp);
  long steps_taken() const { return step_; }

 private:
  AdamWConfig config_;
  std::vector<float> exp_avg_, exp_avg_sq_;
  long step_ = 0;
};

}  // namespace trident
