#include "train/training_config.h"

#include <algorithm>
#include <climits>

#include "engine/pipeline_split.h"
#include "optim/lr_scheduler.h"
#include "pipeline_parallel/schedules.h"

namespace trident::train {

int TrainingConfig::data_parallel_size() const {
  long model_parallel =
      (long)tensor_model_parallel_size * context_parallel_size * pipeline_model_parallel_size;
  return model_parallel > 0 && world_size % model_parallel == 0 ? (int)(world_size / model_parallel)
                                                                : 1;
}

int TrainingConfig::virtual_stages() const {
  const int p = pipeline_model_parallel_size, n = num_layers_per_virtual_pipeline_stage;
  // Megatron counts the embedding and the loss in when they take part in the split.
  const long L = (long)model.num_layers + account_for_embedding_in_pipeline_split +
                 account_for_loss_in_pipeline_split;
  if (n <= 0 || p <= 0 || L % p || (L / p) % n) return 1;
  return (int)(L / p / n);
}

namespace {

bool split_flag_given(const TrainingConfig& c) {
  return !c.pipeline_split.empty() || c.decoder_first_pipeline_num_layers != 0 ||
         c.decoder_last_pipeline_num_layers != 0 || c.account_for_embedding_in_pipeline_split ||
         c.account_for_loss_in_pipeline_split;
}

}  // namespace

bool TrainingConfig::balanced_pipeline_split() const {
  if (split_flag_given(*this)) return pipeline_split == "balanced";
  // Without a flag: whether engine::default_split balances this layout.
  return pipeline_model_parallel_size > 1 && virtual_stages() == 1;
}

std::vector<int> TrainingConfig::layers_per_virtual_stage() const {
  const int p = pipeline_model_parallel_size, v = virtual_stages(), L = model.num_layers;
  const int first = decoder_first_pipeline_num_layers, last = decoder_last_pipeline_num_layers;
  const bool full_recompute = recompute_granularity == "full";
  if (p <= 0 || L <= 0) return {};
  if (first != 0 || last != 0)
    return v == 1 ? engine::decoder_split(L, p, first, last) : std::vector<int>{};
  if (account_for_embedding_in_pipeline_split || account_for_loss_in_pipeline_split)
    return engine::account_for_split(L, p, v, account_for_embedding_in_pipeline_split,
                                     account_for_loss_in_pipeline_split);
  if (L % (p * v)) return {};
  if (pipeline_split == "even") return engine::RankLayout::even_split(L, p * v);
  if (pipeline_split == "balanced")  // v = 1 (the rules)
    return engine::balanced_model_split(model, tensor_model_parallel_size, p, full_recompute);
  return engine::default_split(model, tensor_model_parallel_size, p, v, full_recompute);
}

kernels::Precision TrainingConfig::precision() const {
  return bf16   ? kernels::Precision::kBf16
         : fp16 ? kernels::Precision::kFp16
                : kernels::Precision::kFp32;
}

kernels::DropoutConfig TrainingConfig::dropout() const {
  // Masks get their own stream, apart from initialisation and data order.
  return {hidden_dropout, attention_dropout, seed ^ 0x64726f706f7574ull, model.lora.dropout};
}

int TrainingConfig::effective_global_batch() const {
  // Saturates at INT_MAX, beyond which validation refuses the micro-batch size.
  return global_batch_size > 0
             ? global_batch_size
             : (int)std::min((long)micro_batch_size * data_parallel_size(), (long)INT_MAX);
}

int TrainingConfig::num_micro_batches() const {
  return (int)(effective_global_batch() / ((long)micro_batch_size * data_parallel_size()));
}

GlobalBatchSchedule TrainingConfig::batch_schedule() const {
  BatchRampup r;
  if (rampup_batch_size.size() == 3)
    r = {rampup_batch_size[0], rampup_batch_size[1], rampup_batch_size[2]};
  return GlobalBatchSchedule(effective_global_batch(), r);
}

long TrainingConfig::total_train_iters() const {
  if (train_samples > 0) return batch_schedule().iterations_for(train_samples);
  return train_iters > 0 ? train_iters : 100;
}

long TrainingConfig::total_train_samples() const {
  return train_samples > 0 ? train_samples : total_train_iters() * effective_global_batch();
}

optim::LrSchedule TrainingConfig::lr_schedule() const {
  // Megatron's get_optimizer_param_scheduler: iteration counts become samples at the
  // final global batch; sample counts are taken as they are.
  const long gbs = effective_global_batch();
  long decay = sample_based() ? (lr_decay_samples > 0 ? lr_decay_samples : train_samples)
                              : (lr_decay_iters > 0 ? lr_decay_iters : total_train_iters()) * gbs;
  double warmup = lr_warmup_fraction >= 0 ? lr_warmup_fraction * (double)decay
                  : sample_based()        ? (double)lr_warmup_samples
                                          : (double)lr_warmup_iters * gbs;
  const long wsd = sample_based() ? lr_wsd_decay_samples : lr_wsd_decay_iters * gbs;
  return {lr,
          min_lr,
          warmup,
          decay,
          optim::parse_decay_style(lr_decay_style),
          wsd,
          optim::parse_wsd_decay_style(lr_wsd_decay_style.empty() ? "exponential"
                                                                  : lr_wsd_decay_style)};
}

pipeline_parallel::ScheduleConfig pipeline_schedule_of(const TrainingConfig& c) {
  return pipeline_schedule_of(c, c.num_micro_batches());
}

pipeline_parallel::ScheduleConfig pipeline_schedule_of(const TrainingConfig& c, int microbatches) {
  pipeline_parallel::ScheduleConfig s;
  s.stages = c.pipeline_model_parallel_size;
  s.chunks = c.virtual_stages();
  s.microbatches = microbatches;
  s.kind = !c.pipeline_schedule.empty()
               ? pipeline_parallel::parse_schedule_kind(c.pipeline_schedule)
           : s.chunks > 1 ? pipeline_parallel::ScheduleKind::kInterleaved
                          : pipeline_parallel::ScheduleKind::kOneFOneB;
  return s;
}

}  // namespace trident::train
