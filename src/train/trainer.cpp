#include "train/trainer.h"

#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/startup_clock.h"
#include "data_parallel/grad_reducer.h"
#include "distributed/fault_injection.h"
#include "engine/optimizer_step.h"
#include "engine/rank_model.h"
#include "io/hf_gpt2.h"
#include "model/gather.h"
#include "model/gpt_model.h"
#include "optim/adamw.h"
#include "optim/lr_scheduler.h"
#include "pipeline_parallel/executor.h"
#include "pipeline_parallel/simulator.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "train/metrics.h"
#include "train/run_record.h"
#include "core/cpu_set.h"
#include "kernels/peak.h"
#include "model/flops.h"
#include "train/training_data.h"
#include "train/training_log.h"

namespace trident {

long peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024L;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What the training iterations sent over each group (validation excluded).
void print_collectives(const GroupCollectives& groups, long iterations, std::ostream& log,
                       MetricsWriter& metrics) {
  nlohmann::ordered_json summary;
  // ms: time inside MPI (the whole blocking call, or the wait on a non-blocking one), so
  // it shows what each kind of collective costs this rank, waiting for slower peers included.
  log << "collectives of rank 0 per training iteration (calls, MiB, ms in MPI):\n";
  for (const auto& [name, k] : groups) {
    auto row = [&](const char* op, const comm::CollectiveCounters::Entry& e) {
      if (!e.calls) return;
      log << "  " << std::left << std::setw(9) << name << std::setw(15) << op << std::right
          << std::setw(10) << std::fixed << std::setprecision(1) << (double)e.calls / iterations
          << std::setw(12) << std::setprecision(3) << e.bytes / 1048576.0 / iterations
          << std::setw(10) << std::setprecision(2) << e.seconds * 1e3 / iterations << "\n";
      summary[name][op] = {{"calls", e.calls}, {"bytes", e.bytes}, {"seconds", e.seconds}};
    };
    row("all-reduce", k.all_reduce);
    row("all-gather", k.all_gather);
    row("reduce-scatter", k.reduce_scatter);
    row("broadcast", k.broadcast);
    row("send", k.send);
    row("recv", k.recv);
  }
  log.unsetf(std::ios::fixed);
  log << std::setprecision(6);
  metrics.write_json({{"collectives", summary}, {"iterations", iterations}});
}

void print_layout(const TrainingConfig& c, std::ostream& log) {
  log << "trident: world size " << c.world_size << " = tensor " << c.tensor_model_parallel_size
      << " x pipeline " << c.pipeline_model_parallel_size << " x data " << c.data_parallel_size()
      << "; " << omp_get_max_threads() << " threads per rank\n";
  log << "model: " << c.model.num_layers << " layers, hidden " << c.model.hidden_size << ", "
      << c.model.num_attention_heads << " heads, ffn " << c.model.ffn() << ", seq "
      << c.model.seq_length << ", vocab " << c.model.vocab_size << " padded to "
      << c.model.padded_vocab_size(c.tensor_model_parallel_size) << ", "
      << c.model.parameter_count(c.tensor_model_parallel_size) << " parameters\n";
  const ModelConfig& m = c.model;
  if (m.rms_norm() || m.rope() || m.swiglu || m.group_query_attention || !m.tied_output() ||
      m.disable_bias_linear) {
    log << "block: " << m.normalization << " (eps " << m.layernorm_epsilon << "), "
        << (m.rope() ? "rope (base " + std::to_string(m.rotary_base) + ", " +
                           std::to_string(m.rotary_dim()) + " of " + std::to_string(m.head_dim()) +
                           " dims)"
                     : std::string("learned positions"))
        << ", " << (m.swiglu ? "SwiGLU" : "GeLU") << ", " << m.query_groups() << " query groups, "
        << (m.tied_output() ? "tied" : "untied") << " output layer, "
        << (m.add_bias_linear() ? "biases" : "no biases") << "\n";
  }
  log << "batch: micro " << c.micro_batch_size << " x " << c.num_micro_batches()
      << " micro-batches x data " << c.data_parallel_size() << " = global "
      << c.effective_global_batch();
  if (c.batch_schedule().ramps())
    log << ", ramped up from " << c.rampup_batch_size[0] << " by " << c.rampup_batch_size[1]
        << " over " << c.rampup_batch_size[2] << " samples";
  const LrSchedule lr = c.lr_schedule();
  log << "\ntraining: " << c.total_train_iters() << " iterations, " << c.total_train_samples()
      << " samples" << (c.sample_based() ? " (sample-based)" : "") << "; learning rate "
      << c.lr_decay_style << " from " << c.lr << " to " << c.min_lr << ", warm-up "
      << lr.warmup_steps << " samples, decay ends at " << lr.decay_steps << " samples\n";
}

// This data-parallel replica's micro-batches of the global batch starting at `consumed`:
// micro-batch i holds samples consumed + i * b * d + replica * b + [0, b) (Megatron's sampler).
void fill_replica_batch(const data::SampleSource& source, long consumed, const TrainingConfig& c,
                        int m, int replica, int replicas, std::vector<int>& tokens) {
  const int b = c.micro_batch_size, s = c.model.seq_length;
  tokens.resize((size_t)m * b * (s + 1));
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < b; ++k)
      source.sample(consumed + (long)i * b * replicas + (long)replica * b + k,
                    tokens.data() + ((size_t)i * b + k) * (s + 1));
}

// Mean loss over eval_iters global batches starting at sample `first`; each data-parallel
// replica evaluates its slice of every batch, as in training.
double evaluate(pipeline_parallel::PipelineExecutor& executor, const data::SampleSource& source,
                const TrainingConfig& c, comm::Communicator& dp, long first, long* tokens_out) {
  const int b = c.micro_batch_size, s = c.model.seq_length, m = c.num_micro_batches();
  const long global_batch = c.effective_global_batch();
  std::vector<int> tokens;
  double total = 0;
  for (int e = 0; e < c.eval_iters; ++e) {
    fill_replica_batch(source, first + e * global_batch, c, m, dp.rank(), dp.size(), tokens);
    total += executor.evaluate([&](int i) { return tokens.data() + (size_t)i * b * (s + 1); }, m);
  }
  dp.all_reduce(&total, 1, comm::ReduceOp::kSum);
  *tokens_out = c.eval_iters * global_batch * s;
  return *tokens_out ? total / *tokens_out : 0.0;
}

// Every rank writes its events beside the output; rank 0 merges them into one trace.
void write_timeline(const std::string& path,
                    const std::vector<pipeline_parallel::TraceEvent>& events,
                    const RankContext& rank, std::ostream& log) {
  const std::string part = path + ".rank" + std::to_string(rank.world_rank);
  {
    std::ofstream out(part);
    for (const auto& e : events)
      out << nlohmann::json({e.name, e.category, e.rank, e.start_us, e.duration_us}).dump() << "\n";
  }
  double barrier = 0;
  rank.groups->world->all_reduce(&barrier, 1, comm::ReduceOp::kSum);
  if (rank.world_rank != 0) return;
  std::vector<pipeline_parallel::TraceEvent> all;
  for (int r = 0; r < rank.grid->world(); ++r) {
    const std::string name = path + ".rank" + std::to_string(r);
    std::ifstream in(name);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      all.push_back({j[0], j[1], j[2], j[3], j[4]});
    }
    std::remove(name.c_str());
  }
  pipeline_parallel::write_chrome_trace(path, all);
  log << "timeline: " << all.size() << " events -> " << path << " (chrome://tracing, Perfetto)\n";
}

// Bubble per pipeline rank from the executed timeline (idle over compute), gathered, and the
// same step replayed on the simulator at its ops' CPU times (the schedule's own bubble when
// ranks share cores).
void print_bubble(const std::vector<pipeline_parallel::TraceEvent>& events,
                  const pipeline_parallel::ScheduleConfig& schedule, comm::Communicator& pp,
                  std::ostream& log) {
  const auto measured = pipeline_parallel::pipeline_bubble(events, pp);
  const auto replayed = pipeline_parallel::replayed_bubble(events, schedule, pp);
  auto print_row = [&](const char* label, const pipeline_parallel::StageBubbles& b) {
    log << label;
    for (double x : b.per_stage) log << " " << x;
    log << "; pipeline (busiest stage, " << b.busiest << ") " << b.pipeline() << "\n";
  };
  log << std::fixed << std::setprecision(3);
  print_row("pipeline bubble of the last iteration (idle / compute) per stage:", measured);
  print_row("  replayed at its ops' CPU times (every rank on its own core):", replayed);
  log << "  analytic "
      << (schedule.splits_backward() ? "(p-1)/(3m) (zb-h1 at tf = tb = tw)" : "(p-1)/(v*m)")
      << " = " << pipeline_parallel::analytic_bubble_fraction(schedule) << "\n";
  log.unsetf(std::ios::fixed);
}

// What data parallelism left exposed: the time the step waited for gradient reductions and
// (distributed optimizer) for the parameter all-gather, summed over iterations.
struct DataParallelWaits {
  double reduction = 0, gather = 0;
  long iterations = 0;

  void add(const RankModel& model) {
    for (const auto& r : model.reducers)
      reduction += r->last_wait_seconds(), gather += r->last_gather_wait_seconds();
    ++iterations;
  }

  void print(const RankModel& model, const TrainingConfig& c, std::ostream& log) const {
    int early = 0, total = 0;
    for (const auto& r : model.reducers)
      early += r->launched_before_finish(), total += (int)r->buckets().size();
    const double n = std::max(1L, iterations);
    log << "data parallel: " << early << " of " << total
        << " gradient buckets started during the last backward of the last iteration"
        << (c.overlap_grad_reduce ? "" : " (--overlap-grad-reduce is off)") << "; then waited "
        << std::fixed << std::setprecision(1) << reduction / n * 1e3 << " ms for the "
        << (c.use_distributed_optimizer ? "reduce-scatter" : "reduction");
    if (c.use_distributed_optimizer)
      log << "; the parameter all-gather kept it waiting " << gather / n * 1e3 << " ms"
          << (c.overlap_param_gather ? " inside the forward (--overlap-param-gather)"
                                     : " (--overlap-param-gather is off)");
    log << " (per iteration, mean of the " << iterations << " after the first)\n";
    log.unsetf(std::ios::fixed);
  }
};

// Before an evaluation that will take a while: what is evaluated and about how long it
// takes (a forward pass is about a third of a training step; Megatron's --eval-iters
// default suits 100k-iteration runs, not a one-iteration smoke test).
void announce_evaluation(const char* what, const TrainingConfig& c, double seconds_per_sample,
                         std::ostream& log) {
  const long samples = (long)c.eval_iters * c.effective_global_batch();
  const double estimate = seconds_per_sample * samples / 3;
  if (estimate < 2) return;
  log << "evaluating the " << what << " loss on " << c.eval_iters << " global batches (" << samples
      << " samples of " << c.model.seq_length << " tokens): about " << std::fixed
      << std::setprecision(0) << estimate << " s (--eval-iters sets the batches, 0 skips it)\n"
      << std::flush;
  log.unsetf(std::ios::fixed);
  log << std::setprecision(6);
}

// This rank's share of the machine's arithmetic peak for the run's precision (--peak-tflops
// overrides it): ranks on one node split its physical cores.
double peak_tflops_of_rank(const TrainingConfig& c, const RankContext& rank, std::ostream& log) {
  if (c.peak_tflops > 0) return c.peak_tflops;
  int local_ranks = 0;
  for (const std::string& n : rank.nodes) local_ranks += n == rank.nodes[rank.world_rank];
  // A rank bound to one core (mpirun's default for 1-2 ranks) has that core; ranks that
  // share the node's cores split them.
  const int own = physical_cores();
  const int cores = rank.node_cores > 0 ? rank.node_cores : own;
  const double share = std::min<double>(
      {(double)omp_get_max_threads(), (double)own, (double)cores / std::max(1, local_ranks)});
  kernels::PeakMeasurement m = kernels::measure_peak_tflops(c.precision(), share);
  log << "peak for MFU: " << kernels::precision_name(m.precision) << " multiply-add loop "
      << std::fixed << std::setprecision(1) << m.per_core_gflops << " GFLOP/s per core x "
      << std::setprecision(2) << share << " cores per rank (" << cores << " cores, " << local_ranks
      << " rank" << (local_ranks > 1 ? "s" : "") << " on this node) = " << std::setprecision(3)
      << m.tflops << " TFLOP/s per rank\n";
  log.unsetf(std::ios::fixed);
  return m.tflops;
}

// --finetune takes only the weights; otherwise the whole state, the run settings checked.
checkpoint::LoadMode load_mode(const TrainingConfig& c) {
  if (c.finetune) return checkpoint::LoadMode::kWeightsOnly;
  return c.override_checkpoint_config ? checkpoint::LoadMode::kResumeOverride
                                      : checkpoint::LoadMode::kResume;
}

}  // namespace

int run_training(const TrainingConfig& c, const RankContext& rank, std::ostream& log) {
  if (c.threads > 0) omp_set_num_threads(c.threads);
  print_layout(c, log);
  if (c.sequence_parallel && c.tensor_model_parallel_size == 1)
    log << "warning: --sequence-parallel has no effect with --tensor-model-parallel-size 1; "
           "it is off (as in Megatron)\n";
  rank.grid->print(log, rank.nodes);
  comm::Communicator& tp = *rank.groups->tensor;
  comm::Communicator& pp = *rank.groups->pipeline;
  comm::Communicator& dp = *rank.groups->data;
  StartupClock startup(log);
  RankModel model = build_rank_model(c.rank_model_options(), tp, pp, dp, &startup);
  startup.begin("memory plan");
  if (!c.load_hf.empty()) log << "loaded weights from " << c.load_hf << "\n";
  pipeline_parallel::print_schedule(log, model.schedule);
  for (const auto& chunk : model.chunks) chunk->memory_plan().print(log);
  if (!model.buffers.buffers().empty())
    model.buffers.print(log, "memory plan, besides the chunks (this rank)");
  for (const auto& reducer : model.reducers) reducer->print(log);
  {
    const int d = dp.size();
    long params = 0, moments = 0;
    for (size_t j = 0; j < model.chunks.size(); ++j)
      params += model.chunks[j]->parameters().size(),
          moments += model.optimizers[j]->moment_bytes();
    log << "optimizer state on this rank: " << format_bytes(moments) << " (" << std::setprecision(3)
        << 8.0 + (double)moments / params << " bytes per parameter with fp32 "
        << "weights and gradients; 16 without the distributed optimizer, 8 + 8/d = "
        << 8.0 + 8.0 / d << " with it at d = " << d << ")\n";
    log << std::setprecision(6);
  }

  const int padded_vocab = model.chunks[0]->padded_vocab(), seq = c.model.seq_length;
  const int micro = c.micro_batch_size;
  startup.begin("peak measurement");
  const double peak = peak_tflops_of_rank(c, rank, log);
  std::vector<pipeline_parallel::PipelineStage*> stages;
  for (GPTModel* chunk : model.chunk_pointers()) stages.push_back(chunk);
  // Data parallelism: gradients of a chunk's last backward in the step are reduced bucket by
  // bucket while backward continues (--overlap-grad-reduce).
  auto before_backward = [&](int j, bool last) {
    if (!last) {
      model.chunks[j]->set_grad_ready_hook({});
      return;
    }
    data_parallel::GradientReducer* reducer = model.reducers[j].get();
    reducer->arm();
    model.chunks[j]->set_grad_ready_hook([reducer](int b, int e) { reducer->mark_ready(b, e); });
  };
  pipeline_parallel::PipelineExecutor executor(
      model.schedule, stages, pp, tp, micro, seq, c.model.hidden_size,
      {c.scatter_gather, rank.world_rank,
       rank.world_rank == c.inject_slow_rank ? c.inject_slow_forward_ms : 0.0,
       c.sequence_parallel_active()});
  executor.set_before_backward(before_backward);
  if (c.overlap_grad_reduce && dp.size() > 1)
    for (size_t j = 0; j < model.chunks.size(); ++j)
      model.chunks[j]->set_progress_hook(
          [reducer = model.reducers[j].get()] { reducer->progress(); });
  if (c.overlap_param_gather)
    for (size_t j = 0; j < model.chunks.size(); ++j)
      model.chunks[j]->set_params_needed_hook(
          [reducer = model.reducers[j].get()](int b, int e) { reducer->params_needed(b, e); });
  for (auto& reducer : model.reducers)
    reducer->set_launch_observer([&executor](const std::string& name) {
      const double t = executor.now_us();
      executor.record(name, "data-parallel", t, t + 1);
    });

  const LrSchedule schedule = c.lr_schedule();
  const GlobalBatchSchedule batches = c.batch_schedule();
  const long train_iters = c.total_train_iters();
  startup.begin("data indices");
  TrainingData data = make_training_data(c, log);
  // A restarted job finds no checkpoint on its first start; fine-tuning needs one.
  const bool resumable = !c.load.empty() && checkpoint::has_checkpoint(c.load);
  TrainingLog training_log(c, rank, resumable && !c.finetune, log);
  MetricsWriter& metrics = training_log.metrics();
  std::vector<int> tokens;
  std::vector<pipeline_parallel::TraceEvent> timeline, last_step;
  long consumed = 0, lr_samples = 0;
  double interval_loss = 0, interval_time = 0, interval_norm = 0, interval_flops = 0;
  long interval_tokens = 0;
  double seconds_per_sample = 0;  // of the latest training step
  int interval_count = 0, interval_stepped = 0;
  long evaluations = 0;
  // What evaluations send is not training traffic: it is subtracted from the totals.
  GroupCollectives eval_counters = snapshot_collectives(*rank.groups);
  for (auto& entry : eval_counters) entry.second = {};
  auto run_validation = [&](long iteration) {
    if (c.eval_iters == 0 || !data.valid) return;
    model.finish_param_gather();
    announce_evaluation("validation", c, seconds_per_sample, log);
    GroupCollectives before = snapshot_collectives(*rank.groups);
    long n = 0, first = evaluations++ * (long)c.eval_iters * c.effective_global_batch();
    double loss = evaluate(executor, *data.valid, c, dp, first, &n);
    training_log.validation({iteration, consumed, loss, n});
    GroupCollectives after = snapshot_collectives(*rank.groups);
    for (size_t i = 0; i < after.size(); ++i)
      eval_counters[i].second += (after[i].second -= before[i].second);
  };

  long first_iteration = 1;
  DataParallelWaits dp_waits;
  if (!c.load.empty() && !resumable && !c.finetune)
    log << "no checkpoint under " << c.load << " yet: starting from the initialisation\n";
  if (resumable || c.finetune) {
    startup.begin("checkpoint load");
    checkpoint::TrainingState st = checkpoint::load(c.load, run_record(c), model, rank, log, load_mode(c),
                                                    [&](double f) { startup.progress(f); });
    first_iteration = st.iteration + 1;
    consumed = st.consumed_samples;
    evaluations = st.evaluations;
    lr_samples = st.lr_schedule_samples;
  }
  long saves = 0;
  auto save_checkpoint = [&](long iteration) {
    checkpoint::SaveFault fault = checkpoint::SaveFault::kNone;
    if (++saves == c.inject_fault_save && rank.world_rank == 0)
      fault = c.inject_fault_save_point == "mid-commit" ? checkpoint::SaveFault::kMidCommit
                                                        : checkpoint::SaveFault::kBeforeCommit;
    model.finish_param_gather();
    checkpoint::save(c.save, run_record(c), model, {iteration, consumed, evaluations, lr_samples},
                     rank, log, {c.keep_checkpoints, fault});
  };
  long last_saved = -1;
  startup.finish();
  for (long it = first_iteration; it <= train_iters; ++it) {
    if (rank.groups->watchdog) rank.groups->watchdog->set_iteration(it);
    if (it == c.inject_fault_iteration && rank.world_rank == c.inject_fault_rank)
      distributed::inject_fault(c.inject_fault_kind, it);
    auto start = std::chrono::steady_clock::now();
    // The global batch of this iteration (batch-size ramp-up: it grows with consumed samples).
    const long global_batch = batches.at(consumed);
    const int m = (int)(global_batch / ((long)micro * dp.size()));
    const float grad_scale = 1.f / ((float)global_batch * seq);  // mean over the global batch
    executor.set_microbatches(m);
    training_log.begin_step();
    model.zero_grads();
    fill_replica_batch(*data.train, consumed, c, m, dp.rank(), dp.size(), tokens);
    const float loss_scale = model.scaler.scale();
    double loss_sum = executor.train_step(
        [&](int i) { return tokens.data() + (size_t)i * micro * (seq + 1); },
        grad_scale * loss_scale,
        [&](int i) { return consumed + (long)i * micro * dp.size() + (long)dp.rank() * micro; });
    const double optimizer_start = executor.now_us();
    engine::StepOptions step;
    step.lr = schedule.at(lr_samples);
    step.loss_scale = loss_scale, step.clip_grad = c.adam.clip_grad;
    step.distributed_optimizer = c.use_distributed_optimizer;
    step.inject_overflow = it == c.inject_grad_overflow_iteration && rank.world_rank == 0;
    step.now_us = [&executor] { return executor.now_us(); };
    step.record = [&executor](const std::string& name, const std::string& category, double t0,
                              double t1) { executor.record(name, category, t0, t1); };
    const engine::StepOutcome outcome = engine::finalize_and_step(model, *rank.groups, step);
    if (it > first_iteration) dp_waits.add(model);  // the first step warms up
    const double norm = outcome.grad_norm;
    const float lr = step.lr;
    const bool skip = outcome.skipped;
    // As Megatron, the schedule advances only on steps that updated the weights.
    if (!skip) lr_samples += global_batch;
    dp.all_reduce(&loss_sum, 1, comm::ReduceOp::kSum);
    executor.record("optimizer step", "optimizer", optimizer_start, executor.now_us());
    last_step = executor.take_events();
    training_log.step(last_step);
    if (!c.timeline.empty()) timeline.insert(timeline.end(), last_step.begin(), last_step.end());
    consumed += global_batch;
    double elapsed = seconds_since(start);
    seconds_per_sample = elapsed / (double)global_batch;
    interval_time += elapsed;
    interval_flops += training_flops_per_iteration(c.model, global_batch, seq, padded_vocab);
    interval_tokens += global_batch * seq;
    ++interval_count;
    if (!skip) {  // as Megatron, skipped iterations stay out of the averages
      interval_loss += loss_sum / ((double)global_batch * seq);
      interval_norm += norm;
      ++interval_stepped;
    }
    if (!std::isfinite(loss_sum)) {
      log << "error: loss is not finite at iteration " << it << "\n";
      return 3;
    }
    if (it % c.log_interval == 0 || it == train_iters) {
      double per_iter = interval_time / interval_count;
      IterationStats s;
      s.iteration = it, s.train_iters = train_iters, s.consumed_samples = consumed;
      s.ms_per_iter = per_iter * 1e3, s.lr = lr, s.global_batch = global_batch;
      s.loss = interval_stepped ? interval_loss / interval_stepped : NAN;
      s.grad_norm = interval_stepped ? interval_norm / interval_stepped : NAN;
      if (c.fp16)
        s.loss_scale = model.scaler.scale(), s.skipped_iterations = model.scaler.state().skipped;
      s.tokens_per_s = (double)interval_tokens / interval_time;
      s.tflops = interval_flops / interval_time / 1e12 / c.world_size, s.mfu = s.tflops / peak;
      training_log.interval(s);
      interval_loss = interval_time = interval_norm = interval_flops = 0;
      interval_tokens = 0;
      interval_count = interval_stepped = 0;
    }
    if (c.eval_interval > 0 && it % c.eval_interval == 0 && it != train_iters) run_validation(it);
    if (!c.save.empty() && c.save_interval > 0 && it % c.save_interval == 0)
      save_checkpoint(it), last_saved = it;
  }
  if (!c.save.empty() && last_saved != train_iters) save_checkpoint(train_iters);
  model.finish_param_gather();
  GroupCollectives training_counters = snapshot_collectives(*rank.groups);
  for (size_t i = 0; i < training_counters.size(); ++i)
    training_counters[i].second -= eval_counters[i].second;
  if (dp.size() > 1) dp_waits.print(model, c, log);
  if (pp.size() > 1) {
    print_bubble(last_step, executor.schedule(), pp, log);
    const long bytes = executor.boundary_bytes_sent();
    log << "pipeline boundary sends of rank 0: "
        << bytes / std::max(1L, train_iters - first_iteration + 1) << " bytes per iteration"
        << (c.sequence_parallel_active() ? " (sequence parallel: this rank's 1/t of each tensor)"
            : c.scatter_gather && tp.size() > 1 ? " (scatter/gather: 1/t of each tensor)"
                                                : "")
        << "\n";
    metrics.write_json({{"pipeline_boundary_bytes", bytes}, {"iterations", train_iters}});
  }
  run_validation(train_iters);
  if (c.eval_iters > 0 && data.test) {
    announce_evaluation("test", c, seconds_per_sample, log);
    long n = 0;
    double loss = evaluate(executor, *data.test, c, dp, 0, &n);
    log << " test loss at the end | lm loss value: " << std::scientific << loss
        << " | lm loss PPL: " << std::exp(loss) << " |\n";
    log.unsetf(std::ios::scientific);
  }
  if (!c.save_hf.empty()) {
    Parameters whole = gather_rank_model(model, c.rank_layout(), tp, pp);
    if (rank.world_rank == 0) io::save_hf_model(c.save_hf, c.model, whole);
    log << "saved HuggingFace GPT-2 model to " << c.save_hf << "\n";
  }
  if (!c.timeline.empty()) write_timeline(c.timeline, timeline, rank, log);
  print_collectives(training_counters, std::max(1L, train_iters - first_iteration + 1), log,
                    metrics);
  if (tp.size() > 1) {
    double drift = 0;
    for (const auto& chunk : model.chunks)
      drift = std::max(drift, replicated_parameter_drift(chunk->parameters(), tp));
    log << "replicated parameters across tensor-parallel ranks: max |difference| " << drift << "\n";
  }
  log << "peak RSS " << format_bytes(peak_rss_bytes())
      << " (plan: " << format_bytes(model.planned_bytes()) << ")\n";
  return 0;
}

}  // namespace trident
