#include "cli/train_args.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "cli/lora_args.h"
#include "cli/moe_args.h"
#include "cli/parse_args.h"
#include "cli/tokenizer_args.h"
#include "cli/train_args_config.h"
#include "io/hf_gpt2.h"
#include "tokenizer/build_tokenizer.h"
#include "train/report_dir.h"
#include "train/resume_rules.h"

namespace trident::cli {

namespace {
// Megatron's --window-size is a pair "(left,right)"; causal models take right 0, so a bare W
// is the left window. The value is rewritten to W before it is parsed as an int.
std::string window_size_left(std::string& text) {
  std::string t;
  for (char ch : text)
    if (ch != ' ' && ch != '(' && ch != ')' && ch != '[' && ch != ']') t += ch;
  const size_t comma = t.find(',');
  if (comma != std::string::npos) {
    if (t.substr(comma + 1) != "0")
      return "the right window must be 0 (causal attention), got '" + text + "'";
    t = t.substr(0, comma);
  }
  text = t;
  return "";
}

// What Megatron's --use-rope-scaling fixes (Llama 3.1's frequency factors and original
// context), and HF's linear scaling: Megatron's --rotary-seq-len-interpolation-factor
// (positions divided by the factor). `plan --launch` writes them for models read from HF.
void add_scaling_detail_flags(CLI::App& app, ModelConfig& m, ModelFlags& f) {
  auto add = [&](const char* flag, auto& field, const char* help) {
    f.given[flag] = app.add_option(flag, field, help)
                        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                        ->group("Model");
  };
  add("--rope-scaling-low-freq-factor", m.rope_low_freq_factor,
      "--use-rope-scaling's low_freq_factor (default 1)");
  add("--rope-scaling-high-freq-factor", m.rope_high_freq_factor,
      "--use-rope-scaling's high_freq_factor (default 4)");
  add("--rope-scaling-original-max-position-embeddings", m.rope_original_max_positions,
      "--use-rope-scaling's original context (default 8192)");
  f.given["--rotary-seq-len-interpolation-factor"] =
      app.add_option_function<float>(
             "--rotary-seq-len-interpolation-factor",
             [&m](float factor) {
               m.use_rope_scaling = true, m.rope_scaling_type = "linear";
               m.rope_scaling_factor = factor;
             },
             "linear RoPE scaling: positions divided by this factor (HF's rope_type linear)")
          ->group("Model");
}

// Llama 3.x RoPE scaling and the sliding window (Megatron's flags).
void add_scaling_and_window_flags(CLI::App& app, ModelConfig& m, ModelFlags& f) {
  f.given["--use-rope-scaling"] =
      app.add_flag("--use-rope-scaling", m.use_rope_scaling,
                   "Llama 3.1's RoPE frequency scaling (low / high frequency factors 1 / 4, "
                   "original context 8192, as Megatron)")
          ->group("Model");
  f.given["--rope-scaling-factor"] =
      app.add_option("--rope-scaling-factor", m.rope_scaling_factor, "factor of --use-rope-scaling")
          ->capture_default_str()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
          ->group("Model");
  add_scaling_detail_flags(app, m, f);
  f.given["--window-size"] =
      app.add_option("--window-size", m.window_size,
                     "sliding-window attention: a token attends to itself and the W - 1 before "
                     "it; W, or Megatron's pair (W,0) (right window 0); 0: full causal")
          ->transform(CLI::Validator(window_size_left, "W or (W,0)"))
          ->capture_default_str()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
          ->group("Model");
}

void keep_scaling_and_window(const ModelFlags& flags, const ModelConfig& given,
                             ModelConfig& model) {
  if (flags.was_given("--use-rope-scaling")) {
    model.use_rope_scaling = given.use_rope_scaling, model.rope_scaling_type = "llama3";
    model.rope_low_freq_factor = 1.f, model.rope_high_freq_factor = 4.f;
    model.rope_original_max_positions = 8192;
  }
  if (flags.was_given("--rotary-seq-len-interpolation-factor")) {
    model.use_rope_scaling = true, model.rope_scaling_type = "linear";
    model.rope_scaling_factor = given.rope_scaling_factor;
  }
  if (flags.was_given("--rope-scaling-factor"))
    model.rope_scaling_factor = given.rope_scaling_factor;
  if (flags.was_given("--rope-scaling-low-freq-factor"))
    model.rope_low_freq_factor = given.rope_low_freq_factor;
  if (flags.was_given("--rope-scaling-high-freq-factor"))
    model.rope_high_freq_factor = given.rope_high_freq_factor;
  if (flags.was_given("--rope-scaling-original-max-position-embeddings"))
    model.rope_original_max_positions = given.rope_original_max_positions;
  if (flags.was_given("--window-size")) model.window_size = given.window_size;
}

// The scaling details need the scaling they describe; linear and llama3 exclude each other.
void check_scaling_detail_flags(const ModelFlags& flags, const ModelConfig& m,
                                std::vector<std::string>& errors) {
  const bool llama3 = m.use_rope_scaling && m.rope_scaling_type == "llama3";
  for (const char* flag : {"--rope-scaling-low-freq-factor", "--rope-scaling-high-freq-factor",
                           "--rope-scaling-original-max-position-embeddings"})
    if (flags.was_given(flag) && !llama3)
      errors.push_back(std::string(flag) + " needs --use-rope-scaling (Llama 3.1's scaling)");
  if (flags.was_given("--rotary-seq-len-interpolation-factor") &&
      (flags.was_given("--use-rope-scaling") || flags.was_given("--rope-scaling-factor")))
    errors.push_back(
        "--rotary-seq-len-interpolation-factor (linear scaling) excludes --use-rope-scaling "
        "and --rope-scaling-factor (Llama 3.1's scaling)");
}

// With --load-hf: config.json's rope_scaling against the detail flags given.
template <typename Agrees>
void agree_on_scaling_details(const ModelConfig& hf, const ModelConfig& m, Agrees&& agrees) {
  const bool linear = hf.use_rope_scaling && hf.rope_scaling_type == "linear";
  agrees("--rotary-seq-len-interpolation-factor",
         linear && m.rope_scaling_factor == hf.rope_scaling_factor);
  agrees("--rope-scaling-low-freq-factor", m.rope_low_freq_factor == hf.rope_low_freq_factor);
  agrees("--rope-scaling-high-freq-factor", m.rope_high_freq_factor == hf.rope_high_freq_factor);
  agrees("--rope-scaling-original-max-position-embeddings",
         m.rope_original_max_positions == hf.rope_original_max_positions);
}
}  // namespace

ModelFlags add_model_flags(CLI::App& app, ModelConfig& m, std::string& preset) {
  ModelFlags f;
  auto add = [&](const char* flag, auto& field, const char* help) {
    f.given[flag] = app.add_option(flag, field, help)
                        ->capture_default_str()
                        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                        ->group("Model");
  };
  app.add_option("--model-preset", preset,
                 "gpt2-small, gpt-tiny, llama3.2-1b, llama3.1-8b, mistral-7b, qwen2.5-0.5b or "
                 "qwen3-0.6b; explicit flags override it")
      ->group("Model");
  add("--num-layers", m.num_layers, "transformer layers");
  add("--hidden-size", m.hidden_size, "hidden size h");
  add("--num-attention-heads", m.num_attention_heads, "attention heads");
  add("--ffn-hidden-size", m.ffn_hidden_size, "MLP hidden size (0: 4h)");
  add("--seq-length", m.seq_length, "sequence length s");
  add("--max-position-embeddings", m.max_position_embeddings, "positions (0: seq length)");
  add("--vocab-size", m.vocab_size, "tokenizer vocabulary before padding");
  add("--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by,
      "pad the vocabulary to a multiple of this x tensor-parallel size");
  add("--init-method-std", m.init_method_std, "std of the normal initialisation");
  add("--norm-epsilon", m.layernorm_epsilon, "LayerNorm / RMSNorm epsilon");
  // The flag's name before Megatron called it --norm-epsilon.
  f.given["--layernorm-epsilon"] =
      app.add_option("--layernorm-epsilon", m.layernorm_epsilon, "alias of --norm-epsilon")
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
          ->group("Model");
  add("--normalization", m.normalization, "LayerNorm or RMSNorm");
  add("--position-embedding-type", m.position_embedding_type, "learned_absolute or rope");
  add("--rotary-base", m.rotary_base, "RoPE base (theta)");
  add("--rotary-percent", m.rotary_percent, "fraction of each head's dims RoPE rotates");
  add("--num-query-groups", m.num_query_groups, "key/value heads with --group-query-attention");
  auto flag = [&](const char* name, bool& field, const char* help) {
    f.given[name] = app.add_flag(name, field, help)->group("Model");
  };
  flag("--swiglu", m.swiglu, "SwiGLU MLP: silu(gate) * up, gate and up in one fc1");
  flag("--group-query-attention", m.group_query_attention,
       "grouped-query attention (--num-query-groups key/value heads)");
  flag("--untie-embeddings-and-output-weights", m.untie_embeddings_and_output_weights,
       "an output layer of its own instead of the word embedding");
  flag("--disable-bias-linear", m.disable_bias_linear, "no biases in the linear layers");
  add_qwen_model_flags(app, m, f);
  add_scaling_and_window_flags(app, m, f);
  return f;
}

void add_qwen_model_flags(CLI::App& app, ModelConfig& m, ModelFlags& f) {
  f.given["--add-qkv-bias"] =
      app.add_flag("--add-qkv-bias", m.add_qkv_bias,
                   "biases on q, k and v even with --disable-bias-linear (Qwen2)")
          ->group("Model");
  f.given["--qk-layernorm"] = app.add_flag("--qk-layernorm", m.qk_layernorm,
                                           "RMSNorm of each query and key head before RoPE (Qwen3)")
                                  ->group("Model");
  f.given["--kv-channels"] = app.add_option("--kv-channels", m.kv_channels,
                                            "width of each attention head (0: hidden / heads)")
                                 ->capture_default_str()
                                 ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                                 ->group("Model");
}

namespace {
// Megatron's default MLP width with SwiGLU: 2/3 of 4h (the two fc1 halves keep the
// parameter count near the GeLU MLP's), rounded down to a multiple of 64 (at least 64).
void default_swiglu_ffn(const ModelFlags& flags, ModelConfig& model) {
  // (A preset that names its MLP width keeps it.)
  if (model.swiglu && !flags.was_given("--ffn-hidden-size") && model.ffn_hidden_size == 0 &&
      model.hidden_size > 0 && model.hidden_size <= INT_MAX / 4)
    model.ffn_hidden_size = std::max(64, (int)(4L * model.hidden_size * 2 / 3 / 64 * 64));
}
}  // namespace

void apply_model_preset(const std::string& preset, const ModelFlags& flags, ModelConfig& model) {
  if (preset.empty()) return default_swiglu_ffn(flags, model);
  ModelConfig explicit_values = model;
  model = preset_model(preset);
  auto keep = [&](const char* flag, auto& field, const auto& value) {
    if (flags.was_given(flag)) field = value;
  };
  keep("--num-layers", model.num_layers, explicit_values.num_layers);
  keep("--hidden-size", model.hidden_size, explicit_values.hidden_size);
  keep("--num-attention-heads", model.num_attention_heads, explicit_values.num_attention_heads);
  keep("--ffn-hidden-size", model.ffn_hidden_size, explicit_values.ffn_hidden_size);
  keep("--seq-length", model.seq_length, explicit_values.seq_length);
  keep("--max-position-embeddings", model.max_position_embeddings,
       explicit_values.max_position_embeddings);
  keep("--vocab-size", model.vocab_size, explicit_values.vocab_size);
  for (const char* flag : {"--norm-epsilon", "--layernorm-epsilon"})
    keep(flag, model.layernorm_epsilon, explicit_values.layernorm_epsilon);
  keep("--normalization", model.normalization, explicit_values.normalization);
  keep("--position-embedding-type", model.position_embedding_type,
       explicit_values.position_embedding_type);
  keep("--rotary-base", model.rotary_base, explicit_values.rotary_base);
  keep("--rotary-percent", model.rotary_percent, explicit_values.rotary_percent);
  keep("--num-query-groups", model.num_query_groups, explicit_values.num_query_groups);
  keep("--swiglu", model.swiglu, explicit_values.swiglu);
  keep("--group-query-attention", model.group_query_attention,
       explicit_values.group_query_attention);
  keep("--untie-embeddings-and-output-weights", model.untie_embeddings_and_output_weights,
       explicit_values.untie_embeddings_and_output_weights);
  keep("--disable-bias-linear", model.disable_bias_linear, explicit_values.disable_bias_linear);
  keep("--add-qkv-bias", model.add_qkv_bias, explicit_values.add_qkv_bias);
  keep("--qk-layernorm", model.qk_layernorm, explicit_values.qk_layernorm);
  keep("--kv-channels", model.kv_channels, explicit_values.kv_channels);
  keep_scaling_and_window(flags, explicit_values, model);
  model.moe = explicit_values.moe;  // no preset is MoE: the MoE flags' values stand
  default_swiglu_ffn(flags, model);
}

namespace {

// A flag with a value. The last occurrence wins, so a command line can override an earlier
// flag.
struct ValueFlags {
  CLI::App& app;
  template <class T>
  void operator()(const char* flag, T& field, const char* help, const char* group) const {
    app.add_option(flag, field, help)
        ->capture_default_str()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->group(group);
  }
};

// Parallelism: t, p, virtual and uneven stages, the schedule, sequence parallelism, the
// distributed optimizer and the overlapped communication, the watchdog.
void add_parallelism_flags(CLI::App& app, train::TrainingConfig& c) {
  const ValueFlags opt{app};
  opt("--tensor-model-parallel-size", c.tensor_model_parallel_size, "t", "Parallelism");
  opt("--pipeline-model-parallel-size", c.pipeline_model_parallel_size, "p", "Parallelism");
  opt("--context-parallel-size", c.context_parallel_size,
      "c: every sequence split into 2c chunks, cp rank i holding chunks i and 2c-1-i",
      "Parallelism");
  opt("--cp-comm-type", c.cp_comm_type,
      "how attention reaches the other cp ranks' keys and values: p2p (ring), a2a (all-to-all "
      "to heads) or allgather",
      "Parallelism");
  opt("--num-layers-per-virtual-pipeline-stage", c.num_layers_per_virtual_pipeline_stage,
      "layers per model chunk: interleaved 1F1B with v = layers / (p * this)", "Parallelism");
  opt("--decoder-first-pipeline-num-layers", c.decoder_first_pipeline_num_layers,
      "layers of the first pipeline stage (uneven split; others share the rest)", "Parallelism");
  opt("--decoder-last-pipeline-num-layers", c.decoder_last_pipeline_num_layers,
      "layers of the last pipeline stage (uneven split)", "Parallelism");
  app.add_flag("--account-for-embedding-in-pipeline-split",
               c.account_for_embedding_in_pipeline_split,
               "count the embedding as one layer of an even split (the first stage builds one "
               "layer fewer; Megatron's)")
      ->group("Parallelism");
  app.add_flag("--account-for-loss-in-pipeline-split", c.account_for_loss_in_pipeline_split,
               "count the output layer and loss as one layer of an even split (the last stage "
               "builds one layer fewer; Megatron's)")
      ->group("Parallelism");
  opt("--pipeline-split", c.pipeline_split,
      "balanced (stages of equal model FLOPs, the output layer and loss counted on the last; "
      "the default for p > 1 without virtual stages or other split flags) or even (L / p)",
      "Parallelism");
  opt("--pipeline-schedule", c.pipeline_schedule,
      "gpipe, 1f1b, interleaved or zb-h1 (default by v)", "Parallelism");
  app.add_flag("--no-scatter-gather{false}", c.scatter_gather,
               "send whole boundary tensors between stages instead of 1/t slices")
      ->group("Parallelism");
  app.add_flag("--sequence-parallel", c.sequence_parallel,
               "with t > 1: LayerNorm, dropout and the residual stream on 1/t of the tokens per "
               "tensor-parallel rank (all-gather / reduce-scatter instead of all-reduce)")
      ->group("Parallelism");
  app.add_flag("--use-distributed-optimizer", c.use_distributed_optimizer,
               "shard Adam moments over the data-parallel ranks (ZeRO-1)")
      ->group("Parallelism");
  opt("--data-parallel-sharding-strategy", c.data_parallel_sharding_strategy,
      "what the data-parallel ranks shard: no_shard, optim (ZeRO-1, as "
      "--use-distributed-optimizer), optim_grads (ZeRO-2: gradients reduce-scattered after "
      "every micro-batch, only this rank's shard kept) or optim_grads_params (ZeRO-3: the "
      "weights too, each layer all-gathered before it runs and given back after)",
      "Parallelism");
  app.add_flag("--overlap-grad-reduce", c.overlap_grad_reduce,
               "all-reduce gradient buckets during the last backward")
      ->group("Parallelism");
  app.add_flag("--overlap-param-gather", c.overlap_param_gather,
               "distributed optimizer: all-gather updated parameters bucket by bucket during the "
               "next forward")
      ->group("Parallelism");
  opt("--distributed-timeout-minutes", c.distributed_timeout_minutes,
      "a wait on other ranks longer than this ends the job, naming the operation, group, "
      "iteration and the ranks that never arrived (fractions allowed; 0: off)",
      "Parallelism");
  app.add_flag("--allow-tensor-parallel-across-nodes", c.allow_tensor_parallel_across_nodes,
               "let a tensor-parallel group span nodes (refused by default)")
      ->group("Parallelism");
  opt("--ddp-bucket-size", c.ddp_bucket_size, "floats per gradient bucket (0: max(40M, 1M x d))",
      "Parallelism");
}

// Recomputation and the logits' chunks (Memory), bf16/fp16 and loss scaling (Mixed precision),
// dropout (Regularization).
void add_memory_and_precision_flags(CLI::App& app, train::TrainingConfig& c) {
  const ValueFlags opt{app};
  opt("--recompute-granularity", c.recompute_granularity,
      "full: keep only each layer's input, recompute the layer in backward; selective: "
      "recompute only the attention core",
      "Memory");
  app.add_flag("--bf16", c.bf16, "bf16 matrix products, fp32 master weights/gradients/Adam")
      ->group("Mixed precision");
  app.add_flag("--fp16", c.fp16, "fp16 matrix-product operands with dynamic loss scaling")
      ->group("Mixed precision");
  opt("--loss-scale", c.loss_scale, "fp16: constant loss scale (0: dynamic)", "Mixed precision");
  opt("--initial-loss-scale", c.initial_loss_scale, "fp16: first dynamic scale", "Mixed precision");
  opt("--min-loss-scale", c.min_loss_scale, "fp16: the scale never drops below this",
      "Mixed precision");
  opt("--loss-scale-window", c.loss_scale_window,
      "fp16: iterations without overflow before the scale doubles", "Mixed precision");
  opt("--hysteresis", c.hysteresis, "fp16: overflows tolerated before the scale halves",
      "Mixed precision");
  opt("--hidden-dropout", c.hidden_dropout, "dropout after embeddings, attention and MLP",
      "Regularization");
  opt("--attention-dropout", c.attention_dropout, "dropout on attention probabilities",
      "Regularization");
  opt("--recompute-method", c.recompute_method,
      "uniform (every layer, in groups of N that keep one input each) or block (the first N "
      "layers of each chunk, one by one)",
      "Memory");
  opt("--recompute-num-layers", c.recompute_num_layers,
      "N >= 1 for --recompute-method (N above a chunk's layers: the whole chunk)", "Memory");
  opt("--logits-chunk-rows", c.logits_chunk_rows,
      "rows of logits formed at a time by the fused output layer + loss (0: equal chunks of at "
      "most ~128 MiB)",
      "Memory");
  app.add_flag("--no-memory-check{false}", c.memory_check,
               "allocate even when the memory plan exceeds the memory this node has for each "
               "rank (checked by default: refused with exit code 2 and what would fit)")
      ->group("Memory");
}

// The batch sizes and their ramp-up, the training length, the learning-rate schedule and
// AdamW, the seed; --timeline (Logging) comes first for its place in the order.
void add_batch_and_optimizer_flags(CLI::App& app, train::TrainingConfig& c) {
  const ValueFlags opt{app};
  opt("--timeline", c.timeline, "write a Chrome trace (Perfetto) of every rank's operations",
      "Logging");
  opt("--micro-batch-size", c.micro_batch_size, "b, samples per micro-batch", "Batch");
  opt("--global-batch-size", c.global_batch_size, "B = b x micro-batches x d (0: b x d)", "Batch");
  opt("--train-iters", c.train_iters,
      "iterations to train (iteration-based; neither this nor --train-samples: 100)", "Training");
  app.add_flag("--skip-train", c.skip_train,
               "train nothing: print the validation and test losses of the --load or --load-hf "
               "weights (or of the initialisation) and exit")
      ->group("Training");
  opt("--train-samples", c.train_samples,
      "samples to train (sample-based: schedules in samples, batch ramp-up possible)", "Training");
  app.add_option("--rampup-batch-size", c.rampup_batch_size,
                 "<start> <increment> <samples>: the global batch starts at <start> and grows by "
                 "<increment> in equal sample intervals over <samples> (needs --train-samples)")
      ->expected(3)
      ->group("Batch");
  opt("--lr", c.lr, "peak learning rate", "Optimizer");
  opt("--min-lr", c.min_lr, "learning-rate floor of the decay", "Optimizer");
  opt("--lr-decay-style", c.lr_decay_style,
      "constant, linear, cosine, inverse-square-root or WSD (warmup-stable-decay)", "Optimizer");
  opt("--lr-wsd-decay-style", c.lr_wsd_decay_style,
      "WSD's annealing: linear, cosine, exponential (default) or minus_sqrt", "Optimizer");
  opt("--lr-wsd-decay-iters", c.lr_wsd_decay_iters,
      "WSD: iterations of annealing, the last of the decay", "Optimizer");
  opt("--lr-wsd-decay-samples", c.lr_wsd_decay_samples,
      "WSD: samples of annealing, the last of the decay (sample-based)", "Optimizer");
  opt("--lr-warmup-iters", c.lr_warmup_iters, "linear warm-up iterations", "Optimizer");
  opt("--lr-decay-iters", c.lr_decay_iters, "decay ends here (0: --train-iters)", "Optimizer");
  opt("--lr-warmup-samples", c.lr_warmup_samples, "linear warm-up samples (sample-based)",
      "Optimizer");
  opt("--lr-decay-samples", c.lr_decay_samples, "decay ends here (0: --train-samples)",
      "Optimizer");
  opt("--lr-warmup-fraction", c.lr_warmup_fraction,
      "warm-up as a fraction of the decay length (instead of --lr-warmup-iters/-samples)",
      "Optimizer");
  opt("--weight-decay", c.adam.weight_decay, "AdamW decay on matrices", "Optimizer");
  opt("--adam-beta1", c.adam.beta1, "Adam beta1", "Optimizer");
  opt("--adam-beta2", c.adam.beta2, "Adam beta2", "Optimizer");
  opt("--adam-eps", c.adam.eps, "Adam epsilon", "Optimizer");
  opt("--clip-grad", c.adam.clip_grad, "global gradient-norm clip (0: off)", "Optimizer");
  opt("--seed", c.seed, "seed of initialisation and data order", "Training");
}

// Logging, evaluation and timers, threads, the injected faults of the tests (hidden from
// --help), the MFU peak.
void add_logging_and_testing_flags(CLI::App& app, train::TrainingConfig& c) {
  const ValueFlags opt{app};
  opt("--log-interval", c.log_interval, "iterations per log line", "Logging");
  opt("--eval-interval", c.eval_interval, "iterations between validations (0: at end)", "Logging");
  opt("--eval-iters", c.eval_iters, "global batches per evaluation", "Logging");
  opt("--metrics-file", c.metrics_file,
      "write metrics as JSON lines here (appended to when resuming)", "Logging");
  opt("--tensorboard-dir", c.tensorboard_dir, "write TensorBoard event files here", "Logging");
  opt("--timeline-svg", c.timeline_svg,
      "draw every rank's operations (the --timeline events) as `schedule --svg` draws", "Logging");
  opt("--report-dir", c.report_dir,
      "metrics.jsonl, timeline.json, timeline.svg and at the end report.html here (trident "
      "report DIR)",
      "Logging");
  opt("--timing-log-level", c.timing_log_level,
      "timers at each log interval, min/max over ranks: 0 none, 1 coarse, 2 all", "Logging");
  opt("--straggler-threshold", c.straggler_threshold,
      "name a rank whose compute exceeds its pipeline stage's median by this fraction", "Logging");
  opt("--sample-interval", c.sample_interval,
      "print a continuation of --sample-prompt every N iterations (0: never)", "Logging");
  opt("--sample-prompt", c.sample_prompt, "the prompt of the samples (needs a tokenizer)",
      "Logging");
  opt("--sample-tokens", c.sample_tokens, "tokens each sample continues by", "Logging");
  opt("--heartbeat-seconds", c.heartbeat_seconds,
      "while an iteration runs longer than this, say so every this many seconds (0: never)",
      "Logging");
  opt("--threads", c.threads, "OpenMP threads (0: the node's cores / ranks on it)", "Runtime");
  app.add_flag("--no-huge-pages", c.no_huge_pages,
               "do not ask for transparent huge pages for the large buffers (they are still "
               "touched at start-up)")
      ->group("Runtime");
  opt("--inject-fault-iteration", c.inject_fault_iteration,
      "testing: fail on --inject-fault-rank at this iteration", kHiddenGroup);
  opt("--inject-fault-rank", c.inject_fault_rank, "testing: the rank that fails", kHiddenGroup);
  opt("--inject-slow-rank", c.inject_slow_rank,
      "testing: this rank's forward compute is slowed by --inject-slow-forward-ms", kHiddenGroup);
  opt("--inject-slow-forward-ms", c.inject_slow_forward_ms,
      "testing: added to each forward of --inject-slow-rank", kHiddenGroup);
  opt("--inject-fault-kind", c.inject_fault_kind,
      "testing: error (throws), stop (SIGSTOP itself) or spin (loops forever)", kHiddenGroup);
  opt("--inject-grad-overflow-iteration", c.inject_grad_overflow_iteration,
      "testing: make one gradient inf at this iteration", kHiddenGroup);
  opt("--inject-fault-save", c.inject_fault_save,
      "testing: rank 0 dies inside its N-th checkpoint save (see --inject-fault-save-point)",
      kHiddenGroup);
  opt("--inject-fault-save-point", c.inject_fault_save_point,
      "testing: before-commit (files written, nothing renamed), mid-commit (an existing "
      "directory of the same iteration moved aside, the new one not yet in place), "
      "stall-write (rank 0's writer stops after the file's header) or write-error (the last "
      "writer of the last tensor and pipeline rank fails: its last data-parallel rank under "
      "the distributed optimizer, where every data-parallel rank writes its shard)",
      kHiddenGroup);
  opt("--peak-tflops", c.peak_tflops, "peak for MFU (0: measure fp32 GEMM)", "Logging");
}

// The dataset, its split and caches, the tokenizer.
void add_data_flags(CLI::App& app, train::TrainingConfig& c) {
  const ValueFlags opt{app};
  app.add_option("--data-path", c.data_path, "dataset prefixes (optionally weighted)")
      ->group("Data");
  app.add_flag("--reset-position-ids", c.packed.reset_position_ids,
               "positions restart after every end-of-document token (documents packed into "
               "one sequence)")
      ->group("Data");
  app.add_flag("--reset-attention-mask", c.packed.reset_attention_mask,
               "no token attends across an end-of-document token (the EOD belongs to the "
               "document it ends); the attention skips whole tiles across documents")
      ->group("Data");
  app.add_flag("--eod-mask-loss", c.packed.eod_mask_loss,
               "do not count the prediction made at an end-of-document input")
      ->group("Data");
  app.add_flag("--pack-documents", c.pack_documents,
               "pack whole documents (conversations) best-fit into samples, padding each with "
               "end-of-document tokens that are not counted; needs --reset-attention-mask "
               "and --reset-position-ids")
      ->group("Data");
  app.add_option("--eod-id", c.packed.eod,
                 "the end-of-document id for the three flags above (default: the tokenizer's)")
      ->group("Data");
  app.add_flag("--mock-data", c.mock_data, "synthetic learnable sequences")->group("Data");
  app.add_flag("--sft", c.sft,
               "supervised fine-tuning: count only the targets each --data-path prefix's loss "
               "mask marks (<prefix>_loss_mask.bin/.idx beside <prefix>_document, as "
               "preprocess --apply-chat-template writes them); the loss is their mean")
      ->group("Data");
  opt("--split", c.split, "train,valid,test weights over documents", "Data");
  opt("--data-cache-path", c.data_cache_path, "where index caches go (default <data>/cache)",
      "Data");
  add_tokenizer_args(app, &c.tokenizer, "Data");
}

// Saving, loading, fine-tuning and the HuggingFace import/export.
void add_checkpoint_flags(CLI::App& app, train::TrainingConfig& c) {
  const ValueFlags opt{app};
  opt("--load-hf", c.load_hf,
      "start from a HuggingFace directory (GPT-2, Llama, Mistral, Qwen, Mixtral, Qwen3-MoE)",
      "Checkpoints");
  opt("--save", c.save, "write checkpoints under this directory", "Checkpoints");
  opt("--save-interval", c.save_interval, "iterations between checkpoints (0: only at the end)",
      "Checkpoints");
  app.add_flag("--async-save", c.async_save,
               "save in the background: the step copies the checkpoint into a snapshot and goes "
               "on while a thread per rank writes it (the commit waits for every rank's files)")
      ->group("Checkpoints");
  opt("--load", c.load,
      "resume from a checkpoint: its directory (the latest iteration), that `latest` file or "
      "an iter_NNNNNNN directory, under any layout; its seed, batch sizes, sequence length, "
      "data and LR schedule must equal this run's (exit 2 otherwise). It may be missing or "
      "empty only where it is also --save (a job's first start)",
      "Checkpoints");
  opt("--ckpt-step", c.ckpt_step, "load iteration N under --load instead of the latest",
      "Checkpoints");
  app.add_flag("--finetune", c.finetune,
               "load only the weights from --load: iteration, data position, optimizer and loss "
               "scale start afresh, and the run settings may differ (drop it to resume the "
               "fine-tuning run itself)")
      ->group("Checkpoints");
  app.add_flag("--override-checkpoint-config", c.override_checkpoint_config,
               "resume from --load although the run settings differ from the checkpoint's; "
               "each difference is printed as a warning")
      ->group("Checkpoints");
  app.add_flag("--override-opt-param-scheduler", c.override_opt_param_scheduler,
               "resume from --load with this run's learning-rate schedule (peak, floor, style, "
               "warm-up and decay lengths) where it differs from the checkpoint's; each "
               "difference is printed as a warning")
      ->group("Checkpoints");
  opt("--keep-checkpoints", c.keep_checkpoints, "keep the last K checkpoints (0: all)",
      "Checkpoints");
  opt("--save-hf", c.save_hf,
      "write the trained model as a HuggingFace directory (GPT-2, Llama, Mistral, Qwen, Mixtral or "
      "Qwen3-MoE by its options)",
      "Checkpoints");
  opt("--save-hf-dtype", c.save_hf_dtype,
      "--save-hf's dtype: bf16 or fp32 (default: bf16 with --bf16 or a BF16 --load-hf)",
      "Checkpoints");
}

// Stopping early with a checkpoint (Megatron's flags): signals, a wall-clock budget, an
// iteration count.
void add_exit_flags(CLI::App& app, train::TrainingConfig& c) {
  const ValueFlags opt{app};
  const char* group = "Stopping";
  app.add_flag("--exit-signal-handler", c.exit_signal_handler,
               "on SIGTERM, SIGINT or SIGUSR1 every rank finishes its iteration, a checkpoint "
               "is saved under --save and the run exits 0 (default in a Slurm job with --save)")
      ->group(group);
  app.add_flag("--no-exit-signal-handler", c.no_exit_signal_handler,
               "leave the signals their default action, also under Slurm")
      ->group(group);
  opt("--exit-duration-in-mins", c.exit_duration_in_mins,
      "save and exit 0 before the iteration that would end past this many minutes since the "
      "start (0: no limit)",
      group);
  opt("--exit-interval", c.exit_interval,
      "save and exit 0 after the first iteration that is a multiple of N (0: never)", group);
}

// The order matters: --help lists each group's flags in the order they were added, and CLI11
// converts values in that order too (it decides which of two malformed values is reported).
// So the functions follow the flags' order, a group now and then spanning two of them.
void add_training_flags(CLI::App& app, train::TrainingConfig& c) {
  add_parallelism_flags(app, c);
  add_memory_and_precision_flags(app, c);
  add_batch_and_optimizer_flags(app, c);
  add_logging_and_testing_flags(app, c);
  add_data_flags(app, c);
  add_checkpoint_flags(app, c);
  add_exit_flags(app, c);
}

// config.json's Qwen options, rope_scaling and sliding_window; a flag that says otherwise is
// refused.
void apply_hf_block_options(const std::string& dir, const ModelConfig& hf, const ModelFlags& flags,
                            ModelConfig& m, std::vector<std::string>& errors) {
  auto agrees = [&](const char* flag, bool same) {
    if (flags.was_given(flag) && !same)
      errors.push_back(std::string(flag) + " disagrees with " + dir + "/config.json");
  };
  agrees("--add-qkv-bias", m.add_qkv_bias == hf.add_qkv_bias);
  agrees("--qk-layernorm", m.qk_layernorm == hf.qk_layernorm);
  agrees("--kv-channels", m.head_dim() == hf.head_dim());
  m.add_qkv_bias = hf.add_qkv_bias, m.qk_layernorm = hf.qk_layernorm;
  m.kv_channels = hf.kv_channels;
  agrees("--use-rope-scaling", m.use_rope_scaling == hf.use_rope_scaling &&
                                   (!hf.use_rope_scaling || hf.rope_scaling_type == "llama3"));
  agrees("--rope-scaling-factor", m.rope_scaling_factor == hf.rope_scaling_factor);
  agrees("--window-size", m.window_size == hf.window_size);
  agree_on_scaling_details(hf, m, agrees);
  m.use_rope_scaling = hf.use_rope_scaling, m.rope_scaling_type = hf.rope_scaling_type;
  m.rope_scaling_factor = hf.rope_scaling_factor;
  m.rope_low_freq_factor = hf.rope_low_freq_factor;
  m.rope_high_freq_factor = hf.rope_high_freq_factor;
  m.rope_original_max_positions = hf.rope_original_max_positions;
  m.window_size = hf.window_size;
}

// With --load-hf the architecture comes from config.json; explicit flags must agree.
void apply_hf_config(train::TrainingConfig& c, const ModelConfig& hf, const ModelFlags& flags,
                     std::vector<std::string>& errors) {
  auto check = [&](const char* flag, int ours, int theirs, int& field) {
    if (flags.was_given(flag) && ours != theirs)
      errors.push_back(std::string(flag) + " (" + std::to_string(ours) + ") disagrees with " +
                       c.load_hf + "/config.json (" + std::to_string(theirs) + ")");
    field = theirs;
  };
  ModelConfig& m = c.model;
  check("--num-layers", m.num_layers, hf.num_layers, m.num_layers);
  check("--hidden-size", m.hidden_size, hf.hidden_size, m.hidden_size);
  check("--num-attention-heads", m.num_attention_heads, hf.num_attention_heads,
        m.num_attention_heads);
  check("--vocab-size", m.vocab_size, hf.vocab_size, m.vocab_size);
  check("--max-position-embeddings", m.max_position_embeddings, hf.max_position_embeddings,
        m.max_position_embeddings);
  int ffn = hf.ffn();
  if (flags.was_given("--ffn-hidden-size") && m.ffn() != ffn)
    errors.push_back("--ffn-hidden-size disagrees with " + c.load_hf + "/config.json");
  m.ffn_hidden_size = ffn;
  m.layernorm_epsilon = hf.layernorm_epsilon;
  // The architecture's options come from config.json too (a Llama directory sets them); a
  // flag that says otherwise is refused, as the shape's are.
  auto agrees = [&](const char* flag, bool same) {
    if (flags.was_given(flag) && !same)
      errors.push_back(std::string(flag) + " disagrees with " + c.load_hf + "/config.json");
  };
  agrees("--normalization", m.normalization == hf.normalization);
  agrees("--position-embedding-type", m.position_embedding_type == hf.position_embedding_type);
  agrees("--rotary-base", m.rotary_base == hf.rotary_base);
  agrees("--rotary-percent", m.rotary_percent == hf.rotary_percent);
  agrees("--swiglu", m.swiglu == hf.swiglu);
  agrees("--group-query-attention", m.group_query_attention == hf.group_query_attention);
  agrees("--num-query-groups", m.query_groups() == hf.query_groups());
  agrees("--untie-embeddings-and-output-weights",
         m.untie_embeddings_and_output_weights == hf.untie_embeddings_and_output_weights);
  agrees("--disable-bias-linear", m.disable_bias_linear == hf.disable_bias_linear);
  m.normalization = hf.normalization, m.position_embedding_type = hf.position_embedding_type;
  m.rotary_base = hf.rotary_base, m.rotary_percent = hf.rotary_percent, m.swiglu = hf.swiglu;
  m.group_query_attention = hf.group_query_attention, m.num_query_groups = hf.num_query_groups;
  m.untie_embeddings_and_output_weights = hf.untie_embeddings_and_output_weights;
  m.disable_bias_linear = hf.disable_bias_linear;
  apply_hf_block_options(c.load_hf, hf, flags, m, errors);
  if (!flags.was_given("--seq-length")) m.seq_length = std::min(hf.max_position_embeddings, 1024);
}

// The model's vocabulary is the tokenizer's unless --vocab-size or --load-hf sets it (the
// GPT-2 files, or a SentencePiece model, are read here, so a bad one is an argument error).
void set_vocab_size_from_tokenizer(train::TrainingConfig& c, const ModelFlags& flags,
                                   std::vector<std::string>& errors) {
  if (!tokenizer::check_tokenizer_options(c.tokenizer).empty() || !c.tokenizer.given()) return;
  try {
    const auto tok = tokenizer::build_tokenizer(c.tokenizer);
    const int vocab = tok->vocab_size();
    if (c.packed.eod < 0) c.packed.eod = tok->eod();
    if (c.load_hf.empty() && !flags.was_given("--vocab-size")) c.model.vocab_size = vocab;
    // Ids past the embedding would index outside it.
    if (c.model.vocab_size < vocab)
      errors.push_back((c.load_hf.empty() ? "--vocab-size " : "--load-hf's vocab_size ") +
                       std::to_string(c.model.vocab_size) + " is smaller than the tokenizer's " +
                       std::to_string(vocab) + " tokens (" + c.tokenizer.source() + ")");
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
}

// A Slurm job that saves checkpoints is one the scheduler may stop or requeue: its signals
// save and exit by default, unless --no-exit-signal-handler.
void apply_slurm_defaults(train::TrainingConfig& c) {
  const bool under_slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  if (under_slurm && !c.save.empty() && !c.no_exit_signal_handler) c.exit_signal_handler = true;
}

}  // namespace

bool parse_train_args(const std::vector<std::string>& args, train::TrainingConfig* config,
                      int* exit_code) {
  train::TrainingConfig& c = *config;
  CLI::App app("trident train: train a GPT model (Megatron-LM flags)", "trident train");
  app.set_config("--config", "",
                 "TOML config file: keys are the flags without --; command-line flags override "
                 "it, also its keys of the same concept (--train-iters its train-samples)");
  auto config_file = std::make_shared<TrainConfigFile>(app);
  app.config_formatter(config_file);
  ModelFlags flags = add_model_flags(app, c.model, c.model_preset);
  add_training_flags(app, c);
  const MoeFlags moe_flags = add_moe_flags(app, c);
  const LoraFlags lora_flags = add_lora_flags(app, c.model.lora);
  if (!parse_args(app, args, exit_code)) return false;
  const std::vector<std::string> notes = apply_config_overrides(config_file->overrides(), c);
  train::apply_report_dir(c);
  std::vector<std::string> errors;
  std::optional<ModelConfig> hf;  // --load-hf's config.json
  try {
    apply_model_preset(c.model_preset, flags, c.model);
    if (!c.load_hf.empty()) hf = io::read_hf_config(c.load_hf);
    if (hf) apply_hf_config(c, *hf, flags, errors);
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
  // Megatron's --rope-scaling-factor only sizes --use-rope-scaling's scaling: alone it would
  // train an unscaled model silently.
  if (flags.was_given("--rope-scaling-factor") && !c.model.use_rope_scaling)
    errors.push_back(
        "--rope-scaling-factor needs --use-rope-scaling (or a --load-hf "
        "config.json with rope_scaling)");
  check_scaling_detail_flags(flags, c.model, errors);
  if (hf) apply_hf_moe_config(moe_flags, *hf, c, errors);
  apply_moe_flags(moe_flags, c, errors);
  check_lora_flags(lora_flags, c.model.lora, errors);
  // Checkpoints of adapters name their base (checkpoint/manifest.h lora_base_json).
  if (c.model.lora.enabled() && !c.load_hf.empty())
    c.model.lora.base_hf = std::filesystem::absolute(c.load_hf).lexically_normal().string();
  set_vocab_size_from_tokenizer(c, flags, errors);
  apply_slurm_defaults(c);
  train::default_load_to_save(c);
  for (const std::string& e : train::validate_training_config(c)) errors.push_back(e);
  if (!errors.empty()) {
    std::cerr << "trident train: " << errors.size() << " invalid argument"
              << (errors.size() > 1 ? "s" : "") << ":\n";
    for (const std::string& e : errors) std::cerr << "  - " << e << "\n";
    *exit_code = 2;
    return false;
  }
  for (const std::string& note : notes) std::cout << "note: " << note << "\n";
  *exit_code = 0;
  return true;
}

}  // namespace trident::cli
