#include "train/report.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "distributed/process_grid.h"
#include "model/gather.h"
#include "pipeline_parallel/simulator.h"
#include "train/run_pictures.h"
#include "train/training_run.h"

namespace trident::train {

long peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024L;
}

void DataParallelWaits::add(engine::RankModel& model, bool count) {
  for (auto& g : model.gatherers) {
    const data_parallel::ParameterGatherer::Stats s = g->take_stats();
    if (count)
      unit_gathers += s.gathers, unprefetched += s.unprefetched, unit_wait += s.wait_seconds;
  }
  if (!count) return;
  for (const auto& r : model.reducers)
    reduction += r->last_wait_seconds(), gather += r->last_gather_wait_seconds();
  ++iterations;
}

void DataParallelWaits::print(const engine::RankModel& model, const TrainingConfig& c,
                              std::ostream& log) const {
  int early = 0, total = 0;
  for (const auto& r : model.reducers)
    early += r->launched_before_finish(), total += (int)r->buckets().size();
  const double n = std::max(1L, iterations);
  log << "data parallel: " << early << " of " << total
      << " gradient buckets started during the last backward of the last iteration"
      << (c.overlap_grad_reduce ? "" : " (--overlap-grad-reduce is off)") << "; then waited "
      << std::fixed << std::setprecision(1) << reduction / n * 1e3 << " ms for the "
      << (c.distributed_optimizer() ? "reduce-scatter" : "reduction");
  int expert_early = 0, expert_total = 0;  // ZeRO-2/3 of the expert buffers
  for (const auto& r : model.expert_reducers)
    if (r && r->shards_gradients())
      expert_early += r->launched_before_finish(), expert_total += (int)r->buckets().size();
  if (expert_total > 0)
    log << "; " << expert_early << " of " << expert_total
        << " expert gradient buckets started during it (expert-data group)";
  if (!model.gatherers.empty())
    log << "; ZeRO-3: " << unit_gathers / n << " unit all-gathers, " << unprefetched / n
        << " of them not prefetched, " << unit_wait / n * 1e3 << " ms waiting for them";
  else if (c.distributed_optimizer())
    log << "; the parameter all-gather kept it waiting " << gather / n * 1e3 << " ms"
        << (c.overlap_param_gather ? " inside the forward (--overlap-param-gather)"
                                   : " (--overlap-param-gather is off)");
  log << " (per iteration, mean of the " << iterations << " after the first)\n";
  log.unsetf(std::ios::fixed);
}

namespace {

// Iterations this run trained (not those of a resumed checkpoint), at least 1.
long iterations_run(const TrainingRun& run) {
  return std::max(1L, run.train_iters - run.first_iteration + 1);
}

// What the training iterations sent over each group (validation excluded).
void print_collectives(const GroupCollectives& groups, long iterations, std::ostream& log,
                       MetricsWriter& metrics) {
  nlohmann::ordered_json summary;
  std::ostringstream rows;  // a one-rank run has none: no heading, no metrics entry
  // ms: time inside MPI (the whole blocking call, or the wait on a non-blocking one), so
  // it shows what each kind of collective costs this rank, waiting for slower peers included.
  for (const auto& [name, k] : groups) {
    auto row = [&](const char* op, const comm::CollectiveCounters::Entry& e) {
      if (!e.calls) return;
      rows << "  " << std::left << std::setw(9) << name << std::setw(15) << op << std::right
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
    row("all-to-all", k.all_to_all);
  }
  if (summary.empty()) return;
  log << "collectives of rank 0 per training iteration (calls, MiB, ms in MPI):\n" << rows.str();
  metrics.write_json({{"collectives", summary}, {"iterations", iterations}});
}

// Every rank writes its events beside the output; rank 0 merges them into one trace.
void write_timeline(const TrainingConfig& c,
                    const std::vector<pipeline_parallel::TraceEvent>& events,
                    const engine::RankContext& rank, std::ostream& log) {
  const std::string& path = c.timeline.empty() ? c.timeline_svg : c.timeline;  // parts beside it
  const std::string part = path + ".rank" + std::to_string(rank.world_rank);
  {
    std::ofstream out(part);
    for (const auto& e : events)
      out << nlohmann::json(
                 {e.name, e.category, e.rank, e.start_us, e.duration_us, e.cpu_us, e.chunk})
                 .dump()
          << "\n";
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
      all.push_back({j[0], j[1], j[2], j[3], j[4], j[5], j[6]});
    }
    std::remove(name.c_str());
  }
  if (!c.timeline.empty()) {
    pipeline_parallel::write_chrome_trace(path, all);
    log << "timeline: " << all.size() << " events -> " << path << " (chrome://tracing, Perfetto)\n";
  }
  write_timeline_svg(c, all, rank.grid->rank_labels(), log);
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

// Activations and their gradients sent between stages, per iteration: the bytes that
// scatter/gather and sequence parallelism cut by t.
void print_boundary_bytes(TrainingRun& run) {
  const TrainingConfig& c = run.config;
  const long bytes = run.executor->boundary_bytes_sent();
  run.log << "pipeline boundary sends of rank 0: " << bytes / iterations_run(run)
          << " bytes per iteration"
          << (c.sequence_parallel_active() ? " (sequence parallel: this rank's 1/t of each tensor)"
              : c.scatter_gather && run.rank.groups->tensor->size() > 1
                  ? " (scatter/gather: 1/t of each tensor)"
                  : "")
          << "\n";
  run.training_log->metrics().write_json(
      {{"pipeline_boundary_bytes", bytes}, {"iterations", run.train_iters}});
}

// Tensor-parallel ranks hold copies of the LayerNorms and biases: they must stay equal.
void print_replicated_drift(TrainingRun& run) {
  comm::Communicator& tp = *run.rank.groups->tensor;
  double drift = 0;
  for (const auto& chunk : run.model.chunks)
    drift = std::max(drift, replicated_parameter_drift(chunk->parameters(), tp));
  run.log << "replicated parameters across tensor-parallel ranks: max |difference| " << drift
          << "\n";
}

}  // namespace

GroupCollectives training_collectives(const TrainingRun& run) {
  GroupCollectives training = snapshot_collectives(*run.rank.groups);
  for (size_t i = 0; i < training.size(); ++i)
    training[i].second -= run.evaluation_traffic[i].second;
  return training;
}

void report_parallel_overlap(TrainingRun& run) {
  if (run.rank.groups->data->size() > 1)
    run.data_parallel_waits.print(run.model, run.config, run.log);
  comm::Communicator& pp = *run.rank.groups->pipeline;
  if (pp.size() <= 1) return;
  print_bubble(run.last_step_events, run.executor->schedule(), pp, run.log);
  print_boundary_bytes(run);
}

void report_end_of_run(TrainingRun& run, const GroupCollectives& training) {
  if (run.config.records_timeline()) write_timeline(run.config, run.timeline, run.rank, run.log);
  print_collectives(training, iterations_run(run), run.log, run.training_log->metrics());
  if (run.rank.groups->tensor->size() > 1) print_replicated_drift(run);
  // The largest of the data-parallel group's: they share one plan, for the rank holding the
  // most (sharded strategies hold different units outside their shards).
  double peak = (double)peak_rss_bytes();
  run.rank.groups->data->all_reduce(&peak, 1, comm::ReduceOp::kMax);
  run.log << "peak RSS " << format_bytes((long)peak)
          << " (plan: " << format_bytes(run.model.planned_bytes()) << ")\n";
  write_report_page(run);
}

}  // namespace trident::train
