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

// The ring attention's overlap fraction (--cp-comm-type p2p at c > 1), min and max over ranks.
// A rank's fraction is 1 - cp-ring-wait / cp-ring-transfer in [0, 1]:
// - cp-ring-compute: the ring's attention compute in steps with a transfer in flight;
// - cp-ring-wait: the time then blocked waiting for those transfers (after the compute);
// - cp-ring-transfer: what those transfers would take with nothing to overlap: their bytes
//   times the per-byte time of the backward's last transfer (the finished d k, d v going
//   home), which the ring waits for with no work left to hide it.
// 1: every transfer finished behind the compute; 0: waited as long as a transfer alone (as
// under shared-memory Open MPI, whose copy runs inside the wait).
struct RingOverlap {
  bool found = false;
  double min = 0, max = 0;
};

struct TimerReport {
  std::vector<TimerRow> rows;
  StragglerReport straggler;
  RingOverlap ring_overlap;
};

// What each process group's collectives did during one step (the counters' difference).
using GroupCollectives = std::vector<std::pair<std::string, comm::CollectiveCounters>>;

class IntervalTimers {
 public:
  // level: --timing-log-level (0 none, 1 coarse: forward-backward, optimizer, gradient sync;
  // 2 also compute, send and receive, each process group's collectives by kind, as
  // "<group>-<kind>": the time inside MPI, waiting for peers included, and the ring
  // attention's cp-ring-* timers and overlap, RingOverlap); threshold: straggler when
  // max > (1 + threshold) x median of the ranks' compute.
  IntervalTimers(int level, double straggler_threshold);
  int level() const { return level_; }
  // groups: the tensor, data, pipeline, expert and context groups' collectives of the step,
  // in that order (training_log.h snapshot_collectives; later groups are not timed).
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
