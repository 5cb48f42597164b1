#pragma once
// Before anything large is allocated: the memory plan of the fullest pipeline stage
// (engine/rank_memory.h, what build_rank_model will allocate) against the memory of the
// node with the least for each of its ranks. A run that cannot fit is refused with the
// remedies that would (engine/memory_fit.h), instead of ending in std::bad_alloc or the
// kernel's OOM killer halfway through allocation.
#include <ostream>
#include <stdexcept>

#include "engine/rank_context.h"
#include "train/training_config.h"

namespace trident::train {

// Thrown on every rank alike (each decides from the same gathered figures), so the command
// reports it once and every rank exits 2 without aborting the others.
struct MemoryRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a rank keeps for the process itself, outside the plan: the code and its libraries
// (oneDNN, Open MPI), the threads' stacks, the data set's indices. A gpt-tiny run peaks at
// 757 MiB resident against its 722 MiB plan (35 MiB beyond it; the planner's calibration
// finds 20 MiB before any buffer); 256 MiB leaves room for Open MPI's shared-memory
// transport with more ranks, oneDNN's primitive cache and a large corpus's indices.
constexpr long kProcessBytes = 256L << 20;

// x86-64's user address space (47 bits): no process holds more. A model whose closed-form
// lower bound (engine/memory_bound.h) exceeds it is refused whatever the node has, also under
// --no-memory-check; below it, the exact plan's byte counts stay far from a long's limit.
constexpr double kAddressableBytes = (double)(1L << 47);

// Refuses (MemoryRefused) a model no process can hold, from the config alone: no
// communication, no allocation, every rank alike. Before anything prints the model's
// parameter count, whose long would overflow.
void refuse_unaddressable(const TrainingConfig& c);

// Prints the check (and, when refusing, the fullest stage's plan) on `log`; throws
// MemoryRefused when the plan does not fit. Collective over the world group. When even the
// closed-form bound of the most any remedy changes does not fit, refuses from the bound
// without the exact plan, whose cost grows with the layers (10^5 layers: seconds).
void check_memory(const TrainingConfig& c, const engine::RankContext& rank, std::ostream& log);

}  // namespace trident::train
