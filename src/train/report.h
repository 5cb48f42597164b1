#pragma once
// What a run reports at its end: how well data parallelism hid its reductions, the
// pipeline's bubble and boundary traffic, the merged timeline, the collectives of one
// iteration, the drift of tensor-replicated parameters, and peak memory against the plan.
#include <ostream>

#include "engine/rank_model.h"
#include "train/timers.h"
#include "train/training_config.h"

namespace trident::train {

struct TrainingRun;

// Peak resident set size of this process so far, in bytes.
long peak_rss_bytes();

// What data parallelism left exposed: the time the step waited for gradient reductions and
// (distributed optimizer) for the parameter all-gather, summed over iterations.
struct DataParallelWaits {
  double reduction = 0, gather = 0;
  long iterations = 0;
  // Sharded weights (ZeRO-3): the units' all-gathers, those no prefetch had started, and
  // the seconds the passes waited for them.
  long unit_gathers = 0, unprefetched = 0;
  double unit_wait = 0;

  // After an iteration; `count` false: the first, which warms up (its figures are dropped).
  void add(engine::RankModel& model, bool count);
  void print(const engine::RankModel& model, const TrainingConfig& c, std::ostream& log) const;
};

// The collectives of the training iterations so far: the groups' counters less what
// evaluations sent.
GroupCollectives training_collectives(const TrainingRun& run);

// Collective over the world: the data-parallel waits (d > 1), then the pipeline's bubble
// and boundary bytes (p > 1).
void report_parallel_overlap(TrainingRun& run);

// Collective over the world, after the last evaluation: the timeline (--timeline), the
// collectives `training` sent per iteration, the replicated parameters' drift (t > 1), and
// peak RSS against the memory plan.
void report_end_of_run(TrainingRun& run, const GroupCollectives& training);

}  // namespace trident::train
