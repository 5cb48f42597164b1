#include "planner/launch.h"

namespace trident::planner {

namespace {

void add(std::vector<std::string>& argv, const std::string& flag, long value) {
  argv.push_back(flag);
  argv.push_back(std::to_string(value));
}

void add_layout_flags(std::vector<std::string>& argv, const Layout& l, const Workload& w) {
  add(argv, "--tensor-model-parallel-size", l.tensor);
  add(argv, "--pipeline-model-parallel-size", l.pipeline);
  if (l.virtual_stages > 1)
    add(argv, "--num-layers-per-virtual-pipeline-stage", l.layers_per_chunk(w.model.num_layers));
  add(argv, "--micro-batch-size", l.micro_batch);
  add(argv, "--global-batch-size", w.global_batch);
  if (l.data > 1) argv.push_back("--overlap-grad-reduce");
  if (l.distributed_optimizer) {
    argv.push_back("--use-distributed-optimizer");
    argv.push_back("--overlap-param-gather");
  }
  if (l.sequence_parallel) argv.push_back("--sequence-parallel");
  if (l.zero_bubble) argv.insert(argv.end(), {"--pipeline-schedule", "zb-h1"});
  if (l.recompute == Recompute::kFull) {
    argv.insert(argv.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform"});
    add(argv, "--recompute-num-layers", 1);
  } else if (l.recompute == Recompute::kSelective) {
    argv.insert(argv.end(), {"--recompute-granularity", "selective"});
  }
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
  // The Llama options, only where they differ from GPT-2's block.
  if (m.rms_norm()) argv.insert(argv.end(), {"--normalization", m.normalization});
  if (m.rope()) {
    argv.insert(argv.end(), {"--position-embedding-type", m.position_embedding_type});
    argv.insert(argv.end(), {"--rotary-base", std::to_string(m.rotary_base)});
    argv.insert(argv.end(), {"--rotary-percent", std::to_string(m.rotary_percent)});
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
  // Megatron's flag is Llama 3.1's scaling with its factors 1 / 4 / 8192; HF's linear type and
  // other factors have no flag (a --load-hf run reads them from config.json).
  if (m.use_rope_scaling && m.rope_scaling_type == "llama3") {
    argv.push_back("--use-rope-scaling");
    argv.insert(argv.end(), {"--rope-scaling-factor", std::to_string(m.rope_scaling_factor)});
  }
  if (m.window_size > 0) add(argv, "--window-size", m.window_size);
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
