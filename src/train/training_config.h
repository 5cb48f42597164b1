#pragma once
// Everything `trident train` needs, parsed once from the command line (and an optional
// TOML config file) and validated once; nothing downstream re-reads flags.
#include <cstdint>
#include <string>
#include <vector>

#include "config/batch_schedule.h"
#include "config/model_config.h"
#include "data_parallel/sharding_strategy.h"
#include "engine/rank_layout.h"
#include "engine/rank_model.h"
#include "kernels/dropout.h"
#include "kernels/low_precision.h"
#include "optim/adamw.h"
#include "optim/lr_scheduler.h"
#include "pipeline_parallel/schedules.h"
#include "tokenizer/build_tokenizer.h"

namespace trident::train {

struct TrainingConfig {
  ModelConfig model;
  std::string model_preset;  // --model-preset, applied before explicit shape flags

  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  // Context parallelism (context_parallel/context_parallel.h): each sequence split over c
  // ranks; --cp-comm-type p2p (ring), a2a (heads) or allgather.
  int context_parallel_size = 1;
  std::string cp_comm_type = "p2p";
  int num_layers_per_virtual_pipeline_stage = 0;  // 0: one model chunk per pipeline rank
  int decoder_first_pipeline_num_layers = 0;      // 0: an even share (uneven splits, v = 1)
  int decoder_last_pipeline_num_layers = 0;
  // Megatron's: the embedding / the loss counts as one layer of an even split.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  // --pipeline-split: "balanced" (stages of equal model FLOPs, the output layer and loss
  // counted; engine/pipeline_split.h) or "even" (Megatron's L / p). "": balanced where it
  // applies (p > 1, v = 1, no other split flag), else even.
  std::string pipeline_split;
  std::string pipeline_schedule;  // gpipe | 1f1b | interleaved; "": by v
  bool scatter_gather = true;     // --no-scatter-gather turns it off
  // --sequence-parallel (Korthikanti et al. 2022). At t = 1 it does nothing: Megatron
  // turns it off with a warning, and so does trident (sequence_parallel_active()).
  bool sequence_parallel = false;
  std::string timeline;      // Chrome-trace output
  std::string timeline_svg;  // the same drawn as `trident schedule --svg` draws
  // --report-dir: metrics, timeline, its drawing and the report page under one directory.
  std::string report_dir;
  bool records_timeline() const { return !timeline.empty() || !timeline_svg.empty(); }
  bool use_distributed_optimizer = false;  // ZeRO-1 over the data-parallel group
  // --data-parallel-sharding-strategy (Megatron-FSDP's names); "": optim with
  // --use-distributed-optimizer, else no_shard.
  std::string data_parallel_sharding_strategy;
  data_parallel::ShardingStrategy sharding_strategy() const;
  // The Adam moments are sharded (ZeRO-1 and up): Megatron's distributed optimizer.
  bool distributed_optimizer() const {
    return data_parallel::shards_optimizer(sharding_strategy());
  }
  bool overlap_grad_reduce = false;   // bucketed all-reduce during backward
  bool overlap_param_gather = false;  // distributed optimizer: all-gather during forward
  long ddp_bucket_size = 0;           // floats per bucket (0: Megatron's default)
  // Mixture of experts: the experts' layout and the router's training-side options
  // (Megatron's flags; the shape is model.moe). Checked by train/moe_rules.cpp.
  int expert_model_parallel_size = 1;   // EP: experts split over EP of the t x d ranks
  int expert_tensor_parallel_size = 0;  // ETP; 0: t (trident takes t or 1)
  std::string moe_layer_freq = "1";     // --moe-layer-freq as given; model.moe.layer_pattern
  std::string moe_token_dispatcher_type = "alltoall";  // Megatron defaults to allgather
  std::vector<std::string> moe_router_load_balancing_type = {"aux_loss"};
  std::vector<float> moe_aux_loss_coeff = {0.f};  // one per load-balancing type
  float moe_z_loss_coeff = 0.f;                   // 0: no z-loss (Megatron's None)
  float moe_input_jitter_eps = 0.f;               // 0: none (not implemented: refused)
  bool moe_grouped_gemm = false;                  // accepted; the experts are always grouped
  bool moe_per_layer_logging = false;
  int expert_tensor_parallel() const {
    return expert_tensor_parallel_size > 0 ? expert_tensor_parallel_size
                                           : tensor_model_parallel_size;
  }
  int world_size = 1;  // set by the launcher, not a flag

  int micro_batch_size = 4;
  int global_batch_size = 0;  // 0: micro_batch_size * data-parallel size

  // How long to train and how the learning rate moves: by iterations (--train-iters,
  // --lr-warmup-iters, --lr-decay-iters) or by samples (--train-samples,
  // --lr-warmup-samples, --lr-decay-samples), never a mix (Megatron's rule). 0: not given.
  long train_iters = 0;  // neither length given: 100 iterations
  long train_samples = 0;
  std::vector<long> rampup_batch_size;  // --rampup-batch-size start increment samples
  float lr = 6e-4f;
  float min_lr = 0.f;
  std::string lr_decay_style = "cosine";
  long lr_warmup_iters = 0;
  long lr_decay_iters = 0;  // 0: train_iters
  long lr_warmup_samples = 0;
  long lr_decay_samples = 0;       // 0: train_samples
  double lr_warmup_fraction = -1;  // < 0: not given; else warm-up = fraction x decay steps
  // --lr-decay-style WSD: the annealing phase, the last of the decay length, in iterations
  // or samples as the other lengths (0: not given; WSD needs one), and its curve ("":
  // Megatron's default, exponential).
  std::string lr_wsd_decay_style;
  long lr_wsd_decay_iters = 0;
  long lr_wsd_decay_samples = 0;
  optim::AdamWConfig adam;

  std::uint64_t seed = 1234;
  int log_interval = 10;
  long eval_interval = 0;  // 0: validate only at the end
  int eval_iters = 10;     // global batches per evaluation (Megatron's meaning)
  // Megatron's --skip-train: no step; the loaded (or initial) weights' validation and test
  // losses, then exit. The before of a fine-tuning's before/after.
  bool skip_train = false;

  bool mock_data = false;
  std::vector<std::string> data_path;  // "prefix" or "w1 prefix1 w2 prefix2 ..."
  std::string split = "969,30,1";
  std::string data_cache_path;  // empty: <data dir>/cache
  // Supervised fine-tuning: every --data-path prefix has a loss mask beside it
  // (data::loss_mask_prefix), and the loss is the mean over the targets it counts.
  bool sft = false;
  // Packed documents (Megatron's --reset-position-ids, --reset-attention-mask,
  // --eod-mask-loss); packed.eod is --eod-id, else the tokenizer's end-of-document id.
  PackedDocuments packed{};
  // Whole documents packed best-fit into samples, padded with the EOD (data/packed_dataset.h).
  bool pack_documents = false;
  // Optional: when given, the model's --vocab-size defaults to the tokenizer's.
  tokenizer::TokenizerOptions tokenizer;

  // Mixed precision (Megatron's flags; fp16's scaler defaults are Megatron's too).
  bool bf16 = false;
  bool fp16 = false;
  float loss_scale = 0.f;  // fp16: a constant scale; 0: dynamic
  float initial_loss_scale = 4294967296.f;
  float min_loss_scale = 1.f;
  long loss_scale_window = 1000;
  int hysteresis = 2;
  kernels::Precision precision() const;

  float hidden_dropout = 0.f;  // Megatron defaults to 0.1; trident to none
  float attention_dropout = 0.f;
  kernels::DropoutConfig dropout() const;
  bool sequence_parallel_active() const {
    return sequence_parallel && tensor_model_parallel_size > 1;
  }

  std::string recompute_granularity;  // "" | full | selective
  std::string recompute_method;       // uniform | block
  int recompute_num_layers = 0;
  // Rows of logits the fused output layer + loss forms at a time (0: equal chunks of at most ~128
  // MiB).
  int logits_chunk_rows = 0;
  // Check the memory plan against the node's memory before allocating (train/memory_check.h);
  // --no-memory-check turns it off.
  bool memory_check = true;

  std::string metrics_file;
  std::string tensorboard_dir;       // event files of the logged scalars (rank 0)
  int timing_log_level = 0;          // 0 none, 1 coarse timers, 2 every timer (Megatron's)
  double straggler_threshold = 0.2;  // report a rank this much over its stage's median
  // Every sample_interval iterations (0: never) rank 0 prints the model's continuation of
  // sample_prompt, sample_tokens long (needs a tokenizer; train/samples.h).
  long sample_interval = 0;
  std::string sample_prompt;
  int sample_tokens = 48;
  double heartbeat_seconds = 30;  // a line every this long while a step runs (0: none)
  std::string load_hf;
  std::string save;        // checkpoint directory
  long save_interval = 0;  // 0: only at the end
  // --async-save (Megatron's): a save copies what it needs into a snapshot and the step goes
  // on while a thread per rank writes it (checkpoint/async_save.h).
  bool async_save = false;
  // Resume from this checkpoint directory's `latest`, that `latest` file, or one iteration
  // directory; --ckpt-step N (>= 0) loads iteration N under the checkpoint directory instead.
  std::string load;
  long ckpt_step = -1;
  int keep_checkpoints = 0;  // 0: keep all
  // --load was not given and --save holds a checkpoint: the run resumes from it (a requeued
  // job's restart). Set while the flags are validated, said in the log.
  bool load_defaulted_to_save = false;

  // Stopping before train_iters (Megatron's flags), always with a checkpoint under --save and
  // exit code 0, every rank at the same iteration: on SIGTERM, SIGINT or SIGUSR1
  // (--exit-signal-handler; on by default in a Slurm job that saves), when the next iteration
  // would end past --exit-duration-in-mins since the start, or at a multiple of --exit-interval.
  bool exit_signal_handler = false;
  bool no_exit_signal_handler = false;
  double exit_duration_in_mins = 0;  // 0: no limit
  long exit_interval = 0;            // 0: none
  std::string save_hf;
  std::string save_hf_dtype;   // bf16 or fp32; empty: bf16 for --bf16 or a BF16 --load-hf
  int threads = 0;             // 0: OpenMP's default
  bool no_huge_pages = false;  // --no-huge-pages (core/first_touch.h)
  // Megatron's flag and default: a wait on other ranks longer than this ends the job with a
  // diagnosis (comm/watchdog.h); fractions allowed, 0 turns the watchdog off.
  double distributed_timeout_minutes = 10;
  // Tensor groups that span nodes are refused unless this is set (they would all-reduce over
  // the network 4 times per layer).
  bool allow_tensor_parallel_across_nodes = false;
  // Testing: this rank throws at the start of that iteration (the job must end cleanly).
  long inject_fault_iteration = 0;
  long inject_fault_save = 0;  // testing: world rank 0 dies inside its N-th save, before commit
  int inject_fault_rank = 0;
  // Testing: what the failing rank does: error (throws), stop (SIGSTOP), spin (loops forever).
  std::string inject_fault_kind = "error";
  long inject_grad_overflow_iteration = 0;  // testing: an inf gradient at this iteration
  // Testing: this rank's forward compute takes this much longer (a straggler).
  int inject_slow_rank = -1;
  double inject_slow_forward_ms = 0;
  double peak_tflops = 0;  // 0: measure the fp32 GEMM peak at start

  // What --load may change on purpose, and where a save can be made to die (issue 18).
  // The manifest's run settings (seed, batch sizes, sequence length, data, LR schedule) must
  // equal this run's on resume unless one of the first two is given.
  bool finetune = false;                    // weights only: iteration, optimizer, scaler afresh
  bool override_checkpoint_config = false;  // resume anyway, each difference printed
  // Resume with this run's learning-rate schedule (peak, floor, style, warm-up and decay
  // lengths) where it differs from the checkpoint's, each difference printed (Megatron's).
  bool override_opt_param_scheduler = false;
  // Testing: where --inject-fault-save dies: before-commit (files written, nothing renamed)
  // or mid-commit (the same iteration's committed directory moved aside, the new one not yet
  // in place); or, not dying: stall-write (rank 0's writer stops for good after its first
  // bytes, to be killed) or write-error (the writer of the last (t, p) fails).
  std::string inject_fault_save_point = "before-commit";

  // d = world / (t x c x p): the data-parallel replicas, each reading its own samples.
  int data_parallel_size() const;
  int virtual_stages() const;  // v
  // Layers of each virtual stage j * p + s, in order; empty when the split is invalid.
  std::vector<int> layers_per_virtual_stage() const;
  // The split comes from the cost model (--pipeline-split balanced, or by default).
  bool balanced_pipeline_split() const;
  // The final global batch (--global-batch-size, or b x d).
  int effective_global_batch() const;
  // Micro-batches per iteration at the final global batch.
  int num_micro_batches() const;
  // The global batch as a function of consumed samples (constant without ramp-up).
  GlobalBatchSchedule batch_schedule() const;
  bool sample_based() const { return train_samples > 0; }
  // Iterations of the whole run (from --train-samples when sample-based).
  long total_train_iters() const;
  // Samples the train split must provide (Megatron's get_train_valid_test_num_samples).
  long total_train_samples() const;
  // The learning-rate schedule in samples, from either family of flags.
  optim::LrSchedule lr_schedule() const;
  long eval_runs() const {
    return (eval_interval > 0 ? total_train_iters() / eval_interval : 0) + 1;
  }
  long valid_samples() const { return eval_runs() * eval_iters * (long)effective_global_batch(); }
  long test_samples() const { return (long)eval_iters * effective_global_batch(); }

  // The model's layout over ranks and how this rank's model is built (src/engine), from the
  // flags above (train/model_options.cpp).
  engine::RankLayout rank_layout() const;
  engine::RankModelOptions rank_model_options() const;
};

// The pipeline schedule the flags describe (p, v, m and its kind).
pipeline_parallel::ScheduleConfig pipeline_schedule_of(const TrainingConfig& c);
// ... at another number of micro-batches (a batch-size ramp-up step).
pipeline_parallel::ScheduleConfig pipeline_schedule_of(const TrainingConfig& c, int microbatches);

// Every violated rule, each naming the flag(s) and the rule; empty when valid.
std::vector<std::string> validate_training_config(const TrainingConfig& c);

}  // namespace trident::train
