#include "train/training_log.h"

#include <cmath>

#include "distributed/process_groups.h"

namespace trident::train {

GroupCollectives snapshot_collectives(const distributed::ProcessGroups& g) {
  return {
      {g.tensor->name(), g.tensor->counters()},     {g.data->name(), g.data->counters()},
      {g.pipeline->name(), g.pipeline->counters()}, {g.expert->name(), g.expert->counters()},
      {g.context->name(), g.context->counters()},   {g.replicas->name(), g.replicas->counters()}};
}

namespace {
// Each MoE layer's experts' load (fewest and most tokens an expert got per iteration) and,
// with --moe-per-layer-logging, its losses (Megatron's moe/<name>_layer_<i> scalars).
void add_moe_layer_scalars(TensorBoardWriter& tb, const IterationStats& s) {
  for (const MoeLayerLog& l : s.moe_layers) {
    const std::string layer = "_layer_" + std::to_string(l.layer);
    tb.scalar("moe/expert_load_min" + layer, l.min_tokens(), s.iteration);
    tb.scalar("moe/expert_load_max" + layer, l.max_tokens(), s.iteration);
    if (!s.moe_per_layer_logging) continue;
    if (!std::isnan(l.load_balancing_loss))
      tb.scalar("moe/load_balancing_loss" + layer, l.load_balancing_loss, s.iteration);
    if (!std::isnan(l.z_loss)) tb.scalar("moe/z_loss" + layer, l.z_loss, s.iteration);
  }
}
}  // namespace

TrainingLog::TrainingLog(const TrainingConfig& c, const engine::RankContext& rank, bool resumed,
                         std::ostream& log)
    : rank_(rank),
      log_(log),
      metrics_(rank.world_rank == 0 ? c.metrics_file : "", resumed),
      tensorboard_(rank.world_rank == 0 ? c.tensorboard_dir : ""),
      timers_(c.timing_log_level, c.straggler_threshold),
      pipeline_stage_(rank.groups->pipeline->rank()) {
  if (tensorboard_.enabled()) log_ << "tensorboard: " << tensorboard_.path() << "\n";
}

void TrainingLog::begin_step() {
  if (timers_.level() > 0) step_start_ = snapshot_collectives(*rank_.groups);
}

void TrainingLog::step(const std::vector<pipeline_parallel::TraceEvent>& events) {
  if (timers_.level() == 0) return;
  GroupCollectives during = snapshot_collectives(*rank_.groups);
  for (size_t g = 0; g < during.size() && g < step_start_.size(); ++g)
    during[g].second -= step_start_[g].second;
  timers_.add_step(events, during);
}

void TrainingLog::interval(const IterationStats& s) {
  log_ << format_log_line(s) << "\n";
  metrics_.write(s);
  last_interval_ = s;
  TimerReport timers;
  if (timers_.level() > 0) {
    timers = timers_.reduce(*rank_.groups->world, pipeline_stage_);
    log_ << format_timers(timers, rank_.nodes);
  }
  log_ << std::flush;
  if (!tensorboard_.enabled()) return;
  // Megatron's scalar names, each also against consumed samples.
  TensorBoardWriter& tb = tensorboard_;
  auto both = [&](const std::string& tag, double v) {
    tb.scalar(tag, v, s.iteration);
    tb.scalar(tag + " vs samples", v, s.consumed_samples);
  };
  both("learning-rate", s.lr);
  both("batch-size", s.global_batch);
  if (!std::isnan(s.loss)) both("lm loss", s.loss);
  if (!std::isnan(s.load_balancing_loss)) both("load_balancing_loss", s.load_balancing_loss);
  if (!std::isnan(s.z_loss)) both("z_loss", s.z_loss);
  add_moe_layer_scalars(tb, s);
  if (!std::isnan(s.grad_norm)) tb.scalar("grad-norm", s.grad_norm, s.iteration);
  if (s.loss_scale > 0) tb.scalar("loss-scale", s.loss_scale, s.iteration);
  tb.scalar("iteration-time", s.ms_per_iter / 1e3, s.iteration);
  tb.scalar("throughput", s.tflops, s.iteration);
  tb.scalar("tokens-per-second", s.tokens_per_s, s.iteration);
  tb.scalar("mfu", s.mfu, s.iteration);
  for (const TimerRow& row : timers.rows) tb.scalar(row.name + "-time", row.max_ms, s.iteration);
  tb.flush();
}

void TrainingLog::validation(const ValidationStats& v) {
  log_ << format_validation_line(v) << "\n";
  metrics_.write(v);
  last_validation_ = v;
  if (!tensorboard_.enabled()) return;
  tensorboard_.scalar("lm loss validation", v.loss, v.iteration);
  tensorboard_.scalar("lm loss validation vs samples", v.loss, v.consumed_samples);
  tensorboard_.scalar("lm loss validation ppl", std::exp(v.loss), v.iteration);
  tensorboard_.scalar("lm loss validation ppl vs samples", std::exp(v.loss), v.consumed_samples);
  tensorboard_.flush();
}

}  // namespace trident::train
