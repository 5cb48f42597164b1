#include "expert_parallel/dispatcher.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/moe_permute.h"

namespace trident::expert_parallel {

long DispatchPlan::sent() const {
  return std::accumulate(send_rows.begin(), send_rows.end(), 0L);
}

long DispatchPlan::received() const {
  return std::accumulate(recv_rows.begin(), recv_rows.end(), 0L);
}

namespace {

// Counts travel as floats, exact below 2^24 rows.
constexpr long kMaxExactCount = 1L << 24;

void check_split(int ranks, int experts) {
  if (ranks < 1 || experts % ranks)
    throw std::invalid_argument("expert dispatch: " + std::to_string(experts) +
                                " experts do not split over " + std::to_string(ranks) + " ranks");
}

}  // namespace

DispatchPlan replan_dispatch(int ranks, const long* rows_per_expert, int experts,
                             const long* recv_counts) {
  check_split(ranks, experts);
  DispatchPlan p;
  p.ranks = ranks;
  p.local_experts = experts / ranks;
  const int local = p.local_experts;
  p.send_rows.assign(ranks, 0);
  p.recv_rows.assign(ranks, 0);
  p.recv_counts.assign(recv_counts, recv_counts + experts);
  p.expert_offsets.assign(local + 1, 0);
  for (int e = 0; e < experts; ++e) p.send_rows[e / local] += rows_per_expert[e];
  for (int q = 0; q < ranks; ++q)
    for (int e = 0; e < local; ++e) {
      p.recv_rows[q] += recv_counts[q * local + e];
      p.expert_offsets[e + 1] += recv_counts[q * local + e];
    }
  for (int e = 0; e < local; ++e) p.expert_offsets[e + 1] += p.expert_offsets[e];
  return p;
}

DispatchPlan plan_dispatch(comm::Communicator& expert, const long* rows_per_expert, int experts) {
  const int ranks = expert.size();
  check_split(ranks, experts);
  // Peer q gets this rank's counts for q's experts: E/EP of the E, in order.
  std::vector<float> mine(experts), theirs(experts);
  for (int e = 0; e < experts; ++e) {
    if (rows_per_expert[e] >= kMaxExactCount)
      throw std::length_error("expert dispatch: 2^24 rows or more for one expert");
    mine[e] = (float)rows_per_expert[e];
  }
  const std::vector<long> blocks(ranks, experts / ranks);
  expert.all_to_all_v(mine.data(), blocks, theirs.data(), blocks);
  std::vector<long> recv_counts(experts);
  for (int i = 0; i < experts; ++i) recv_counts[i] = (long)theirs[i];
  return replan_dispatch(ranks, rows_per_expert, experts, recv_counts.data());
}

namespace {
std::vector<long> times(const std::vector<long>& rows, int width) {
  std::vector<long> floats(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) floats[i] = rows[i] * width;
  return floats;
}
}  // namespace

void dispatch(comm::Communicator& expert, const DispatchPlan& plan, const float* rows, int width,
              float* staging, float* out) {
  if (plan.ranks == 1) {  // nothing moves, one source: the order is already expert-major
    if (out != rows) std::copy_n(rows, plan.sent() * width, out);
    return;
  }
  expert.all_to_all_v(rows, times(plan.send_rows, width), staging, times(plan.recv_rows, width));
  kernels::sort_chunks_by_expert(staging, plan.recv_counts.data(), plan.ranks, plan.local_experts,
                                 width, out);
}

void combine(comm::Communicator& expert, const DispatchPlan& plan, const float* rows, int width,
             float* staging, float* out) {
  if (plan.ranks == 1) {
    if (out != rows) std::copy_n(rows, plan.sent() * width, out);
    return;
  }
  kernels::unsort_chunks_by_expert(rows, plan.recv_counts.data(), plan.ranks, plan.local_experts,
                                   width, staging);
  expert.all_to_all_v(staging, times(plan.recv_rows, width), out, times(plan.send_rows, width));
}

long max_received_rows(long tokens, int topk, int experts, int ranks) {
  return ranks * tokens * std::min(topk, experts / std::max(1, ranks));
}

}  // namespace trident::expert_parallel
