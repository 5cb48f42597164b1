#pragma once
// What a training run reports, in one place: the log line and validation line, the
// --metrics-file JSON lines (appended to when the run resumes), TensorBoard scalars under
// Megatron's names (--tensorboard-dir) and the timers (--timing-log-level) with their
// straggler line. Rank 0 writes; the timers are gathered from every rank.
#include <optional>
#include <ostream>
#include <vector>

#include "engine/rank_context.h"
#include "pipeline_parallel/timeline.h"
#include "train/metrics.h"
#include "train/tensorboard.h"
#include "train/timers.h"
#include "train/training_config.h"

namespace trident::distributed {
struct ProcessGroups;
}

namespace trident::train {

// The tensor, data, pipeline, expert, context and replicas groups' counters, in that order.
GroupCollectives snapshot_collectives(const distributed::ProcessGroups& groups);

class TrainingLog {
 public:
  // resumed: the run continues a checkpoint's iterations (the metrics file is appended to).
  TrainingLog(const TrainingConfig& c, const engine::RankContext& rank, bool resumed,
              std::ostream& log);
  MetricsWriter& metrics() { return metrics_; }
  // Every rank, every iteration: where the step begins (what validation or checkpoints sent
  // before it stays out of the step's collective timers) ...
  void begin_step();
  // ... and its end: the executed events and the collectives since begin_step feed the timers.
  void step(const std::vector<pipeline_parallel::TraceEvent>& events);
  // Every rank at each log interval (the timers are collective).
  void interval(const IterationStats& s);
  // Rank 0's writers only.
  void validation(const ValidationStats& v);
  // The latest of each (for the end-of-run summary); empty before the first.
  const std::optional<IterationStats>& last_interval() const { return last_interval_; }
  const std::optional<ValidationStats>& last_validation() const { return last_validation_; }

 private:
  const engine::RankContext& rank_;
  std::ostream& log_;
  MetricsWriter metrics_;
  TensorBoardWriter tensorboard_;
  IntervalTimers timers_;
  GroupCollectives step_start_;
  int pipeline_stage_;
  std::optional<IterationStats> last_interval_;
  std::optional<ValidationStats> last_validation_;
};

}  // namespace trident::train
