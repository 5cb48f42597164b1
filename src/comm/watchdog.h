#pragma once
// Hang diagnostics (--distributed-timeout-minutes). With a watchdog, every wait on other
// ranks polls its requests against a deadline instead of blocking in MPI. A wait that
// outlives the deadline asks every rank what it is doing, over a communicator of its own,
// prints the diagnosis (hang_report.h) and ends the job with MPI_Abort.
//
// Ranks answer while they wait, since they poll anyway; no thread and no one-sided access is
// needed, and none would help: a stopped rank, one computing without end and one behind a cut
// link cannot answer by any means. They are exactly the ranks that stay silent, and the
// report names them.
#include <mpi.h>

#include <chrono>
#include <list>
#include <string>
#include <vector>

#include "comm/hang_report.h"

namespace trident::comm {

class Watchdog {
 public:
  // Collective over MPI_COMM_WORLD (duplicates it). label prefixes the report
  // ("trident train"); nodes: every rank's host, by world rank.
  Watchdog(double timeout_s, std::string label, std::vector<std::string> nodes);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_s() const { return timeout_s_; }
  // Every rank registers the same groups in the same order; returns the group's index.
  int add_group(std::string name, std::vector<int> world_ranks);
  // A collective starts on the group: its number there.
  int next_sequence(int group) { return ++activity_.issued[group]; }
  void set_iteration(long iteration) { activity_.iteration = (int)iteration; }
  // Waits for all n requests. A deadline passed: reports and aborts the job (never returns).
  void wait(MPI_Request* requests, int n, const PendingOp& op);

 private:
  using Clock = std::chrono::steady_clock;
  struct Answer {
    Activity activity;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  void serve_queries();
  std::vector<std::optional<Activity>> ask_every_rank();
  [[noreturn]] void report_hang();
  void note_waited();
  bool another_rank_reports() const;
  void yield_to_reporter();

  double timeout_s_;
  std::string label_;
  MPI_Comm channel_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  Activity activity_;
  Clock::time_point wait_started_;
  std::vector<GroupInfo> groups_;
  std::vector<std::string> nodes_;
  std::list<Answer> answers_;  // sends in flight; a list keeps their buffers in place
  // The lowest rank that asked lately, and when: a rank that asks is reporting a hang, and one
  // report is enough.
  int last_asker_ = -1;
  Clock::time_point last_asked_;
};

}  // namespace trident::comm
