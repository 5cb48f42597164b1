#include "optim/adamw.h"

#include <cmath>

#include "kernels/adamw.h"

namespace trident {

double global_grad_norm(const std::vector<const Parameters*>& chunks, comm::Communicator& tp,
                        comm::Communicator& pp) {
  double sq[2] = {0.0, 0.0};  // sharded over tensor parallelism, replicated
  for (const Parameters* params : chunks)
    for (const ParamSpec& s : params->layout().specs()) {
      if (!s.owned) continue;
      sq[s.shard.dim >= 0 ? 0 : 1] +=
          kernels::sum_of_squares(params->grads() + s.offset, s.numel());
    }
  tp.all_reduce(&sq[0], 1, comm::ReduceOp::kSum);
  double total = sq[0] + sq[1];
  pp.all_reduce(&total, 1, comm::ReduceOp::kSum);
  return std::sqrt(total);
}

float clip_coefficient(double norm, float clip) {
  return clip > 0.f && norm > clip ? (float)(clip / (norm + 1e-6)) : 1.f;
}

AdamW::AdamW(const AdamWConfig& config, long size)
    : config_(config), exp_avg_(size, 0.f), exp_avg_sq_(size, 0.f) {}

void AdamW::update(Parameters& params, float lr, float grad_scale) {
  ++step_;
  kernels::AdamWStep s{lr,    config_.beta1, config_.beta2, config_.eps, config_.weight_decay,
                       step_, grad_scale};
  for (const ParamSpec& spec : params.layout().specs())
    kernels::adamw_update(params.values() + spec.offset, params.grads() + spec.offset,
                          exp_avg_.data() + spec.offset, exp_avg_sq_.data() + spec.offset,
                          spec.numel(), s, spec.weight_decay);
}

double AdamW::step(Parameters& params, float lr, comm::Communicator& tp) {
  comm::SingleRankCommunicator no_pipeline("pipeline");
  double norm = global_grad_norm({&params}, tp, no_pipeline);
  update(params, lr, clip_coefficient(norm, config_.clip_grad));
  return norm;
}

}  // namespace trident
