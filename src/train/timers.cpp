#include "train/timers.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace trident::train {

namespace {

struct TimerSpec {
  const char* name;
  int level;
};

// Megatron's timer names. forward-backward is the schedule's wall time on this rank.
const TimerSpec kTimers[] = {
    {"forward-backward", 1},   {"optimizer", 1},        {"all-grads-sync", 1},
    {"forward-compute", 2},    {"backward-compute", 2}, {"forward-recv", 2},
    {"backward-recv", 2},      {"forward-send", 2},     {"backward-send", 2},
    {"pipeline-send-wait", 2},
};
constexpr int kTimerCount = sizeof kTimers / sizeof kTimers[0];
constexpr int kComputeTimers[] = {3, 4};  // forward- and backward-compute: the straggler measure

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Which timer an event adds to (-1: none).
int timer_of(const pipeline_parallel::TraceEvent& e) {
  if (e.category == "forward") return 3;
  if (e.category == "backward" || e.category == "weight") return 4;  // W: zero-bubble
  if (e.category == "recv") return starts_with(e.name, "recv-fwd") ? 5 : 6;
  if (e.category == "send") return starts_with(e.name, "send-fwd") ? 7 : 8;
  if (e.category == "wait" && e.name == "wait for sends") return 9;
  if (e.category == "optimizer" && e.name == "optimizer step") return 1;
  if (e.category == "data-parallel" && e.name == "wait for gradient reduction") return 2;
  return -1;
}

// The collective kinds timed per group, in CollectiveCounters' order.
constexpr const char* kCollectiveKinds[] = {
    "all-reduce", "all-gather", "reduce-scatter", "broadcast", "send", "recv", "all-to-all"};
constexpr int kKinds = sizeof kCollectiveKinds / sizeof kCollectiveKinds[0];
// expert: the MoE dispatcher's all-to-all (expert-all-to-all) and its counts.
// context: the cp group (the ring's send and recv, a2a's all-to-all, the loss's all-reduce).
constexpr const char* kGroups[] = {"tensor", "data", "pipeline", "expert", "context"};
constexpr int kContextGroup = 4;
constexpr int kGroupCount = sizeof kGroups / sizeof kGroups[0];
// The ring attention's own account (comm::CollectiveCounters::Overlap), after the groups.
constexpr const char* kRingTimers[] = {"cp-ring-compute", "cp-ring-wait", "cp-ring-transfer"};
constexpr int kRingTimerCount = 3;
constexpr int kRingFirst = kTimerCount + kGroupCount * kKinds;  // cp-ring-compute's index

// One step's ring times (ms): compute with a transfer in flight, the wait after it, and the
// time those transfers would take alone (their bytes at the per-byte time of the step's
// transfers that had nothing to hide behind). 0 when the step ran no ring.
void ring_step_ms(const comm::CollectiveCounters::Overlap& o, double ms[kRingTimerCount]) {
  ms[0] = o.compute_seconds * 1e3, ms[1] = o.waited_seconds * 1e3;
  ms[2] = o.alone_bytes > 0 ? o.overlapped_bytes * (o.alone_seconds / o.alone_bytes) * 1e3 : 0;
}

const comm::CollectiveCounters::Entry& entry_of(const comm::CollectiveCounters& k, int kind) {
  const comm::CollectiveCounters::Entry* entries[kKinds] = {
      &k.all_reduce, &k.all_gather, &k.reduce_scatter, &k.broadcast,
      &k.send,       &k.recv,       &k.all_to_all};
  return *entries[kind];
}

}  // namespace

IntervalTimers::IntervalTimers(int level, double straggler_threshold)
    : level_(level), threshold_(straggler_threshold) {
  for (const TimerSpec& t : kTimers) names_.push_back(t.name), levels_.push_back(t.level);
  for (const char* group : kGroups)
    for (const char* kind : kCollectiveKinds)
      names_.push_back(std::string(group) + "-" + kind), levels_.push_back(2);
  for (const char* ring : kRingTimers) names_.push_back(ring), levels_.push_back(2);
  sums_ms_.assign(names_.size(), 0.0);
}

void IntervalTimers::add_step(const std::vector<pipeline_parallel::TraceEvent>& events,
                              const GroupCollectives& groups) {
  for (size_t g = 0; g < std::min(groups.size(), std::size(kGroups)); ++g)
    for (int kind = 0; kind < kKinds; ++kind)
      sums_ms_[kTimerCount + g * kKinds + kind] += entry_of(groups[g].second, kind).seconds * 1e3;
  if ((int)groups.size() > kContextGroup) {
    double ring[kRingTimerCount];
    ring_step_ms(groups[kContextGroup].second.overlap, ring);
    for (int t = 0; t < kRingTimerCount; ++t) sums_ms_[kRingFirst + t] += ring[t];
  }
  double begin = -1, end = -1;  // the schedule: from "train step" to the end of the send wait
  double step[kTimerCount] = {};
  for (const auto& e : events) {
    const int t = timer_of(e);
    if (t >= 0) step[t] += e.duration_us / 1e3;
    if (e.category == "step") begin = e.start_us;
    if (t == 9) end = e.start_us + e.duration_us;
  }
  if (begin >= 0 && end >= begin) step[0] = (end - begin) / 1e3;
  step[1] -= step[2];  // as Megatron's, the optimizer timer leaves out the gradient sync
  for (int t = 0; t < kTimerCount; ++t) sums_ms_[t] += step[t];
  ++steps_;
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Ranks of one pipeline stage do the same work (tensor and data parallelism split it
// evenly); stages differ (the first embeds, the last forms logits), so each rank is held
// against the median of its own stage.
StragglerReport find_straggler(const std::vector<double>& compute, const std::vector<int>& stage,
                               double threshold) {
  StragglerReport worst;
  double worst_ratio = 1 + threshold;
  for (size_t r = 0; r < compute.size(); ++r) {
    std::vector<double> peers;
    for (size_t q = 0; q < compute.size(); ++q)
      if (stage[q] == stage[r]) peers.push_back(compute[q]);
    if (peers.size() < 2) continue;
    const double median = median_of(peers);
    if (median > 0 && compute[r] / median > worst_ratio)
      worst_ratio = compute[r] / median, worst = {true, (int)r, compute[r], median};
  }
  return worst;
}

// Each rank's overlap fraction 1 - waited / transfer time, clamped to [0, 1] (a wait can
// exceed the transfer estimate: it also holds the skew between neighbours); min and max over
// the ranks that ran the ring.
template <typename At>
RingOverlap ring_overlap(int ranks, At at) {
  RingOverlap o;
  for (int r = 0; r < ranks; ++r) {
    const double waited = at(r, 1), transfer = at(r, 2);
    if (transfer <= 0) continue;
    const double f = std::clamp(1 - waited / transfer, 0.0, 1.0);
    o.min = o.found ? std::min(o.min, f) : f;
    o.max = o.found ? std::max(o.max, f) : f;
    o.found = true;
  }
  return o;
}

}  // namespace

TimerReport IntervalTimers::reduce(comm::Communicator& world, int pipeline_stage) {
  const int timers = (int)names_.size();
  const int n = world.size(), width = timers + 1;  // the timers and the rank's stage
  std::vector<float> mine(width), all((size_t)width * n);
  for (int t = 0; t < timers; ++t) mine[t] = (float)(sums_ms_[t] / std::max(1, steps_));
  mine[timers] = (float)pipeline_stage;
  world.all_gather(mine.data(), all.data(), width);
  std::fill(sums_ms_.begin(), sums_ms_.end(), 0.0);
  steps_ = 0;
  auto at = [&](int rank, int t) { return (double)all[(size_t)rank * width + t]; };
  TimerReport report;
  for (int t = 0; t < timers; ++t) {
    if (levels_[t] > level_) continue;
    TimerRow row{names_[t], at(0, t), at(0, t), 0};
    for (int r = 1; r < n; ++r) {
      row.min_ms = std::min(row.min_ms, at(r, t));
      if (at(r, t) > row.max_ms) row.max_ms = at(r, t), row.max_rank = r;
    }
    if (row.max_ms > 0) report.rows.push_back(row);
  }
  std::vector<double> compute(n, 0.0);
  std::vector<int> stage(n);
  for (int r = 0; r < n; ++r) {
    for (int t : kComputeTimers) compute[r] += at(r, t);
    stage[r] = (int)at(r, timers);
  }
  report.straggler = find_straggler(compute, stage, threshold_);
  if (level_ >= 2)  // the ring's timers are level 2's
    report.ring_overlap = ring_overlap(n, [&](int r, int t) { return at(r, kRingFirst + t); });
  return report;
}

std::string format_timers(const TimerReport& r, const std::vector<std::string>& hosts) {
  std::string out;
  char buf[256];
  auto where = [&](int rank) {
    return rank < (int)hosts.size() ? " on " + hosts[rank] : std::string();
  };
  if (!r.rows.empty()) out += "(min, max) time across ranks (ms):\n";
  for (const TimerRow& row : r.rows) {
    std::snprintf(buf, sizeof buf, "    %-22s: (%.2f, %.2f) max on rank %d\n",
                  (row.name + " ").c_str(), row.min_ms, row.max_ms, row.max_rank);
    out += buf;
  }
  if (r.ring_overlap.found) {
    std::snprintf(buf, sizeof buf,
                  "    %-22s: (%.3f, %.3f) = 1 - cp-ring-wait / cp-ring-transfer\n",
                  "cp-ring-overlap ", r.ring_overlap.min, r.ring_overlap.max);
    out += buf;
  }
  if (r.straggler.found) {
    std::snprintf(buf, sizeof buf,
                  "straggler: rank %d%s computes %.2f ms per iteration, %.0f%% over the median "
                  "of its pipeline stage's ranks (%.2f ms)\n",
                  r.straggler.rank, where(r.straggler.rank).c_str(), r.straggler.ms,
                  100 * (r.straggler.ms / r.straggler.median_ms - 1), r.straggler.median_ms);
    out += buf;
  }
  return out;
}

}  // namespace trident::train
