#include "data_parallel/sharding_strategy.h"

namespace trident::data_parallel {

namespace {

struct Named {
  ShardingStrategy strategy;
  const char* name;
  const char* zero;
};

constexpr Named kStrategies[] = {
    {ShardingStrategy::kNoShard, "no_shard", "no sharding"},
    {ShardingStrategy::kOptim, "optim", "ZeRO-1"},
    {ShardingStrategy::kOptimGrads, "optim_grads", "ZeRO-2"},
    {ShardingStrategy::kOptimGradsParams, "optim_grads_params", "ZeRO-3"},
};

}  // namespace

std::optional<ShardingStrategy> parse_sharding_strategy(std::string_view name) {
  for (const Named& n : kStrategies)
    if (name == n.name) return n.strategy;
  return std::nullopt;
}

const char* sharding_strategy_name(ShardingStrategy s) {
  for (const Named& n : kStrategies)
    if (n.strategy == s) return n.name;
  return "?";
}

const char* zero_stage_name(ShardingStrategy s) {
  for (const Named& n : kStrategies)
    if (n.strategy == s) return n.zero;
  return "?";
}

}  // namespace trident::data_parallel
