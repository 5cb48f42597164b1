#pragma once
// What the data-parallel ranks shard, by Megatron-FSDP's names (--data-parallel-sharding-
// strategy): no_shard keeps everything on every rank; optim shards the Adam moments (ZeRO-1,
// Megatron's --use-distributed-optimizer); optim_grads the reduced gradients as well
// (ZeRO-2); optim_grads_params the weights too (ZeRO-3 / FSDP).
#include <optional>
#include <string_view>

namespace trident::data_parallel {

enum class ShardingStrategy { kNoShard, kOptim, kOptimGrads, kOptimGradsParams };

std::optional<ShardingStrategy> parse_sharding_strategy(std::string_view name);
const char* sharding_strategy_name(ShardingStrategy s);
// "ZeRO-1" and so on, for plans and reports.
const char* zero_stage_name(ShardingStrategy s);

inline bool shards_optimizer(ShardingStrategy s) {
  return s != ShardingStrategy::kNoShard;
}
inline bool shards_gradients(ShardingStrategy s) {
  return s == ShardingStrategy::kOptimGrads || s == ShardingStrategy::kOptimGradsParams;
}
inline bool shards_parameters(ShardingStrategy s) {
  return s == ShardingStrategy::kOptimGradsParams;
}

}  // namespace trident::data_parallel
