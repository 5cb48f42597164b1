#include "planner/launch.h"

#include <charconv>

#include "context_parallel/rules.h"

namespace trident::planner {

namespace {

// The shortest text that reads back as the same float (std::to_string keeps 6 decimals:
// a rope factor of 1e-7 or 0.123456789 would not survive).
std::string exact(float value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  return std::string(buffer, end);
}

void add(std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  argv.push_back(flag);
  argv.push_back(value);
}

void add(std::vector<std::string>& argv, const std::string& flag, long value) {
  argv.push_back(flag);
  argv.push_back(std::to_string(value));
}

void add_layout_flags(std::vector<std::string>& argv, const Layout& l, const Workload& w) {
  add(argv, "--tensor-model-parallel-size", l.tensor);
  if (l.context > 1) {
    add(argv, "--context-parallel-size", l.context);
    argv.insert(argv.end(),
                {"--cp-comm-type", context_parallel::cp_comm_type_name(l.cp_comm_type)});
  }
  add(argv, "--pipeline-model-parallel-size", l.pipeline);
  if (l.virtual_stages > 1)
    add(argv, "--num-layers-per-virtual-pipeline-stage", l.layers_per_chunk(w.model.num_layers));
  add(argv, "--micro-batch-size", l.micro_batch);
  add(argv, "--global-batch-size", w.global_batch);
  if (l.replicas() > 1) argv.push_back("--overlap-grad-reduce");
  // ZeRO-1 by Megatron's own flag; ZeRO-2 and 3 by Megatron-FSDP's strategy names.
  if (l.sharding == data_parallel::ShardingStrategy::kOptim)
    argv.push_back("--use-distributed-optimizer");
  else if (l.distributed_optimizer())
    add(argv, "--data-parallel-sharding-strategy",
        data_parallel::sharding_strategy_name(l.sharding));
  if (l.distributed_optimizer()) argv.push_back("--overlap-param-gather");
  if (l.sequence_parallel) argv.push_back("--sequence-parallel");
  if (l.zero_bubble) argv.insert(argv.end(), {"--pipeline-schedule", "zb-h1"});
  if (l.expert > 1) add(argv, "--expert-model-parallel-size", l.expert);
  if (l.recompute == Recompute::kFull) {
    argv.insert(argv.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform"});
    add(argv, "--recompute-num-layers", 1);
  } else if (l.recompute == Recompute::kSelective) {
    argv.insert(argv.end(), {"--recompute-granularity", "selective"});
  }
}

// Megatron's --use-rope-scaling is Llama 3.1's scaling with its factors 1 / 4 / 8192; other
// factors (a model read from HF) get their own flags, and HF's linear type is Megatron's
// --rotary-seq-len-interpolation-factor.
void add_rope_scaling_flags(std::vector<std::string>& argv, const ModelConfig& m) {
  if (!m.use_rope_scaling) return;
  if (m.rope_scaling_type == "linear") {
    add(argv, "--rotary-seq-len-interpolation-factor", exact(m.rope_scaling_factor));
    return;
  }
  argv.push_back("--use-rope-scaling");
  add(argv, "--rope-scaling-factor", exact(m.rope_scaling_factor));
  if (m.rope_low_freq_factor != 1.f)
    add(argv, "--rope-scaling-low-freq-factor", exact(m.rope_low_freq_factor));
  if (m.rope_high_freq_factor != 4.f)
    add(argv, "--rope-scaling-high-freq-factor", exact(m.rope_high_freq_factor));
  if (m.rope_original_max_positions != 8192)
    add(argv, "--rope-scaling-original-max-position-embeddings",
        (long)m.rope_original_max_positions);
}

// The MoE shape the plan was made for; the per-layer pattern as a list expression.
void add_moe_flags(std::vector<std::string>& argv, const MoeConfig& m) {
  if (!m.enabled()) return;
  add(argv, "--num-experts", m.num_experts);
  add(argv, "--moe-router-topk", m.router_topk);
  if (m.ffn_hidden_size > 0) add(argv, "--moe-ffn-hidden-size", m.ffn_hidden_size);
  if (m.router_pre_softmax) argv.push_back("--moe-router-pre-softmax");
  if (m.router_topk_scaling_factor > 0)
    add(argv, "--moe-router-topk-scaling-factor", exact(m.router_topk_scaling_factor));
  if (!m.layer_pattern.empty()) {
    std::string pattern = "[";
    for (size_t i = 0; i < m.layer_pattern.size(); ++i)
      pattern += std::string(i ? "," : "") + (m.layer_pattern[i] ? "1" : "0");
    argv.insert(argv.end(), {"--moe-layer-freq", pattern + "]"});
  }
  if (!m.dropless()) {  // the capacity sizes the planned expert rows
    add(argv, "--moe-expert-capacity-factor", exact(m.expert_capacity_factor));
    add(argv, "--moe-token-drop-policy", m.token_drop_policy);
    if (m.pad_expert_input_to_capacity) argv.push_back("--moe-pad-expert-input-to-capacity");
  }
  if (m.shared_expert_intermediate_size > 0) {
    add(argv, "--moe-shared-expert-intermediate-size", m.shared_expert_intermediate_size);
    if (m.shared_expert_gate) argv.push_back("--moe-shared-expert-gate");
  }
}

void add_lora_flags(std::vector<std::string>& argv, const LoraConfig& l) {
  if (!l.enabled()) return;
  add(argv, "--lora-rank", l.rank);
  add(argv, "--lora-alpha", exact(l.alpha));
  add(argv, "--lora-dropout", exact(l.dropout));
  std::string modules;
  for (const std::string& m : l.target_modules) modules += (modules.empty() ? "" : ",") + m;
  add(argv, "--lora-target-modules", modules);
}

void add_model_flags(std::vector<std::string>& argv, const Workload& w) {
  const ModelConfig& m = w.model;
  add(argv, "--num-layers", m.num_layers);
  add(argv, "--hidden-size", m.hidden_size);
  add(argv, "--num-attention-heads", m.num_attention_heads);
  if (m.ffn_hidden_size > 0) add(argv, "--ffn-hidden-size", m.ffn_hidden_size);
  add(argv, "--seq-length", m.seq_length);
  if (m.max_position_embeddings > 0)
    add(argv, "--max-position-embeddings", m.max_position_embeddings);
  add(argv, "--vocab-size", m.vocab_size);
  add(argv, "--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by);
  if (m.layernorm_epsilon != ModelConfig().layernorm_epsilon)
    add(argv, "--norm-epsilon", exact(m.layernorm_epsilon));
  // The Llama options, only where they differ from GPT-2's block.
  if (m.rms_norm()) argv.insert(argv.end(), {"--normalization", m.normalization});
  if (m.rope()) {
    argv.insert(argv.end(), {"--position-embedding-type", m.position_embedding_type});
    add(argv, "--rotary-base", exact(m.rotary_base));
    add(argv, "--rotary-percent", exact(m.rotary_percent));
  }
  if (m.swiglu) argv.push_back("--swiglu");
  if (m.group_query_attention) {
    argv.push_back("--group-query-attention");
    add(argv, "--num-query-groups", m.num_query_groups);
  }
  if (!m.tied_output()) argv.push_back("--untie-embeddings-and-output-weights");
  if (m.disable_bias_linear) argv.push_back("--disable-bias-linear");
  if (m.add_qkv_bias) argv.push_back("--add-qkv-bias");
  if (m.qk_layernorm) argv.push_back("--qk-layernorm");
  if (m.kv_channels > 0) add(argv, "--kv-channels", m.kv_channels);
  add_rope_scaling_flags(argv, m);
  if (m.window_size > 0) add(argv, "--window-size", (long)m.window_size);
  add_moe_flags(argv, m.moe);
  add_lora_flags(argv, m.lora);
  if (w.precision == kernels::Precision::kBf16) argv.push_back("--bf16");
  if (w.precision == kernels::Precision::kFp16) argv.push_back("--fp16");
}

}  // namespace

std::vector<std::string> launch_command(const Layout& l, const Workload& w,
                                        const LaunchContext& context) {
  std::vector<std::string> argv;
  const std::string ranks = std::to_string(l.devices());
  if (context.slurm) {
    argv = {"srun", "--ntasks", ranks};
  } else {
    argv = {"mpirun", "-np", ranks};
    if (context.root) argv.push_back("--allow-run-as-root");
  }
  argv.insert(argv.end(), {context.binary, "train"});
  add_model_flags(argv, w);
  add_layout_flags(argv, l, w);
  argv.insert(argv.end(), context.train_args.begin(), context.train_args.end());
  return argv;
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& a : argv) {
    bool plain = !a.empty() && a.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789-_./=:,+") == std::string::npos;
    std::string quoted = "'";
    for (char ch : a) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    line += (line.empty() ? "" : " ") + (plain ? a : quoted + "'");
  }
  return line;
}

}  // namespace trident::planner
