#include "train/startup_report.h"

#include <omp.h>

#include <algorithm>
#include <iomanip>
#include <string>

#include "core/cpu_set.h"
#include "engine/pipeline_split.h"
#include "kernels/peak.h"
#include "pipeline_parallel/schedules.h"

namespace trident::train {

namespace {

// Printed only for the options that make a block differ from GPT-2's.
void print_block(const ModelConfig& m, std::ostream& log) {
  if (!(m.rms_norm() || m.rope() || m.swiglu || m.group_query_attention || !m.tied_output() ||
        m.disable_bias_linear || m.add_qkv_bias || m.qk_layernorm || m.kv_channels > 0 ||
        m.window_size > 0))
    return;
  log << "block: " << m.normalization << " (eps " << m.layernorm_epsilon << "), "
      << (m.rope() ? "rope (base " + std::to_string(m.rotary_base) + ", " +
                         std::to_string(m.rotary_dim()) + " of " + std::to_string(m.head_dim()) +
                         " dims)"
                   : std::string("learned positions"))
      << ", " << (m.swiglu ? "SwiGLU" : "GeLU") << ", " << m.query_groups() << " query groups, "
      << (m.tied_output() ? "tied" : "untied") << " output layer, "
      << (m.add_bias_linear() ? "biases"
          : m.add_qkv_bias    ? "biases on q, k, v only"
                              : "no biases")
      << (m.qk_layernorm ? ", q/k RMSNorm" : "")
      << (m.kv_channels > 0 ? ", heads " + std::to_string(m.kv_channels) + " wide" : "") << "\n";
  if (m.use_rope_scaling)
    log << "rope scaling: " << m.rope_scaling_type << " x" << m.rope_scaling_factor << "\n";
  if (m.window_size > 0) log << "sliding window: " << m.window_size << " keys\n";
}

void print_batch_and_schedule(const TrainingConfig& c, std::ostream& log) {
  log << "batch: micro " << c.micro_batch_size << " x " << c.num_micro_batches()
      << " micro-batches x data " << c.data_parallel_size() << " = global "
      << c.effective_global_batch();
  if (c.batch_schedule().ramps())
    log << ", ramped up from " << c.rampup_batch_size[0] << " by " << c.rampup_batch_size[1]
        << " over " << c.rampup_batch_size[2] << " samples";
  const optim::LrSchedule lr = c.lr_schedule();
  log << "\ntraining: " << c.total_train_iters() << " iterations, " << c.total_train_samples()
      << " samples" << (c.sample_based() ? " (sample-based)" : "") << "; learning rate "
      << c.lr_decay_style << " from " << c.lr << " to " << c.min_lr << ", warm-up "
      << lr.warmup_steps << " samples, decay ends at " << lr.decay_steps << " samples";
  if (lr.style == optim::DecayStyle::kWsd)
    log << " (WSD: stable until " << lr.decay_steps - lr.wsd_decay_steps << ", then "
        << (c.lr_wsd_decay_style.empty() ? "exponential" : c.lr_wsd_decay_style)
        << " annealing over " << lr.wsd_decay_steps << " samples)";
  log << "\n";
}

// Floats of the planned buffer `name` over the rank's chunks.
long planned_floats(const engine::RankModel& model, const std::string& name) {
  long floats = 0;
  for (const auto& chunk : model.chunks)
    for (const PlannedBuffer& b : chunk->memory_plan().buffers())
      if (b.name == name) floats += b.total_floats();
  return floats;
}

// Bytes per parameter this rank holds for weights, gradients and Adam, against what each
// sharding strategy promises (the ZeRO paper's 4 + 4 + 8 for fp32 weights and gradients:
// optim 4 + 4 + 8/d, optim_grads 4 + (4 + 8)/d plus the buckets being reduced,
// optim_grads_params 16/d plus the units gathered).
// LoRA: the frozen base holds its weights alone; the adapters weights, gradients and Adam.
bool print_lora_state(const engine::RankModel& model, std::ostream& log) {
  long base = 0, adapters = 0, moments = 0;
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    if (!model.chunks[j]->has_lora()) return false;
    base += model.chunks[j]->parameters().size();
    adapters += model.chunks[j]->lora_parameters().size();
    moments += model.optimizers[j]->moment_bytes();
  }
  log << "LoRA on this rank: the base's " << base << " floats frozen (weights "
      << format_bytes(4.0 * base) << ", no gradients, no Adam); adapters " << adapters
      << " floats (" << std::setprecision(3) << 100.0 * adapters / base
      << "% of the base): weights " << format_bytes(4.0 * adapters) << " + gradients "
      << format_bytes(4.0 * adapters) << " + Adam " << format_bytes(moments) << "\n";
  log << std::setprecision(6);
  return true;
}

void print_optimizer_state(const engine::RankModel& model, data_parallel::ShardingStrategy s, int d,
                           std::ostream& log) {
  if (print_lora_state(model, log)) return;
  long params = 0, moments = 0;
  for (size_t j = 0; j < model.chunks.size(); ++j)
    params += model.chunks[j]->parameters().size(), moments += model.optimizers[j]->moment_bytes();
  const double grads = 4.0 * (double)planned_floats(model, "gradients") / params;
  const double weights = 4.0 * (double)planned_floats(model, "weights") / params;
  log << "optimizer state on this rank: " << format_bytes(moments) << " (" << std::setprecision(3)
      << weights + grads + (double)moments / params << " bytes per parameter with fp32 weights "
      << "and gradients, of which weights " << weights << " and gradients " << grads << "; "
      << data_parallel::sharding_strategy_name(s) << " (" << data_parallel::zero_stage_name(s)
      << ") at d = " << d << ": no_shard 16, optim 8 + 8/d = " << 8.0 + 8.0 / d
      << ", optim_grads 4 + 12/d = " << 4.0 + 12.0 / d << " plus the buckets in reduction"
      << ", optim_grads_params 16/d = " << 16.0 / d << " plus the units gathered)\n";
  log << std::setprecision(6);
}

// Expert parallelism: what this rank holds of the experts, apart from the dense buffer.
void print_expert_buffers(const engine::RankModel& model, std::ostream& log) {
  long floats = 0, moments = 0;
  for (size_t j = 0; j < model.chunks.size(); ++j)
    if (model.expert_optimizers[j]) {
      floats += model.chunks[j]->expert_parameters().size();
      moments += model.expert_optimizers[j]->moment_bytes();
    }
  if (floats == 0) return;
  log << "expert buffers on this rank (its E/EP experts, reduced over the expert-data group): "
      << floats << " floats, weights " << format_bytes(4 * floats) << " + gradients "
      << format_bytes(4 * floats) << " + Adam " << format_bytes(moments) << "\n";
  for (const auto& reducer : model.expert_reducers)
    if (reducer) {
      log << "expert ";
      reducer->print(log);
    }
}

std::string split_rule(const TrainingConfig& c) {
  if (c.decoder_first_pipeline_num_layers != 0 || c.decoder_last_pipeline_num_layers != 0)
    return "--decoder-first/last-pipeline-num-layers";
  if (c.account_for_embedding_in_pipeline_split || c.account_for_loss_in_pipeline_split)
    return "--account-for-embedding/loss-in-pipeline-split";
  if (c.balanced_pipeline_split()) return "balanced by model FLOPs, output layer and loss included";
  return c.virtual_stages() > 1 ? "even: interleaved chunks" : "even";
}

// The layers of each (virtual) stage, the rule that chose them and, without virtual stages,
// each stage's model FLOPs per token (engine/pipeline_split.h) against their mean.
void print_pipeline_split(const TrainingConfig& c, std::ostream& log) {
  if (c.pipeline_model_parallel_size < 2) return;
  const std::vector<int> split = c.layers_per_virtual_stage();
  log << "pipeline split: layers per " << (c.virtual_stages() > 1 ? "virtual " : "") << "stage";
  for (int n : split) log << " " << n;
  log << " (" << split_rule(c) << ")";
  if (c.virtual_stages() == 1 && c.model.num_layers <= (1 << 16)) {
    const std::vector<double> cost =
        engine::stage_costs(engine::model_stage_costs(c.model, c.tensor_model_parallel_size,
                                                      c.recompute_granularity == "full"),
                            split);
    double mean = 0, most = 0;
    for (double f : cost) mean += f / cost.size(), most = std::max(most, f);
    log << "; training GFLOP per token per stage";
    for (double f : cost) log << " " << std::setprecision(3) << f * 1e-9;
    log << ", the largest " << most / mean << " x their mean";
    log << std::setprecision(6);
  }
  log << "\n";
}

}  // namespace

void print_run_layout(const TrainingConfig& c, const engine::RankContext& rank, std::ostream& log) {
  log << "trident: world size " << c.world_size << " = tensor " << c.tensor_model_parallel_size;
  if (c.context_parallel_size > 1)
    log << " x context " << c.context_parallel_size << " (" << c.cp_comm_type << ", "
        << c.model.seq_length / c.context_parallel_size << " tokens of each sample per rank)";
  log << " x pipeline " << c.pipeline_model_parallel_size << " x data " << c.data_parallel_size()
      << "; " << omp_get_max_threads() << " threads per rank\n";
  log << "model: " << c.model.num_layers << " layers, hidden " << c.model.hidden_size << ", "
      << c.model.num_attention_heads << " heads, ffn " << c.model.ffn() << ", seq "
      << c.model.seq_length << ", vocab " << c.model.vocab_size << " padded to "
      << c.model.padded_vocab_size(c.tensor_model_parallel_size) << ", "
      << c.model.parameter_count(c.tensor_model_parallel_size) << " parameters\n";
  print_block(c.model, log);
  print_batch_and_schedule(c, log);
  print_pipeline_split(c, log);
  if (c.sequence_parallel && c.tensor_model_parallel_size == 1)
    log << "warning: --sequence-parallel has no effect with --tensor-model-parallel-size 1; "
           "it is off (as in Megatron)\n";
  rank.grid->print(log, rank.nodes);
}

void print_rank_model(const TrainingConfig& c, const engine::RankModel& model,
                      int data_parallel_size, std::ostream& log) {
  if (!c.load_hf.empty()) log << "loaded weights from " << c.load_hf << "\n";
  pipeline_parallel::print_schedule(log, model.schedule);
  for (const auto& chunk : model.chunks) chunk->memory_plan().print(log);
  if (!model.buffers.buffers().empty())
    model.buffers.print(log, "memory plan, besides the chunks (this rank)");
  for (const auto& reducer : model.reducers) reducer->print(log);
  print_optimizer_state(model, c.sharding_strategy(), data_parallel_size, log);
  print_expert_buffers(model, log);
}

double peak_tflops_of_rank(const TrainingConfig& c, const engine::RankContext& rank,
                           std::ostream& log, int trials) {
  if (c.peak_tflops > 0) return c.peak_tflops;
  int local_ranks = 0;
  for (const std::string& n : rank.nodes) local_ranks += n == rank.nodes[rank.world_rank];
  // A rank bound to one core (mpirun's default for 1-2 ranks) has that core; ranks that
  // share the node's cores split them.
  const int own = physical_cores();
  const int cores = rank.node_cores > 0 ? rank.node_cores : own;
  const double share = std::min<double>(
      {(double)omp_get_max_threads(), (double)own, (double)cores / std::max(1, local_ranks)});
  kernels::PeakMeasurement m = kernels::measure_peak_tflops(c.precision(), share, trials);
  log << "peak for MFU: " << kernels::precision_name(m.precision) << " multiply-add loop "
      << std::fixed << std::setprecision(1) << m.per_core_gflops << " GFLOP/s per core x "
      << std::setprecision(2) << share << " cores per rank (" << cores << " cores, " << local_ranks
      << " rank" << (local_ranks > 1 ? "s" : "") << " on this node) = " << std::setprecision(3)
      << m.tflops << " TFLOP/s per rank\n";
  log.unsetf(std::ios::fixed);
  return m.tflops;
}

double recheck_peak_tflops(double peak, double observed, const std::function<double()>& measure) {
  if (!(observed > peak)) return peak;
  return std::max(peak, measure());
}

}  // namespace trident::train
