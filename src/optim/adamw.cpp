#include "optim/adamw.h"

#include <cmath>

#include "kernels/adamw.h"

namespace trident {

AdamW::AdamW(const AdamWConfig& config, long size)
    : config_(config), exp_avg_(size, 0.f), exp_avg_sq_(size, 0.f) {}

double AdamW::grad_norm(const Parameters& params, comm::Communicator& tp) {
  double sharded = 0.0, replicated = 0.0;
  for (const ParamSpec& s : params.layout().specs()) {
    double sq = kernels::sum_of_squares(params.grads() + s.offset, s.numel());
    (s.shard.dim >= 0 ? sharded : replicated) += sq;
  }
  tp.all_reduce(&sharded, 1, comm::ReduceOp::kSum);
  return std::sqrt(sharded + replicated);
}

double AdamW::step(Parameters& params, float lr, comm::Communicator& tp) {
  double norm = grad_norm(params, tp);
  float scale = 1.f;
  if (config_.clip_grad > 0.f && norm > config_.clip_grad)
    scale = (float)(config_.clip_grad / (norm + 1e-6));
  ++step_;
  kernels::AdamWStep s{lr,    config_.beta1, config_.beta2, config_.eps, config_.weight_decay,
                       step_, scale};
  for (const ParamSpec& spec : params.layout().specs())
    kernels::adamw_update(params.values() + spec.offset, params.grads() + spec.offset,
                          exp_avg_.data() + spec.offset, exp_avg_sq_.data() + spec.offset,
                          spec.numel(), s, spec.weight_decay);
  return norm;
}

}  // namespace trident
