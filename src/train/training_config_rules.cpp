// validate_training_config: the rules of `trident train`'s flags, one function per family.
// Each family appends the messages of the rules it finds broken to one list, and the
// families run in a fixed order, so the messages (and their order) are the same every run.
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "data/dataset_builder.h"
#include "data/gpt_dataset.h"
#include "optim/lr_scheduler.h"
#include "pipeline_parallel/schedules.h"
#include "train/checkpointing.h"
#include "train/context_parallel_rules.h"
#include "train/lora_rules.h"
#include "train/moe_rules.h"
#include "train/training_config.h"

namespace trident::train {

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

// require(ok, message): appends message to errors when the rule (ok) is broken.
auto requirer(std::vector<std::string>& errors) {
  return [&errors](bool ok, const std::string& message) {
    if (!ok) errors.push_back(message);
  };
}

// t, p and the world size; data-parallel buckets and overlap; sequence parallelism.
void check_parallel_layout(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  const int t = c.tensor_model_parallel_size, p = c.pipeline_model_parallel_size;
  const int cp = c.context_parallel_size;
  require(t > 0, "--tensor-model-parallel-size must be > 0");
  require(p > 0, "--pipeline-model-parallel-size must be > 0");
  if (t > 0 && p > 0 && cp == 1)
    require(c.world_size % ((long)t * p) == 0,
            "world size (" + std::to_string(c.world_size) +
                ") must be divisible by --tensor-model-parallel-size x "
                "--pipeline-model-parallel-size (" +
                std::to_string(t) + " x " + std::to_string(p) + ")");
  if (t > 0 && p > 0 && cp > 1)
    require(c.world_size % ((long)t * cp * p) == 0,
            "world size (" + std::to_string(c.world_size) +
                ") must be divisible by --tensor-model-parallel-size x "
                "--context-parallel-size x --pipeline-model-parallel-size (" +
                std::to_string(t) + " x " + std::to_string(cp) + " x " + std::to_string(p) + ")");
  require(c.ddp_bucket_size >= 0, "--ddp-bucket-size must be >= 0");
  require(!c.overlap_param_gather || (c.distributed_optimizer() && c.overlap_grad_reduce),
          "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce "
          "(Megatron's rule: the parameters it gathers are the optimizer's shards)");
  require(c.logits_chunk_rows >= 0, "--logits-chunk-rows must be >= 0 (0: automatic)");
  if (c.sequence_parallel_active() && t > 0 && cp > 0) {
    // Each rank keeps a contiguous 1/t of the micro-batch's rows (Megatron: the sequence
    // dimension must divide by t); under context parallelism of this cp rank's rows.
    const std::string seq =
        cp > 1 ? " x --seq-length / --context-parallel-size (" : " x --seq-length (";
    const std::string rows = std::to_string(c.micro_batch_size) + " x " +
                             std::to_string(c.model.seq_length) +
                             (cp > 1 ? " / " + std::to_string(cp) : std::string());
    require((long)c.micro_batch_size * (c.model.seq_length / cp) % t == 0,
            "--sequence-parallel needs --micro-batch-size" + seq + rows +
                ") divisible by --tensor-model-parallel-size (" + std::to_string(t) + ")");
    // bf16 blocks travel as floats holding two values each.
    require(!c.bf16 || c.model.hidden_size % 2 == 0,
            "--sequence-parallel with --bf16 needs an even --hidden-size");
  }
}

// bf16 or fp16, dropout, and fp16's loss scaling.
void check_precision(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  require(!(c.bf16 && c.fp16), "give --bf16 or --fp16, not both");
  require(c.hidden_dropout >= 0.f && c.hidden_dropout < 1.f, "--hidden-dropout must be in [0, 1)");
  require(c.attention_dropout >= 0.f && c.attention_dropout < 1.f,
          "--attention-dropout must be in [0, 1)");
  if (!c.fp16) return;
  require(c.loss_scale >= 0.f && std::isfinite(c.loss_scale),
          "--loss-scale must be >= 0 and finite (0: dynamic)");
  require(c.initial_loss_scale > 0.f && std::isfinite(c.initial_loss_scale),
          "--initial-loss-scale must be > 0 and finite");
  require(c.min_loss_scale > 0.f && c.min_loss_scale <= c.initial_loss_scale,
          "--min-loss-scale must be > 0 and <= --initial-loss-scale");
  require(c.loss_scale_window > 0, "--loss-scale-window must be > 0");
  require(c.hysteresis > 0, "--hysteresis must be > 0");
}

// --recompute-granularity and the method and layer count that only full takes.
void check_recomputation(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
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
}

// Saving and loading checkpoints; the hang watchdog and the injected faults that test them.
void check_checkpoint_and_fault_flags(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  require(c.save_interval >= 0, "--save-interval must be >= 0");
  require(c.keep_checkpoints >= 0, "--keep-checkpoints must be >= 0");
  require(c.save_hf_dtype.empty() || c.save_hf_dtype == "bf16" || c.save_hf_dtype == "fp32",
          "--save-hf-dtype must be bf16 or fp32 (got '" + c.save_hf_dtype + "')");
  require(c.save_interval == 0 || !c.save.empty(), "--save-interval needs --save");
  require(!c.async_save || !c.save.empty(), "--async-save needs --save");
  // A restart of a run that began from --load-hf resumes its own checkpoint instead. LoRA
  // takes both: the frozen base (--load-hf) and a checkpoint of its adapters (--load).
  require(c.load.empty() || c.load_hf.empty() || c.load_defaulted_to_save || c.model.lora.enabled(),
          "give --load or --load-hf, not both (both only with --lora-rank: base and adapters)");
  require(!c.finetune || !c.load.empty(), "--finetune needs --load (the weights to start from)");
  require(!c.override_checkpoint_config || !c.load.empty(),
          "--override-checkpoint-config needs --load");
  require(!(c.finetune && c.override_checkpoint_config),
          "give --finetune (weights only, run settings free) or --override-checkpoint-config "
          "(resume everything despite changed settings), not both");
  for (const std::string& e : load_path_errors(c)) errors.push_back(e);
  require(c.distributed_timeout_minutes >= 0,
          "--distributed-timeout-minutes must be >= 0 (0 turns the watchdog off)");
  require(c.inject_fault_kind == "error" || c.inject_fault_kind == "stop" ||
              c.inject_fault_kind == "spin",
          "--inject-fault-kind must be error, stop or spin");
  require(
      c.inject_fault_save_point == "before-commit" || c.inject_fault_save_point == "mid-commit" ||
          c.inject_fault_save_point == "stall-write" || c.inject_fault_save_point == "write-error",
      "--inject-fault-save-point must be before-commit, mid-commit, stall-write or "
      "write-error");
}

// Stopping early: signals, a time budget, an iteration count.
void check_exit_flags(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  require(!(c.exit_signal_handler && c.no_exit_signal_handler),
          "give --exit-signal-handler or --no-exit-signal-handler, not both");
  require(c.exit_duration_in_mins >= 0 && std::isfinite(c.exit_duration_in_mins),
          "--exit-duration-in-mins must be >= 0 (0: no limit)");
  require(c.exit_interval >= 0, "--exit-interval must be >= 0 (0: never)");
}

// Megatron's --account-for-embedding/loss-in-pipeline-split: L + e + l divisible by p (and
// by p x N with --num-layers-per-virtual-pipeline-stage N), not with the uneven-stage flags;
// trident also leaves no virtual stage without a layer.
void check_account_for_split(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  const bool embedding = c.account_for_embedding_in_pipeline_split,
             loss = c.account_for_loss_in_pipeline_split;
  if (!embedding && !loss) return;
  const std::string flags = embedding && loss ? "--account-for-embedding-in-pipeline-split and "
                                                "--account-for-loss-in-pipeline-split"
                            : embedding       ? "--account-for-embedding-in-pipeline-split"
                                              : "--account-for-loss-in-pipeline-split";
  const int p = c.pipeline_model_parallel_size, n = c.num_layers_per_virtual_pipeline_stage;
  const long counted = (long)c.model.num_layers + embedding + loss;
  require(c.decoder_first_pipeline_num_layers == 0 && c.decoder_last_pipeline_num_layers == 0,
          flags +
              " cannot be combined with --decoder-first/last-pipeline-num-layers (Megatron's "
              "rule)");
  if (p < 1 || c.model.num_layers < 1) return;
  if (counted % p) {
    errors.push_back(
        "--num-layers (" + std::to_string(c.model.num_layers) + ") plus " +
        std::to_string(embedding + loss) + " for " + flags + " (" + std::to_string(counted) +
        ") must be divisible by --pipeline-model-parallel-size (" + std::to_string(p) + ")");
    return;
  }
  if (n > 0 && (counted / p) % n) {
    errors.push_back("layers per pipeline rank with " + flags + " (" + std::to_string(counted / p) +
                     ") must be divisible by --num-layers-per-virtual-pipeline-stage (" +
                     std::to_string(n) + ")");
    return;
  }
  require(!c.layers_per_virtual_stage().empty(),
          flags + " leave a pipeline stage without a transformer layer (" +
              std::to_string(counted) + " counted layers over " +
              std::to_string(p * c.virtual_stages()) + " stages); trident needs one in each");
}

// --pipeline-split: balanced or even, alone, and balanced only without virtual stages.
void check_split_rule(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  const std::string& rule = c.pipeline_split;
  if (rule.empty()) return;
  require(rule == "balanced" || rule == "even",
          "--pipeline-split must be balanced or even, got '" + rule + "'");
  require(c.decoder_first_pipeline_num_layers == 0 && c.decoder_last_pipeline_num_layers == 0 &&
              !c.account_for_embedding_in_pipeline_split && !c.account_for_loss_in_pipeline_split,
          "--pipeline-split cannot be combined with --decoder-first/last-pipeline-num-layers or "
          "--account-for-embedding/loss-in-pipeline-split: each sets the split");
  require(rule != "balanced" || c.num_layers_per_virtual_pipeline_stage == 0,
          "--pipeline-split balanced cannot be combined with "
          "--num-layers-per-virtual-pipeline-stage (interleaved stages split evenly)");
}

// How the layers split over the pipeline stages: evenly, balanced by cost, into virtual
// stages, or unevenly (--decoder-first/last-pipeline-num-layers, --account-for-*).
void check_pipeline_stages(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  const int p = c.pipeline_model_parallel_size, layers = c.model.num_layers;
  const int first = c.decoder_first_pipeline_num_layers, last = c.decoder_last_pipeline_num_layers;
  const bool uneven = first != 0 || last != 0;
  const bool accounted =
      c.account_for_embedding_in_pipeline_split || c.account_for_loss_in_pipeline_split;
  check_split_rule(c, errors);
  check_account_for_split(c, errors);
  if (p > 1 && layers > 0 && !accounted) {
    if (!uneven)
      require(layers % p == 0,
              "--num-layers (" + std::to_string(layers) +
                  ") must be divisible by --pipeline-model-parallel-size (" + std::to_string(p) +
                  "), or give --decoder-first/last-pipeline-num-layers for an uneven split");
    const int n = c.num_layers_per_virtual_pipeline_stage;
    if (n > 0 && layers % p == 0)
      require((layers / p) % n == 0,
              "layers per pipeline rank (" + std::to_string(layers / p) +
                  ") must be divisible by --num-layers-per-virtual-pipeline-stage (" +
                  std::to_string(n) + ")");
    require(!(uneven && n > 0),
            "--decoder-first/last-pipeline-num-layers cannot be combined with "
            "--num-layers-per-virtual-pipeline-stage yet");
    if (uneven && n == 0)
      require(!c.layers_per_virtual_stage().empty(),
              "--decoder-first-pipeline-num-layers (" + std::to_string(first) +
                  ") and --decoder-last-pipeline-num-layers (" + std::to_string(last) +
                  ") must be >= 0 and leave the remaining " +
                  std::to_string(layers - first - last) +
                  " of --num-layers an equal, positive share on every other stage");
  }
  require(!uneven || p > 1,
          "--decoder-first/last-pipeline-num-layers need --pipeline-model-parallel-size > 1");
  require(c.num_layers_per_virtual_pipeline_stage >= 0,
          "--num-layers-per-virtual-pipeline-stage must be >= 0");
  require(c.num_layers_per_virtual_pipeline_stage == 0 || p > 1,
          "--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size > 1");
}

// --data-parallel-sharding-strategy: a known name, agreeing with --use-distributed-optimizer,
// and a schedule that finishes each micro-batch's weight gradients in its backward.
void check_sharding(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  const std::string& name = c.data_parallel_sharding_strategy;
  if (name.empty()) return;
  const auto strategy = data_parallel::parse_sharding_strategy(name);
  require(strategy.has_value(),
          "--data-parallel-sharding-strategy must be no_shard, optim, "
          "optim_grads or optim_grads_params, got '" +
              name + "'");
  if (!strategy) return;
  require(!(c.use_distributed_optimizer && *strategy == data_parallel::ShardingStrategy::kNoShard),
          "--use-distributed-optimizer shards the optimizer (optim); it cannot be combined with "
          "--data-parallel-sharding-strategy no_shard");
  require(!data_parallel::shards_gradients(*strategy) || c.pipeline_schedule != "zb-h1",
          "--data-parallel-sharding-strategy " + name +
              " reduce-scatters each micro-batch's gradients when its backward ends, and "
              "--pipeline-schedule zb-h1 computes weight gradients after later backwards: use "
              "1f1b or interleaved, or --data-parallel-sharding-strategy optim");
}

// The micro-batch and the global batch, which splits into whole micro-batches per replica.
void check_batch_sizes(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
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
}

// --rampup-batch-size: Megatron's checks, plus one it makes only at run time (every size
// must split into whole micro-batches on every replica), made here before step 1. Returns
// whether the ramp-up is valid (or absent), which the rules after it take for granted.
bool check_rampup(const TrainingConfig& c, std::vector<std::string>& errors) {
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
  const bool grows_to_gbs = inc > 0 && start > 0 && start <= gbs;
  if (grows_to_gbs)
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
  if (grows_to_gbs)
    require((gbs - start) / inc < kMaxRampupSizes,
            "the ramp-up passes through " + std::to_string((gbs - start) / inc + 1) +
                " batch sizes, more than " + std::to_string(kMaxRampupSizes));
  return errors.size() == before;
}

// Every number of micro-batches the (valid) ramp-up passes through must suit the pipeline
// schedule; each rule it breaks is reported once, naming the first batch size that breaks it.
void check_schedule_at_every_batch_size(const TrainingConfig& c, std::vector<std::string>& errors) {
  if (c.pipeline_model_parallel_size <= 0 || c.micro_batch_size <= 0 || c.num_micro_batches() <= 0)
    return;
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

// The training length and the learning-rate schedule's lengths: iteration-based and
// sample-based flags never mix (Megatron's rule).
void check_length_flags(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  require(c.train_iters >= 0, "--train-iters must be > 0");
  require(c.train_samples >= 0, "--train-samples must be > 0");
  require(c.lr_warmup_iters >= 0, "--lr-warmup-iters must be >= 0");
  require(c.lr_decay_iters >= 0, "--lr-decay-iters must be >= 0");
  require(c.lr_warmup_samples >= 0, "--lr-warmup-samples must be >= 0");
  require(c.lr_decay_samples >= 0, "--lr-decay-samples must be >= 0");
  require(c.lr_wsd_decay_iters >= 0, "--lr-wsd-decay-iters must be >= 0");
  require(c.lr_wsd_decay_samples >= 0, "--lr-wsd-decay-samples must be >= 0");
  const bool fraction = c.lr_warmup_fraction >= 0;
  require(c.lr_warmup_fraction <= 1, "--lr-warmup-fraction must be in [0, 1]");
  if (c.sample_based()) {
    require(c.lr_wsd_decay_iters == 0,
            "sample-based training (--train-samples) takes --lr-wsd-decay-samples, not "
            "--lr-wsd-decay-iters");
  } else {
    require(c.lr_wsd_decay_samples == 0,
            "--lr-wsd-decay-samples needs sample-based training (--train-samples); with "
            "--train-iters use --lr-wsd-decay-iters");
  }
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
}

// What the lengths come to in samples, given a valid batch schedule: they must fit the
// counters, train at least one batch, and warm up before the decay ends.
void check_training_length(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  if (c.effective_global_batch() <= 0 || c.train_iters < 0 || c.train_samples < 0) return;
  const double gbs = c.effective_global_batch();
  const bool samples_fit =
      (double)c.train_iters * gbs < kMaxSamples && (double)c.lr_decay_iters * gbs < kMaxSamples &&
      (double)c.lr_warmup_iters * gbs < kMaxSamples &&
      (double)c.lr_wsd_decay_iters * gbs < kMaxSamples && (double)c.train_samples < kMaxSamples;
  require(samples_fit,
          "--train-iters, --lr-decay-iters, --lr-warmup-iters and --lr-wsd-decay-iters x the "
          "global batch, and --train-samples, must stay below 2^62 samples");
  if (!samples_fit) return;
  require((double)c.eval_runs() * c.eval_iters * gbs < kMaxSamples,
          "--eval-iters x the global batch x the evaluations must stay below 2^62 samples");
  require(c.total_train_iters() > 0, "--train-samples (" + std::to_string(c.train_samples) +
                                         ") is less than one global batch: nothing to train");
  try {
    const optim::LrSchedule lr = c.lr_schedule();
    require(lr.decay_steps > 0,
            "the learning-rate decay must end after step 0 (--lr-decay-iters "
            "/ --lr-decay-samples)");
    if (lr.warmup_steps > 0)
      require(lr.warmup_steps < lr.decay_steps,
              "the warm-up (" + num(lr.warmup_steps) +
                  " samples) must end before the decay does (" + std::to_string(lr.decay_steps) +
                  " samples; --lr-decay-iters / --lr-decay-samples default to the training "
                  "length; iterations count as iterations x global batch)");
    if (lr.style == optim::DecayStyle::kWsd && lr.wsd_decay_steps > 0)
      require(lr.wsd_decay_steps <= lr.decay_steps,
              "--lr-wsd-decay-iters / --lr-wsd-decay-samples (" +
                  std::to_string(lr.wsd_decay_steps) + " samples) must be <= the decay length (" +
                  std::to_string(lr.decay_steps) +
                  " samples; --lr-decay-iters / --lr-decay-samples, by default the training "
                  "length; iterations count as iterations x global batch)");
  } catch (const std::exception& e) {
    // An unknown style is check_optimizer's to report, once.
    if (!dynamic_cast<const std::invalid_argument*>(&e)) errors.push_back(e.what());
  }
}

// WSD's annealing phase: WSD needs its length, and its flags mean nothing to another style
// (Megatron ignores them; a run that meant WSD would silently decay otherwise).
void check_wsd_flags(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  const bool wsd_length = c.lr_wsd_decay_iters > 0 || c.lr_wsd_decay_samples > 0;
  if (c.lr_decay_style == "WSD") {
    require(wsd_length || c.lr_wsd_decay_iters < 0 || c.lr_wsd_decay_samples < 0,
            "--lr-decay-style WSD needs the length of its annealing phase: "
            "--lr-wsd-decay-iters N (or --lr-wsd-decay-samples N with --train-samples)");
  } else {
    require(!wsd_length && c.lr_wsd_decay_style.empty(),
            "--lr-wsd-decay-style, --lr-wsd-decay-iters and --lr-wsd-decay-samples need "
            "--lr-decay-style WSD (got '" +
                c.lr_decay_style + "')");
  }
  if (c.lr_wsd_decay_style.empty()) return;
  try {
    optim::parse_wsd_decay_style(c.lr_wsd_decay_style);
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
}

// The learning rates, the decay style and AdamW's settings.
void check_optimizer(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  require(c.lr >= 0.f && std::isfinite(c.lr), "--lr must be >= 0 and finite");
  require(c.min_lr >= 0.f && std::isfinite(c.min_lr), "--min-lr must be >= 0 and finite");
  require(c.min_lr <= c.lr, "--min-lr (" + num(c.min_lr) + ") must be <= --lr (" + num(c.lr) + ")");
  try {
    optim::parse_decay_style(c.lr_decay_style);
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
  check_wsd_flags(c, errors);
  require(c.adam.beta1 >= 0.f && c.adam.beta1 < 1.f, "--adam-beta1 must be in [0, 1)");
  require(c.adam.beta2 >= 0.f && c.adam.beta2 < 1.f, "--adam-beta2 must be in [0, 1)");
  require(c.adam.eps > 0.f && std::isfinite(c.adam.eps), "--adam-eps must be > 0 and finite");
  require(c.adam.weight_decay >= 0.f && std::isfinite(c.adam.weight_decay),
          "--weight-decay must be >= 0 and finite");
  require(c.adam.clip_grad >= 0.f && std::isfinite(c.adam.clip_grad),
          "--clip-grad must be >= 0 and finite (0 disables clipping)");
}

// Logging, timers, evaluation, threads and the MFU peak.
void check_logging_and_runtime(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  require(c.log_interval > 0, "--log-interval must be > 0");
  require(c.timing_log_level >= 0 && c.timing_log_level <= 2,
          "--timing-log-level must be 0, 1 or 2, got " + std::to_string(c.timing_log_level));
  require(c.straggler_threshold > 0,
          "--straggler-threshold must be > 0 (a fraction over the median)");
  require(c.heartbeat_seconds >= 0 && std::isfinite(c.heartbeat_seconds),
          "--heartbeat-seconds must be >= 0 and finite (0: no heartbeat)");
  require(c.eval_interval >= 0, "--eval-interval must be >= 0");
  require(c.eval_iters >= 0, "--eval-iters must be >= 0");
  require(!c.skip_train || c.eval_iters > 0,
          "--skip-train only evaluates: --eval-iters must be > 0");
  require(!c.skip_train || (c.save.empty() && c.save_hf.empty()),
          "--skip-train trains nothing to save: drop --save and --save-hf");
  require(c.threads >= 0, "--threads must be >= 0");
  require(c.sample_interval >= 0, "--sample-interval must be >= 0");
  require(c.sample_interval > 0 || c.sample_prompt.empty(),
          "--sample-prompt needs --sample-interval N (how often to print a sample)");
  require(c.sample_interval == 0 || !c.sample_prompt.empty(),
          "--sample-interval needs --sample-prompt (the text the samples continue)");
  require(c.sample_interval == 0 || c.tokenizer.given(),
          "--sample-interval needs a tokenizer (--vocab-file and --merge-file, or "
          "--tokenizer-model) to turn --sample-prompt into tokens and the samples into text");
  require(
      c.sample_interval == 0 || (c.sample_tokens >= 1 && c.sample_tokens < c.model.max_positions()),
      "--sample-tokens must be >= 1 and below the model's positions (" +
          std::to_string(c.model.max_positions()) + ")");
  require(c.peak_tflops >= 0 && std::isfinite(c.peak_tflops),
          "--peak-tflops must be >= 0 and finite");
}

// One data source, whose files exist; the split; the tokenizer's flags.
void check_data(const TrainingConfig& c, std::vector<std::string>& errors) {
  const auto require = requirer(errors);
  require(c.mock_data == c.data_path.empty(),
          "exactly one data source is needed: --mock-data or --data-path");
  require(!c.sft || !c.mock_data, "--sft needs --data-path (datasets with loss masks)");
  const PackedDocuments& p = c.packed;
  require(
      !(p.reset_position_ids || p.reset_attention_mask || p.eod_mask_loss || c.pack_documents) ||
          p.eod >= 0,
      "--reset-position-ids, --reset-attention-mask, --eod-mask-loss and --pack-documents "
      "need the end-of-document id: give the tokenizer (--tokenizer-type ...) or --eod-id");
  require(!c.pack_documents || !c.mock_data, "--pack-documents needs --data-path");
  // Packed conversations that attend to each other, or whose positions run on, train a
  // different model than the conversations alone: refused rather than run silently.
  require(!c.pack_documents || (p.reset_attention_mask && p.reset_position_ids),
          "--pack-documents needs --reset-attention-mask and --reset-position-ids (without "
          "them the packed documents attend to each other and their positions run on)");
  require(p.eod < c.model.vocab_size, "--eod-id " + std::to_string(p.eod) +
                                          " is not below the vocabulary size " +
                                          std::to_string(c.model.vocab_size));
  if (!c.data_path.empty()) {
    try {
      for (const data::WeightedPrefix& p : data::parse_data_path(c.data_path)) {
        if (c.sft)
          for (const char* ext : {".bin", ".idx"})
            require(std::filesystem::exists(data::loss_mask_prefix(p.prefix) + ext),
                    "--sft: " + data::loss_mask_prefix(p.prefix) + ext +
                        " does not exist (preprocess --apply-chat-template writes the loss "
                        "mask beside the tokens)");
        for (const char* ext : {".bin", ".idx"})
          require(std::filesystem::exists(p.prefix + ext),
                  "--data-path: " + p.prefix + ext +
                      " does not exist (expected a .bin/.idx pair "
                      "written by trident preprocess or Megatron)");
      }
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
}

}  // namespace

std::vector<std::string> validate_training_config(const TrainingConfig& c) {
  std::vector<std::string> errors = validate_model_config(c.model, c.tensor_model_parallel_size);
  check_parallel_layout(c, errors);
  check_context_parallel(c, errors);
  check_sharding(c, errors);
  check_moe(c, errors);
  check_lora(c, errors);
  check_precision(c, errors);
  check_recomputation(c, errors);
  check_checkpoint_and_fault_flags(c, errors);
  check_exit_flags(c, errors);
  check_pipeline_stages(c, errors);
  check_batch_sizes(c, errors);
  // The rules below walk the batch schedule, which an invalid ramp-up cannot give.
  const bool ramp_ok = check_rampup(c, errors);
  if (ramp_ok) check_schedule_at_every_batch_size(c, errors);
  check_length_flags(c, errors);
  if (ramp_ok) check_training_length(c, errors);
  check_optimizer(c, errors);
  check_logging_and_runtime(c, errors);
  check_data(c, errors);
  // Only a valid run is compared with the checkpoint it resumes (its settings need the rest).
  if (errors.empty())
    for (const std::string& e : resume_errors(c)) errors.push_back(e);
  return errors;
}

}  // namespace trident::train
