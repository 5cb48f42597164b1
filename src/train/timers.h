#pragma once
// Megatron-style timers, read off what the step already records: the pipeline executor and
// the optimizer step log every op with its category (pipeline_parallel/timeline.h), so the
// timers are sums over those events, with no clocks of their own in the hot path. At each
// log interval every rank's mean ms per iteration is gathered: min and max over ranks per
// timer (Megatron's "(min, max) time across ranks"), and a straggler line when a rank's
// compute exceeds the median of its pipeline stage's ranks by more than a threshold.
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "pipeline_parallel/timeline.h"

namespace trident::train {

struct TimerRow {
  std::string name;
  double min_ms = 0, max_ms = 0;  // mean per iteration of the interval, over ranks
  int max_rank = 0;
};

struct StragglerReport {
  bool found = false;
  int rank = 0;  // the slowest rank by forward + backward compute
  double ms = 0, median_ms = 0;
};

struct TimerReport {
  std::vector<TimerRow> rows;
  StragglerReport straggler;
};

// What each process group's collectives did during one step (the counters' difference).
using GroupCollectives = std::vector<std::pair<std::string, comm::CollectiveCounters>>;

class IntervalTimers {
 public:
  // level: --timing-log-level (0 none, 1 coarse: forward-backward, optimizer, gradient sync;
  // 2 also compute, send and receive, and each process group's collectives by kind, as
  // "<group>-<kind>": the time inside MPI, waiting for peers included); threshold: straggler when
  // max > (1 + threshold) x median of the ranks' compute.
  IntervalTimers(int level, double straggler_threshold);
  int level() const { return level_; }
  // groups: the tensor, data and pipeline groups' collectives of the step, in that order.
  void add_step(const std::vector<pipeline_parallel::TraceEvent>& events,
                const GroupCollectives& groups);
  // Collective over `world` (every rank calls it at the same iteration); resets the interval.
  // pipeline_stage: this rank's, so a straggler is judged against ranks doing the same work.
  TimerReport reduce(comm::Communicator& world, int pipeline_stage);

 private:
  int level_;
  double threshold_;
  std::vector<std::string> names_;  // the fixed timers, then <group>-<kind>
  std::vector<int> levels_;
  std::vector<double> sums_ms_;  // per timer, this interval
  int steps_ = 0;
};

// Megatron's layout: "(min, max) time across ranks (ms):" then one line per timer; the
// straggler line after it when there is one; names the host when `hosts` has the ranks'.
std::string format_timers(const TimerReport& r, const std::vector<std::string>& hosts);

}  // namespace trident::train
