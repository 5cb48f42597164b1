#include "train/train_step.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "distributed/fault_injection.h"
#include "engine/optimizer_step.h"

namespace trident::train {

namespace {

// Testing hooks that act at an iteration's start: the hang watchdog names the iteration it
// caught, and --inject-fault-iteration makes one rank fail there.
void enter_iteration(TrainingRun& run, long iteration) {
  const TrainingConfig& c = run.config;
  if (run.rank.groups->watchdog) run.rank.groups->watchdog->set_iteration(iteration);
  if (iteration == c.inject_fault_iteration && run.rank.world_rank == c.inject_fault_rank)
    distributed::inject_fault(c.inject_fault_kind, iteration);
}

// Forward and backward of this replica's micro-batches, gradients accumulated at
// loss_scale / (the global batch's counted targets: every token, or under --sft the
// assistant's), so that they are of the mean loss over them; returns this rank's loss
// sum (its cp rank's tokens of the replica's samples) and the global count. Samples are dealt
// over the data-parallel replicas: the cp ranks of a replica read the same ones.
double forward_backward(TrainingRun& run, long global_batch, float loss_scale, long* counted) {
  const TrainingConfig& c = run.config;
  comm::Communicator& dp = *run.rank.groups->replicas;
  const int micro = c.micro_batch_size, seq = c.model.seq_length;
  const int m = (int)(global_batch / ((long)micro * dp.size()));
  const long consumed = run.progress.consumed_samples;
  run.executor->set_microbatches(m);
  run.training_log->begin_step();
  run.model.zero_grads();
  fill_replica_batch(*run.data.train, consumed, c, m, dp.rank(), dp.size(), run.batch_tokens);
  *counted = counted_targets(run.batch_tokens, seq, dp);
  // A batch without a counted target (an SFT batch of prompts only) adds nothing.
  const float grad_scale = 1.f / (float)std::max(*counted, 1L);
  // The router losses count per micro-batch whatever a loss mask counts (GPTModel).
  for (GPTModel* chunk : run.model.chunk_pointers())
    chunk->set_router_loss_scale((double)loss_scale / ((double)m * dp.size()));
  const int* tokens = run.batch_tokens.data();
  // A micro-batch's first sample names its dropout masks, whatever the layout.
  return run.executor->train_step(
      [&](int i) { return tokens + (size_t)i * micro * (seq + 1); }, grad_scale * loss_scale,
      [&](int i) { return consumed + (long)i * micro * dp.size() + (long)dp.rank() * micro; });
}

engine::StepOutcome optimizer_step(TrainingRun& run, long iteration, float loss_scale, float lr) {
  pipeline_parallel::PipelineExecutor& executor = *run.executor;
  engine::StepOptions step;
  step.lr = lr;
  step.loss_scale = loss_scale, step.clip_grad = run.config.adam.clip_grad;
  step.distributed_optimizer = run.config.distributed_optimizer();
  step.inject_overflow =
      iteration == run.config.inject_grad_overflow_iteration && run.rank.world_rank == 0;
  step.now_us = [&executor] { return executor.now_us(); };
  step.record = [&executor](const std::string& name, const std::string& category, double t0,
                            double t1) { executor.record(name, category, t0, t1); };
  return engine::finalize_and_step(run.model, *run.rank.groups, step);
}

}  // namespace

// The MoE layers' router losses and expert loads of the step, from every chunk of every
// stage, as Megatron's MoE logging reduces the losses: summed over pipeline stages (each
// layer lives on one), averaged over micro-batches and data-parallel ranks; the tokens per
// expert summed over the global batch.
void collect_moe_stats(TrainingRun& run, StepResult& r) {
  const ModelConfig& model = run.config.model;
  const int experts = model.moe.num_experts, width = 2 + experts;
  std::map<int, size_t> slot;  // global MoE layer -> its row in the flat buffer
  for (int l = 0; l < model.num_layers; ++l)
    if (model.is_moe_layer(l)) slot.emplace(l, slot.size());
  std::vector<double> flat(slot.size() * width, 0.0);  // per layer: aux, z, tokens[E]
  for (GPTModel* chunk : run.model.chunk_pointers())
    for (const auto& [layer, s] : chunk->take_moe_stats()) {
      double* row = flat.data() + slot.at(layer) * width;
      row[0] += s.aux, row[1] += s.z;
      for (int e = 0; e < (int)s.tokens_per_expert.size(); ++e)
        row[2 + e] += s.tokens_per_expert[e];
    }
  comm::Communicator& dp = *run.rank.groups->data;
  // Whole experts (ETP < t): each tensor rank routed its own rows, so the loads are summed
  // over the tensor group; the losses, the micro-batch's on every rank, are averaged.
  const int t = run.config.tensor_model_parallel_size;
  if (run.config.expert_tensor_parallel() < t) {
    for (size_t at = 0; at < flat.size(); at += width) flat[at] /= t, flat[at + 1] /= t;
    run.rank.groups->tensor->all_reduce(flat.data(), (long)flat.size(), comm::ReduceOp::kSum);
  }
  run.rank.groups->pipeline->all_reduce(flat.data(), (long)flat.size(), comm::ReduceOp::kSum);
  dp.all_reduce(flat.data(), (long)flat.size(), comm::ReduceOp::kSum);
  const double replicas_x_micro_batches =
      (double)r.global_batch / (double)run.config.micro_batch_size;
  for (const auto& [layer, at] : slot) {
    const double* row = flat.data() + at * width;
    StepResult::MoeLayer out{layer, row[0] / replicas_x_micro_batches,
                             row[1] / replicas_x_micro_batches,
                             std::vector<double>(row + 2, row + width)};
    r.moe_aux_loss += out.aux, r.moe_z_loss += out.z;
    r.moe_layers.push_back(std::move(out));
  }
}

StepResult train_step(TrainingRun& run, long iteration) {
  enter_iteration(run, iteration);
  const auto start = std::chrono::steady_clock::now();
  StepResult r;
  r.global_batch = run.batch_schedule.at(run.progress.consumed_samples);
  const float loss_scale = run.model.scaler.scale();
  r.loss_sum = forward_backward(run, r.global_batch, loss_scale, &r.counted_targets);
  if (run.config.model.moe.enabled()) collect_moe_stats(run, r);
  const double optimizer_start = run.executor->now_us();
  r.lr = run.lr_schedule.at(run.progress.lr_schedule_samples);
  // A save in the background may still be copying the weights and moments the step changes.
  if (run.async_saver) run.async_saver->wait_until_copied();
  const engine::StepOutcome outcome = optimizer_step(run, iteration, loss_scale, r.lr);
  run.data_parallel_waits.add(run.model, iteration > run.first_iteration);  // 1st warms up
  r.grad_norm = outcome.grad_norm, r.skipped = outcome.skipped;
  // As Megatron, the schedule advances only on steps that updated the weights.
  if (!r.skipped) run.progress.lr_schedule_samples += r.global_batch;
  run.rank.groups->data->all_reduce(&r.loss_sum, 1, comm::ReduceOp::kSum);
  run.executor->record("optimizer step", "optimizer", optimizer_start, run.executor->now_us());
  run.last_step_events = run.executor->take_events();
  run.training_log->step(run.last_step_events);
  if (run.config.records_timeline())
    run.timeline.insert(run.timeline.end(), run.last_step_events.begin(),
                        run.last_step_events.end());
  run.progress.consumed_samples += r.global_batch;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.seconds_per_sample = r.seconds / (double)r.global_batch;
  return r;
}

}  // namespace trident::train
