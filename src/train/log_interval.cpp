#include "train/log_interval.h"

#include <cmath>

namespace trident::train {

namespace {

// Each MoE layer's mean over the interval's stepped iterations: its losses without their
// coefficients, and its experts' load.
std::vector<MoeLayerLog> moe_layer_logs(const std::vector<StepResult::MoeLayer>& sums, int stepped,
                                        double aux_coeff, double z_coeff) {
  std::vector<MoeLayerLog> out;
  for (const StepResult::MoeLayer& l : sums) {
    MoeLayerLog log;
    log.layer = l.layer;
    if (aux_coeff > 0) log.load_balancing_loss = l.aux / stepped / aux_coeff;
    if (z_coeff > 0) log.z_loss = l.z / stepped / z_coeff;
    for (double tokens : l.tokens_per_expert) log.tokens_per_expert.push_back(tokens / stepped);
    out.push_back(std::move(log));
  }
  return out;
}

}  // namespace

void LogInterval::add(const StepResult& step, int seq_length, double flops) {
  seconds_ += step.seconds;
  flops_ += flops;
  tokens_ += step.global_batch * seq_length;
  ++iterations_;
  if (step.skipped) {
    ++skipped_;
    return;
  }  // as Megatron, skipped iterations stay out of the averages
  loss_ += step.counted_targets ? step.loss_sum / (double)step.counted_targets : 0.0;
  grad_norm_ += step.grad_norm;
  moe_aux_loss_ += step.moe_aux_loss, moe_z_loss_ += step.moe_z_loss;
  if (moe_layers_.empty()) moe_layers_.resize(step.moe_layers.size());
  for (size_t i = 0; i < step.moe_layers.size(); ++i) {
    StepResult::MoeLayer& sum = moe_layers_[i];
    const StepResult::MoeLayer& l = step.moe_layers[i];
    sum.layer = l.layer, sum.aux += l.aux, sum.z += l.z;
    sum.tokens_per_expert.resize(l.tokens_per_expert.size(), 0.0);
    for (size_t e = 0; e < l.tokens_per_expert.size(); ++e)
      sum.tokens_per_expert[e] += l.tokens_per_expert[e];
  }
  ++stepped_;
}

IterationStats LogInterval::take(const TrainingRun& run, long iteration, const StepResult& last) {
  const TrainingConfig& c = run.config;
  IterationStats s;
  s.iteration = iteration, s.train_iters = run.train_iters;
  s.consumed_samples = run.progress.consumed_samples;
  s.ms_per_iter = seconds_ / iterations_ * 1e3, s.lr = last.lr, s.global_batch = last.global_batch;
  s.loss = stepped_ ? loss_ / stepped_ : NAN;
  s.grad_norm = stepped_ ? grad_norm_ / stepped_ : NAN;
  // As Megatron's MoE logging: each loss over its coefficient, the mean over MoE layers.
  int moe_layers = 0;
  for (int l = 0; l < c.model.num_layers && c.model.moe.enabled(); ++l)
    moe_layers += c.model.is_moe_layer(l);
  const double aux_coeff = c.rank_layout().moe_aux_loss_coeff, z_coeff = c.moe_z_loss_coeff;
  if (stepped_ && moe_layers > 0 && aux_coeff > 0)
    s.load_balancing_loss = moe_aux_loss_ / stepped_ / (aux_coeff * moe_layers);
  if (stepped_ && moe_layers > 0 && z_coeff > 0)
    s.z_loss = moe_z_loss_ / stepped_ / (z_coeff * moe_layers);
  if (stepped_) s.moe_layers = moe_layer_logs(moe_layers_, stepped_, aux_coeff, z_coeff);
  s.moe_per_layer_logging = c.moe_per_layer_logging;
  if (c.fp16)
    s.loss_scale = run.model.scaler.scale(),
    s.skipped_iterations = run.model.scaler.state().skipped;
  s.interval_iterations = iterations_, s.interval_skipped = skipped_;
  s.tokens_per_s = (double)tokens_ / seconds_;
  s.tflops = flops_ / seconds_ / 1e12 / c.world_size, s.mfu = s.tflops / run.peak_tflops;
  *this = LogInterval();
  return s;
}

}  // namespace trident::train
