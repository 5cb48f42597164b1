#pragma once
// Megatron's alltoall token dispatcher (issue 32; /work/notes/moe_design.md A3): an MoE
// layer's expert-major rows go to the ranks of their experts and come back. At t > 1 the
// expert group holds the EP data-parallel ranks of one tensor rank; the tensor ranks of a
// data-parallel rank route the same rows (model/moe_layer.h) and each exchanges them with
// its peers of equal tensor rank, whose experts' shards it needs. Expert-parallel rank r of EP
// holds the E/EP experts [r E/EP, (r + 1) E/EP), so a rank's expert-major rows are already grouped
// by destination.
//   plan     the rows each rank sends every peer for each of the peer's experts, exchanged
//            once per micro-batch and layer (an all-to-all of E counts);
//   dispatch one all-to-all of the rows, which arrive [source][local expert], then the sort
//            to [local expert][source] so each local expert's rows are contiguous;
//   combine  the inverse: unsort, then the all-to-all back with the splits swapped.
// Combine is dispatch's backward and dispatch combine's (each is a permutation plus an
// exchange, whose adjoint is the reverse exchange). Rows come back to the rank and place
// they left from, so the unpermutation's summation order is the same under any EP.
#include <vector>

#include "comm/communicator.h"

namespace trident::expert_parallel {

struct DispatchPlan {
  int ranks = 1;                // EP
  int local_experts = 0;        // E / EP
  std::vector<long> send_rows;  // [EP]: rows this rank sends each peer
  std::vector<long> recv_rows;  // [EP]: rows it receives from each
  // [EP x E/EP]: rows source q sends for this rank's local expert e, at q * E/EP + e.
  std::vector<long> recv_counts;
  // [E/EP + 1]: local expert e's rows are [expert_offsets[e], expert_offsets[e + 1]) of the
  // sorted (expert-major) received rows.
  std::vector<long> expert_offsets;

  long sent() const;
  long received() const;
};

// This rank's plan from its rows per global expert (rows_per_expert[E], expert-major rows
// as kernels::MoePermutation orders them), exchanging counts over the expert group.
DispatchPlan plan_dispatch(comm::Communicator& expert, const long* rows_per_expert, int experts);

// The same plan again, without communication, from the rows per global expert and the
// received counts an earlier plan_dispatch exchanged (backward keeps those, not the plan).
DispatchPlan replan_dispatch(int ranks, const long* rows_per_expert, int experts,
                             const long* recv_counts);

// rows [sent(), width] (expert-major over all E) go to their experts' ranks; out
// [received(), width] gets this rank's experts' rows, expert-major. staging holds
// received() x width floats. The backward of combine.
void dispatch(comm::Communicator& expert, const DispatchPlan& plan, const float* rows, int width,
              float* staging, float* out);

// The inverse: rows [received(), width] in dispatch's output order go back; out
// [sent(), width] gets them where dispatch took them from. staging holds received() x width
// floats. The backward of dispatch.
void combine(comm::Communicator& expert, const DispatchPlan& plan, const float* rows, int width,
             float* staging, float* out);

// The most rows a rank can receive, dropless: each of EP sources sends at most
// min(k, E/EP) rows per token to one rank (a token picks k distinct experts).
long max_received_rows(long tokens, int topk, int experts, int ranks);

}  // namespace trident::expert_parallel
