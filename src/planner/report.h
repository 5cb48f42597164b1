#pragma once
// What `trident plan` prints: the ranked table with where the time goes, the best plan's
// rank-to-node mapping, the training-time estimates, and the --json form.
#include <iosfwd>
#include <string>
#include <vector>

#include "planner/iteration_model.h"

namespace trident::planner {

void print_plan_table(std::ostream& os, const std::vector<Prediction>& plans, size_t top);

// The best plan's time and memory, term by term.
void print_breakdown(std::ostream& os, const Prediction& p);

// Megatron's rank order (tensor fastest, then data, then pipeline) cut into nodes: what
// each of the first nodes holds, and which groups cross nodes.
void print_rank_mapping(std::ostream& os, const Layout& l, const Cluster& c);

// Days to train `tokens`: the paper's 8 T P / (n X) with this plan's X, and the model's own
// (iterations x predicted time per iteration).
void print_training_time(std::ostream& os, const Prediction& best, const Workload& w,
                         double tokens);

// {"plans": [{"tensor", "pipeline", "data", "micro_batch", "virtual", "recompute",
//  "distributed_optimizer", "data_parallel_sharding_strategy", "sequence_parallel",
//  "pipeline_schedule", "time_per_iteration_s", "tflops_per_device",
//  "memory_per_device_gib", "bubble", "data_parallel_bytes"}, ...]}
// data_parallel_bytes: what each rank sends per iteration in the data-parallel collectives.
std::string plans_json(const std::vector<Prediction>& plans, size_t top);

}  // namespace trident::planner
