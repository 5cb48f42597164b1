#pragma once
// A rank's memory plans as the tests compare them: the plans a built rank prints, in order,
// and each buffer as one line "group/name floats x copies".
#include <string>
#include <vector>

#include "engine/rank_model.h"

namespace trident::testing {

inline std::vector<const MemoryPlan*> printed_plans(const engine::RankModel& rank) {
  std::vector<const MemoryPlan*> plans;
  for (const auto& chunk : rank.chunks) plans.push_back(&chunk->memory_plan());
  plans.push_back(&rank.buffers);
  return plans;
}

inline std::vector<std::string> plan_entries(const std::vector<const MemoryPlan*>& plans) {
  std::vector<std::string> out;
  for (const MemoryPlan* plan : plans)
    for (const PlannedBuffer& b : plan->buffers())
      out.push_back(b.group + "/" + b.name + " " + std::to_string(b.floats) + " x " +
                    std::to_string(b.copies));
  return out;
}

}  // namespace trident::testing
