#include "train/training_config.h"

#include <climits>
#include <cmath>
#include <filesystem>
#include <set>

#include "data/dataset_builder.h"
#include "data/gpt_dataset.h"
#include "optim/lr_scheduler.h"
#include "pipeline_parallel/schedules.h"

namespace trident {

namespace {
constexpr long kMaxRampupSizes = 1 << 16;
// Sample counts (iterations x global batch, and their sums) stay below 2^62.
constexpr double kMaxSamples = 4611686018427387904.0;

std::string num(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}
}  // namespace

int TrainingConfig::data_parallel_size() const {
  long model_parallel = (long)tensor_model_parallel_size * pipeline_model_parallel_size;
  return model_parallel > 0 && world_size % model_parallel == 0 ? (int)(world_size / model_parallel)
                                                                : 1;
}

int TrainingConfig::virtual_stages() const {
  const int p = pipeline_model_parallel_size, n = num_layers_per_virtual_pipeline_stage;
  if (n <= 0 || p <= 0 || model.num_layers % p || (model.num_layers / p) % n) return 1;
  return model.num_layers / p / n;
}

std::vector<int> TrainingConfig::layers_per_virtual_stage() const {
  const int p = pipeline_model_parallel_size, v = virtual_stages(), L = model.num_layers;
  const int first = decoder_first_pipeline_num_layers, last = decoder_last_pipeline_num_layers;
  if (p <= 0 || L <= 0) return {};
  if (first == 0 && last == 0) {
    if (L % (p * v)) return {};
    return std::vector<int>(p * v, L / (p * v));
  }
  if (v != 1 || p < 2 || first < 0 || last < 0) return {};
  int explicit_stages = (first > 0) + (last > 0), rest = L - first - last;
  int others = p - explicit_stages;
  if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && (rest % others || rest == 0)))
    return {};
  std::vector<int> split(p, others > 0 ? rest / others : 0);
  if (first > 0) split.front() = first;
  if (last > 0) split.back() = last;
  return split;
}

kernels::Precision TrainingConfig::precision() const {
  return bf16   ? kernels::Precision::kBf16
         : fp16 ? kernels::Precision::kFp16
                : kernels::Precision::kFp32;
}

kernels::DropoutConfig TrainingConfig::dropout() const {
  // Masks get their own stream, apart from initialisation and data order.
  return {hidden_dropout, attention_dropout, seed ^ 0x64726f706f7574ull};
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

LrSchedule TrainingConfig::lr_schedule() const {
  // Megatron's get_optimizer_param_scheduler: iteration counts become samples at the
  // final global batch; sample counts are taken as they are.
  const long gbs = effective_global_batch();
  long decay = sample_based() ? (lr_decay_samples > 0 ? lr_decay_samples : train_samples)
                              : (lr_decay_iters > 0 ? lr_decay_iters : total_train_iters()) * gbs;
  double warmup = lr_warmup_fraction >= 0 ? lr_warmup_fraction * (double)decay
                  : sample_based()        ? (double)lr_warmup_samples
                                          : (double)lr_warmup_iters * gbs;
  return {lr, min_lr, warmup, decay, parse_decay_style(lr_decay_style)};
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

namespace {

// --rampup-batch-size: Megatron's checks, plus one it makes only at run time (every size
// must split into whole micro-batches on every replica), made here before step 1.
bool validate_rampup(const TrainingConfig& c, std::vector<std::string>& errors) {
  if (c.rampup_batch_size.empty()) return true;
  const size_t before = errors.size();
  auto require = [&](bool ok, const std::string& message) {
    if (!ok) errors.push_back("--rampup-batch-size: " + message);
  };
  const std::vector<long>& r = c.rampup_batch_size;
  require(r.size() == 3, "give three values: <start batch> <increment> <ramp-up samples>");
  if (r.size() != 3) return false;
  const long start = r[0], inc = r[1], samples = r[2], gbs = c.effective_global_batch();
  const long unit = (long)std::max(1, c.micro_batch_size) * c.data_parallel_size();
  require(start > 0, "the start batch must be > 0");
  require(inc > 0, "the increment must be > 0");
  require(samples >= 0 && (double)samples < kMaxSamples,
          "the ramp-up samples must be >= 0 and below 2^62");
  require(start <= gbs, "the start batch (" + std::to_string(start) +
                            ") must be <= --global-batch-size (" + std::to_string(gbs) + ")");
  if (inc > 0 && start > 0 && start <= gbs)
    require((gbs - start) % inc == 0,
            "--global-batch-size - start (" + std::to_string(gbs - start) +
                ") must be a multiple of the increment (" + std::to_string(inc) + ")");
  require(start % unit == 0 && inc % unit == 0,
          "the start batch (" + std::to_string(start) + ") and the increment (" +
              std::to_string(inc) + ") must be multiples of --micro-batch-size x data-parallel " +
              "size (" + std::to_string(unit) + "), so every global batch on the way splits into " +
              "whole micro-batches");
  require(c.sample_based(),
          "needs sample-based training (--train-samples), as in Megatron: iteration counts "
          "are ambiguous while the batch grows");
  // Every size is checked against the pipeline schedule below, and the ramp-up is walked
  // size by size: a bound keeps both short (MT-NLG's ramp-up has 60 sizes).
  if (inc > 0 && start > 0 && start <= gbs)
    require((gbs - start) / inc < kMaxRampupSizes,
            "the ramp-up passes through " + std::to_string((gbs - start) / inc + 1) +
                " batch sizes, more than " + std::to_string(kMaxRampupSizes));
  return errors.size() == before;
}

// Iteration-based and sample-based length/schedule flags never mix (Megatron's rule).
void validate_schedule_flags(const TrainingConfig& c, bool ramp_ok,
                             std::vector<std::string>& errors) {
  auto require = [&](bool ok, const std::string& message) {
    if (!ok) errors.push_back(message);
  };
  require(c.train_iters >= 0, "--train-iters must be > 0");
  require(c.train_samples >= 0, "--train-samples must be > 0");
  require(c.lr_warmup_iters >= 0, "--lr-warmup-iters must be >= 0");
  require(c.lr_decay_iters >= 0, "--lr-decay-iters must be >= 0");
  require(c.lr_warmup_samples >= 0, "--lr-warmup-samples must be >= 0");
  require(c.lr_decay_samples >= 0, "--lr-decay-samples must be >= 0");
  const bool fraction = c.lr_warmup_fraction >= 0;
  require(c.lr_warmup_fraction <= 1, "--lr-warmup-fraction must be in [0, 1]");
  if (c.sample_based()) {
    require(c.train_iters == 0,
            "give --train-iters or --train-samples, not both (iteration-based or sample-based "
            "training)");
    require(c.lr_warmup_iters == 0 && c.lr_decay_iters == 0,
            "sample-based training (--train-samples) takes --lr-warmup-samples / "
            "--lr-decay-samples (or --lr-warmup-fraction), not --lr-warmup-iters / "
            "--lr-decay-iters");
    require(!(fraction && c.lr_warmup_samples > 0),
            "give --lr-warmup-fraction or --lr-warmup-samples, not both");
  } else {
    require(c.lr_warmup_samples == 0 && c.lr_decay_samples == 0,
            "--lr-warmup-samples and --lr-decay-samples need sample-based training "
            "(--train-samples); with --train-iters use --lr-warmup-iters / --lr-decay-iters");
    require(!(fraction && c.lr_warmup_iters > 0),
            "give --lr-warmup-fraction or --lr-warmup-iters, not both");
  }
  if (!ramp_ok || c.effective_global_batch() <= 0 || c.train_iters < 0 || c.train_samples < 0)
    return;
  const double gbs = c.effective_global_batch();
  const bool samples_fit =
      (double)c.train_iters * gbs < kMaxSamples && (double)c.lr_decay_iters * gbs < kMaxSamples &&
      (double)c.lr_warmup_iters * gbs < kMaxSamples && (double)c.train_samples < kMaxSamples;
  require(samples_fit,
          "--train-iters, --lr-decay-iters and --lr-warmup-iters x the global batch, and "
          "--train-samples, must stay below 2^62 samples");
  if (!samples_fit) return;
  require((double)c.eval_runs() * c.eval_iters * gbs < kMaxSamples,
          "--eval-iters x the global batch x the evaluations must stay below 2^62 samples");
  require(c.total_train_iters() > 0, "--train-samples (" + std::to_string(c.train_samples) +
                                         ") is less than one global batch: nothing to train");
  try {
    const LrSchedule lr = c.lr_schedule();
    require(lr.decay_steps > 0,
            "the learning-rate decay must end after step 0 (--lr-decay-iters "
            "/ --lr-decay-samples)");
    if (lr.warmup_steps > 0)
      require(lr.warmup_steps < lr.decay_steps,
              "the warm-up (" + num(lr.warmup_steps) +
                  " samples) must end before the decay does (" + std::to_string(lr.decay_steps) +
                  " samples; --lr-decay-iters / --lr-decay-samples default to the training "
                  "length; iterations count as iterations x global batch)");
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
}

}  // namespace

std::vector<std::string> validate_training_config(const TrainingConfig& c) {
  std::vector<std::string> errors = validate_model_config(c.model, c.tensor_model_parallel_size);
  auto require = [&](bool ok, const std::string& message) {
    if (!ok) errors.push_back(message);
  };
  const int t = c.tensor_model_parallel_size, p = c.pipeline_model_parallel_size;
  require(t > 0, "--tensor-model-parallel-size must be > 0");
  require(p > 0, "--pipeline-model-parallel-size must be > 0");
  if (t > 0 && p > 0)
    require(c.world_size % ((long)t * p) == 0,
            "world size (" + std::to_string(c.world_size) +
                ") must be divisible by --tensor-model-parallel-size x "
                "--pipeline-model-parallel-size (" +
                std::to_string(t) + " x " + std::to_string(p) + ")");
  require(c.ddp_bucket_size >= 0, "--ddp-bucket-size must be >= 0");
  require(!c.overlap_param_gather || (c.use_distributed_optimizer && c.overlap_grad_reduce),
          "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce "
          "(Megatron's rule: the parameters it gathers are the optimizer's shards)");
  require(c.logits_chunk_rows >= 0, "--logits-chunk-rows must be >= 0 (0: automatic)");
  if (c.sequence_parallel_active() && t > 0) {
    // Each rank keeps a contiguous 1/t of the micro-batch's rows (Megatron: the sequence
    // dimension must divide by t).
    require((long)c.micro_batch_size * c.model.seq_length % t == 0,
            "--sequence-parallel needs --micro-batch-size x --seq-length (" +
                std::to_string(c.micro_batch_size) + " x " + std::to_string(c.model.seq_length) +
                ") divisible by --tensor-model-parallel-size (" + std::to_string(t) + ")");
    // bf16 blocks travel as floats holding two values each.
    require(!c.bf16 || c.model.hidden_size % 2 == 0,
            "--sequence-parallel with --bf16 needs an even --hidden-size");
  }
  require(!(c.bf16 && c.fp16), "give --bf16 or --fp16, not both");
  require(c.hidden_dropout >= 0.f && c.hidden_dropout < 1.f, "--hidden-dropout must be in [0, 1)");
  require(c.attention_dropout >= 0.f && c.attention_dropout < 1.f,
          "--attention-dropout must be in [0, 1)");
  if (c.fp16) {
    require(c.loss_scale >= 0.f && std::isfinite(c.loss_scale),
            "--loss-scale must be >= 0 and finite (0: dynamic)");
    require(c.initial_loss_scale > 0.f && std::isfinite(c.initial_loss_scale),
            "--initial-loss-scale must be > 0 and finite");
    require(c.min_loss_scale > 0.f && c.min_loss_scale <= c.initial_loss_scale,
            "--min-loss-scale must be > 0 and <= --initial-loss-scale");
    require(c.loss_scale_window > 0, "--loss-scale-window must be > 0");
    require(c.hysteresis > 0, "--hysteresis must be > 0");
  }
  if (c.recompute_granularity == "selective") {
    require(c.recompute_method.empty() && c.recompute_num_layers == 0,
            "--recompute-granularity selective recomputes the attention core of every layer: "
            "--recompute-method and --recompute-num-layers belong to full");
  } else if (!c.recompute_granularity.empty()) {
    require(c.recompute_granularity == "full", "--recompute-granularity must be full or selective");
    require(c.recompute_method == "uniform" || c.recompute_method == "block",
            "--recompute-granularity full needs --recompute-method uniform or block");
    require(c.recompute_num_layers > 0,
            "--recompute-granularity full needs --recompute-num-layers > 0");
  } else {
    require(c.recompute_method.empty() && c.recompute_num_layers == 0,
            "--recompute-method and --recompute-num-layers need --recompute-granularity full");
  }
  require(c.save_interval >= 0, "--save-interval must be >= 0");
  require(c.keep_checkpoints >= 0, "--keep-checkpoints must be >= 0");
  require(c.save_interval == 0 || !c.save.empty(), "--save-interval needs --save");
  require(c.load.empty() || c.load_hf.empty(), "give --load or --load-hf, not both");
  require(!c.finetune || !c.load.empty(), "--finetune needs --load (the weights to start from)");
  require(!c.override_checkpoint_config || !c.load.empty(),
          "--override-checkpoint-config needs --load");
  require(!(c.finetune && c.override_checkpoint_config),
          "give --finetune (weights only, run settings free) or --override-checkpoint-config "
          "(resume everything despite changed settings), not both");
  require(c.distributed_timeout_minutes >= 0,
          "--distributed-timeout-minutes must be >= 0 (0 turns the watchdog off)");
  require(c.inject_fault_kind == "error" || c.inject_fault_kind == "stop" ||
              c.inject_fault_kind == "spin",
          "--inject-fault-kind must be error, stop or spin");
  require(c.inject_fault_save_point == "before-commit" || c.inject_fault_save_point == "mid-commit",
          "--inject-fault-save-point must be before-commit or mid-commit");
  const bool uneven =
      c.decoder_first_pipeline_num_layers != 0 || c.decoder_last_pipeline_num_layers != 0;
  if (p > 1 && c.model.num_layers > 0) {
    if (!uneven)
      require(c.model.num_layers % p == 0,
              "--num-layers (" + std::to_string(c.model.num_layers) +
                  ") must be divisible by --pipeline-model-parallel-size (" + std::to_string(p) +
                  "), or give --decoder-first/last-pipeline-num-layers for an uneven split");
    const int n = c.num_layers_per_virtual_pipeline_stage;
    if (n > 0 && c.model.num_layers % p == 0)
      require((c.model.num_layers / p) % n == 0,
              "layers per pipeline rank (" + std::to_string(c.model.num_layers / p) +
                  ") must be divisible by --num-layers-per-virtual-pipeline-stage (" +
                  std::to_string(n) + ")");
    require(!(uneven && n > 0),
            "--decoder-first/last-pipeline-num-layers cannot be combined with "
            "--num-layers-per-virtual-pipeline-stage yet");
    if (uneven && n == 0)
      require(!c.layers_per_virtual_stage().empty(),
              "--decoder-first-pipeline-num-layers (" +
                  std::to_string(c.decoder_first_pipeline_num_layers) +
                  ") and --decoder-last-pipeline-num-layers (" +
                  std::to_string(c.decoder_last_pipeline_num_layers) +
                  ") must be >= 0 and leave the remaining " +
                  std::to_string(c.model.num_layers - c.decoder_first_pipeline_num_layers -
                                 c.decoder_last_pipeline_num_layers) +
                  " of --num-layers an equal, positive share on every other stage");
  }
  require(!uneven || p > 1,
          "--decoder-first/last-pipeline-num-layers need --pipeline-model-parallel-size > 1");
  require(c.num_layers_per_virtual_pipeline_stage >= 0,
          "--num-layers-per-virtual-pipeline-stage must be >= 0");
  require(c.num_layers_per_virtual_pipeline_stage == 0 || p > 1,
          "--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size > 1");
  require(c.micro_batch_size > 0, "--micro-batch-size must be > 0");
  require(c.global_batch_size >= 0, "--global-batch-size must be > 0");
  require((long)c.micro_batch_size * c.data_parallel_size() <= INT_MAX,
          "--micro-batch-size x data-parallel size (" + std::to_string(c.micro_batch_size) + " x " +
              std::to_string(c.data_parallel_size()) + ") must fit an int");
  if (c.micro_batch_size > 0 && c.global_batch_size > 0) {
    long unit = (long)c.micro_batch_size * c.data_parallel_size();
    require(c.global_batch_size % unit == 0,
            "--global-batch-size (" + std::to_string(c.global_batch_size) +
                ") must be divisible by --micro-batch-size x data-parallel size (" +
                std::to_string(c.micro_batch_size) + " x " +
                std::to_string(c.data_parallel_size()) + ")");
  }
  const bool ramp_ok = validate_rampup(c, errors);
  if (p > 0 && c.micro_batch_size > 0 && c.num_micro_batches() > 0 && ramp_ok) {
    // Every number of micro-batches the ramp-up passes through must suit the schedule.
    const long unit = (long)c.micro_batch_size * c.data_parallel_size();
    std::set<std::string> seen;
    for (long gbs : c.batch_schedule().sizes()) {
      try {
        for (const std::string& e :
             pipeline_parallel::validate_schedule(pipeline_schedule_of(c, (int)(gbs / unit))))
          if (seen.insert(e).second)
            errors.push_back(gbs == c.effective_global_batch()
                                 ? e
                                 : e + " (at global batch " + std::to_string(gbs) +
                                       " of --rampup-batch-size)");
      } catch (const std::exception& e) {
        errors.push_back(std::string("--pipeline-schedule: ") + e.what());
        break;
      }
    }
  }
  validate_schedule_flags(c, ramp_ok, errors);
  require(c.lr >= 0.f && std::isfinite(c.lr), "--lr must be >= 0 and finite");
  require(c.min_lr >= 0.f && std::isfinite(c.min_lr), "--min-lr must be >= 0 and finite");
  require(c.min_lr <= c.lr, "--min-lr (" + num(c.min_lr) + ") must be <= --lr (" + num(c.lr) + ")");
  try {
    parse_decay_style(c.lr_decay_style);
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
  require(c.adam.beta1 >= 0.f && c.adam.beta1 < 1.f, "--adam-beta1 must be in [0, 1)");
  require(c.adam.beta2 >= 0.f && c.adam.beta2 < 1.f, "--adam-beta2 must be in [0, 1)");
  require(c.adam.eps > 0.f && std::isfinite(c.adam.eps), "--adam-eps must be > 0 and finite");
  require(c.adam.weight_decay >= 0.f && std::isfinite(c.adam.weight_decay),
          "--weight-decay must be >= 0 and finite");
  require(c.adam.clip_grad >= 0.f && std::isfinite(c.adam.clip_grad),
          "--clip-grad must be >= 0 and finite (0 disables clipping)");
  require(c.log_interval > 0, "--log-interval must be > 0");
  require(c.timing_log_level >= 0 && c.timing_log_level <= 2,
          "--timing-log-level must be 0, 1 or 2, got " + std::to_string(c.timing_log_level));
  require(c.straggler_threshold > 0,
          "--straggler-threshold must be > 0 (a fraction over the median)");
  require(c.eval_interval >= 0, "--eval-interval must be >= 0");
  require(c.eval_iters >= 0, "--eval-iters must be >= 0");
  require(c.threads >= 0, "--threads must be >= 0");
  require(c.peak_tflops >= 0 && std::isfinite(c.peak_tflops),
          "--peak-tflops must be >= 0 and finite");
  require(c.mock_data == c.data_path.empty(),
          "exactly one data source is needed: --mock-data or --data-path");
  if (!c.data_path.empty()) {
    try {
      for (const data::WeightedPrefix& p : data::parse_data_path(c.data_path))
        for (const char* ext : {".bin", ".idx"})
          require(std::filesystem::exists(p.prefix + ext),
                  "--data-path: " + p.prefix + ext +
                      " does not exist (expected a .bin/.idx pair "
                      "written by trident preprocess or Megatron)");
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
  }
  try {
    data::parse_split(c.split);
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
  for (const std::string& e : tokenizer::check_tokenizer_options(c.tokenizer)) errors.push_back(e);
  return errors;
}

}  // namespace trident
