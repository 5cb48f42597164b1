#include "train/memory_check.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/node_memory.h"
#include "engine/memory_bound.h"
#include "engine/memory_fit.h"
#include "engine/rank_memory.h"

namespace trident::train {

namespace {

// The memory each rank of the tightest node may hold: the node's available memory split
// between its ranks, less what each process holds outside its plan.
struct RankBudget {
  double node_available = -1;  // bytes; < 0: unknown
  int node_ranks = 1;
  std::string node;  // "" on one node
  double per_rank() const { return std::max(0.0, node_available / node_ranks - kProcessBytes); }
};

int ranks_on_node_of(const engine::RankContext& rank, int world_rank) {
  if ((int)rank.nodes.size() <= world_rank) return 1;
  return (int)std::count(rank.nodes.begin(), rank.nodes.end(), rank.nodes[world_rank]);
}

// Every rank reads its own node and the figures are summed over the world, so all ranks
// pick the same tightest node and so decide alike.
RankBudget tightest_budget(const engine::RankContext& rank) {
  comm::Communicator& world = *rank.groups->world;
  std::vector<double> available(world.size(), 0.0);
  available[world.rank()] = (double)node_available_memory().available_bytes;
  world.all_reduce(available.data(), (long)available.size(), comm::ReduceOp::kSum);
  const bool one_node = std::all_of(rank.nodes.begin(), rank.nodes.end(),
                                    [&](const std::string& n) { return n == rank.nodes[0]; });
  RankBudget tightest;
  for (int r = 0; r < world.size(); ++r) {
    const RankBudget b{available[r], ranks_on_node_of(rank, r),
                       one_node || (int)rank.nodes.size() <= r ? "" : rank.nodes[r]};
    if (b.node_available < 0) return b;  // one node unknown: nothing to check against
    if (r == 0 || b.per_rank() < tightest.per_rank()) tightest = b;
  }
  return tightest;
}

std::string where(const RankBudget& b) {
  return std::to_string(b.node_ranks) + (b.node_ranks > 1 ? " ranks" : " rank") + " on " +
         (b.node.empty() ? std::string("this node") : "node " + b.node);
}

void print_check(const engine::FullestStage& fullest, int stages, const RankBudget& b,
                 std::ostream& log) {
  log << "memory check: needs " << format_bytes((double)fullest.plan.total_bytes())
      << " per rank (";
  if (stages > 1)
    log << "pipeline stage " << fullest.stage << " of " << stages << ", the fullest: ";
  std::string groups;
  for (const char* group :
       {"parameters", "optimizer", "activations", "scratch", "communication", "checkpoint"})
    if (const long bytes = fullest.plan.group_bytes(group); bytes > 0)
      groups +=
          (groups.empty() ? "" : ", ") + std::string(group) + " " + format_bytes((double)bytes);
  log << groups;
  log << "); " << format_bytes(b.per_rank()) << " available per rank ("
      << format_bytes(b.node_available) << " available for " << where(b) << ", less "
      << format_bytes((double)kProcessBytes) << " each for the process itself)";
}

void print_plan(const engine::FullestStage& fullest, std::ostream& log) {
  const std::string stage = "pipeline stage " + std::to_string(fullest.stage);
  for (size_t j = 0; j < fullest.plan.chunks.size(); ++j)
    fullest.plan.chunks[j].print(
        log, "memory plan of " + stage + ", chunk " + std::to_string(j) + " (not allocated)");
  if (!fullest.plan.buffers.buffers().empty())
    fullest.plan.buffers.print(log, "memory plan of " + stage + ", besides the chunks");
}

// The remedies plan dozens of layouts, each in time linear in the layers: 10^8 layers took
// 11 s. Beyond this many only the refusal is given (the one plan, a fraction of a second).
constexpr int kMostLayersSearched = 1 << 20;

// The model's shape as its flags give it, and its parameters.
std::string shape_of(const TrainingConfig& c, const engine::MemoryBound& b) {
  const ModelConfig& m = c.model;
  char parameters[64];
  std::snprintf(parameters, sizeof parameters, "%.3g", b.parameters);
  return "--num-layers " + std::to_string(m.num_layers) + " --hidden-size " +
         std::to_string(m.hidden_size) + " --seq-length " + std::to_string(m.seq_length) +
         " --micro-batch-size " + std::to_string(c.micro_batch_size) + ", vocabulary padded to " +
         std::to_string(m.padded_vocab_size(c.tensor_model_parallel_size)) + ": " + parameters +
         " parameters";
}

std::string refusal(const TrainingConfig& c, const engine::FullestStage& fullest,
                    const RankBudget& b) {
  std::ostringstream m;
  m << "the model (" << shape_of(c, engine::memory_lower_bound(c.rank_layout())) << ") needs "
    << format_bytes((double)fullest.plan.total_bytes()) << " per rank, "
    << format_bytes(b.per_rank()) << " available (" << where(b) << ")";
  if (c.model.num_layers > kMostLayersSearched) {
    m << "; what would fit is not searched beyond " << kMostLayersSearched
      << " layers (each layout's plan costs time in proportion): fewer layers (--num-layers)"
      << "\n(--no-memory-check skips this check)";
    return m.str();
  }
  const std::vector<engine::MemoryRemedy> remedies =
      engine::memory_remedies(c.rank_model_options(), (long)b.per_rank());
  if (remedies.empty())
    m << "; nothing tried fits (--bf16, full recomputation, --micro-batch-size 1, up to one "
         "pipeline stage per layer, 1024 times the data-parallel ranks with "
         "--use-distributed-optimizer, up to 1024 times the context-parallel ranks): a smaller "
         "model, or nodes with more memory";
  else
    m << "; what would fit, sized by the same memory plan:";
  for (const engine::MemoryRemedy& r : remedies) m << "\n  " << r.describe(c.world_size);
  m << "\n(--no-memory-check skips this check)";
  return m.str();
}

// What the bound counts, for the refusals made from it.
std::string bound_words(const engine::MemoryBound& b) {
  char per[32];
  std::snprintf(per, sizeof per, "%.3g", b.bytes_per_parameter);
  return "at least " + format_bytes(b.total_bytes()) + " per rank (" +
         format_bytes(b.parameter_bytes()) + " for fp32 weights, gradients and Adam moments, " +
         per + " bytes per parameter of the fullest rank, and " + format_bytes(b.activation_bytes) +
         " for the layers' kept inputs)";
}

// Nothing memory_remedies tries can fit (its most changed layout's bound does not): refused
// from the bound, without the exact plans.
std::string refusal_from_bound(const TrainingConfig& c, const engine::MemoryBound& bound,
                               const engine::MemoryBound& best, const RankBudget& b) {
  return "the model is too large for these nodes: " + shape_of(c, bound) + ", need " +
         bound_words(bound) + "; " + format_bytes(b.per_rank()) + " available (" + where(b) +
         "). Nothing tried fits: one layer per pipeline stage with --use-distributed-optimizer " +
         "over 1024 times the data-parallel ranks, --micro-batch-size 1 and full recomputation " +
         "still need " + bound_words(best) + ". A smaller model (--num-layers, --hidden-size), " +
         "or nodes with more memory\n(--no-memory-check skips this check)";
}

}  // namespace

void refuse_unaddressable(const TrainingConfig& c) {
  const engine::MemoryBound bound = engine::memory_lower_bound(c.rank_layout());
  if (bound.total_bytes() <= kAddressableBytes) return;
  throw MemoryRefused("the model is too large: " + shape_of(c, bound) + ", need " +
                      bound_words(bound) + ", more than any process can address (" +
                      format_bytes(kAddressableBytes) +
                      "). A smaller model (--num-layers, --hidden-size)");
}

void check_memory(const TrainingConfig& c, const engine::RankContext& rank, std::ostream& log) {
  if (!c.memory_check) {
    log << "memory check: off (--no-memory-check)\n";
    return;
  }
  const RankBudget budget = tightest_budget(rank);
  if (budget.node_available < 0) {
    log << "memory check: skipped, the node's available memory cannot be read\n";
    return;
  }
  const engine::RankLayout layout = c.rank_layout();
  const engine::MemoryBound bound = engine::memory_lower_bound(layout);
  const engine::MemoryBound best = engine::memory_lower_bound(engine::most_remedied(layout));
  if (best.total_bytes() > budget.per_rank()) {
    log << "memory check: needs " << bound_words(bound) << "; " << format_bytes(budget.per_rank())
        << " available per rank: does not fit\n";
    throw MemoryRefused(rank.world_rank == 0 ? refusal_from_bound(c, bound, best, budget)
                                             : "does not fit");
  }
  const engine::FullestStage fullest = engine::fullest_stage(c.rank_model_options());
  print_check(fullest, c.pipeline_model_parallel_size, budget, log);
  if ((double)fullest.plan.total_bytes() <= budget.per_rank()) {
    log << ": fits\n";
    return;
  }
  log << ": does not fit\n";
  print_plan(fullest, log);
  // Only rank 0 reports; the others need the decision, not the remedies.
  throw MemoryRefused(rank.world_rank == 0 ? refusal(c, fullest, budget) : "does not fit");
}

}  // namespace trident::train
