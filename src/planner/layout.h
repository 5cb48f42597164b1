#pragma once
// One candidate layout (t, c, p, d, b, v, recomputation, data-parallel sharding strategy,
// sequence parallelism, zero-bubble schedule, expert and context parallelism) and the
// workload it runs: the model's shape, the global batch and the training precision.
#include <string>

#include "config/model_config.h"
#include "context_parallel/context_parallel.h"
#include "data_parallel/sharding_strategy.h"
#include "kernels/low_precision.h"
#include "pipeline_parallel/schedules.h"

namespace trident::planner {

enum class Recompute { kNone, kSelective, kFull };
std::string recompute_name(Recompute r);  // none, selective, full
// "zero-1", "zero-2", "zero-3", or "" for no_shard: the short name plans show.
std::string sharding_short_name(data_parallel::ShardingStrategy s);

struct Layout {
  int tensor = 1;    // t
  int pipeline = 1;  // p
  int data = 1;      // d
  int micro_batch = 1;
  int virtual_stages = 1;  // v (model chunks per pipeline rank)
  Recompute recompute = Recompute::kNone;
  // --data-parallel-sharding-strategy: what the d replicas shard (ZeRO stage 0 to 3).
  data_parallel::ShardingStrategy sharding = data_parallel::ShardingStrategy::kNoShard;
  // Korthikanti et al. 2022: LayerNorms, dropout and the residual stream split over t.
  bool sequence_parallel = false;
  // Qi et al. 2023's ZB-H1 (--pipeline-schedule zb-h1): weight gradients deferred into the
  // bubble; p > 1 and v = 1 only.
  bool zero_bubble = false;
  // --expert-model-parallel-size (MoE): the experts split over EP ranks of each
  // data-parallel group (EP divides d and the experts).
  int expert = 1;
  // --context-parallel-size c: every sequence split over c ranks (Megatron's grid t-cp-dp-pp,
  // cp ranks adjacent after tp); the weights are replicated over d x c ranks, which reduce
  // the gradients and shard the distributed optimizer / ZeRO. --cp-comm-type: how attention
  // reaches the other ranks' keys and values.
  int context = 1;
  context_parallel::CpCommType cp_comm_type = context_parallel::CpCommType::kP2p;

  // The pipeline schedule this layout runs: zb-h1, interleaved 1F1B (v > 1) or 1F1B.
  pipeline_parallel::ScheduleKind schedule() const;
  // The Adam moments are sharded (ZeRO-1 and up: Megatron's distributed optimizer).
  bool distributed_optimizer() const { return data_parallel::shards_optimizer(sharding); }
  long devices() const { return (long)tensor * context * pipeline * data; }
  // The ranks holding the same weights: the data-parallel group with context parallel.
  int replicas() const { return data * context; }
  int microbatches(long global_batch) const {
    return (int)(global_batch / ((long)micro_batch * data));
  }
  int layers_per_chunk(int num_layers) const { return num_layers / (pipeline * virtual_stages); }
  // "t=8 c=2 p=4 d=2 b=1 v=1 recompute=full zero-1 sp zb-h1 ep=2" (c and a cp type other
  // than p2p only when c > 1)
  std::string describe() const;
};

struct Workload {
  ModelConfig model;
  long global_batch = 0;
  kernels::Precision precision = kernels::Precision::kBf16;
};

// Every rule the layout breaks for this workload (Megatron's divisibility rules and the
// schedule's), each naming the flag; empty when trident can run it.
std::vector<std::string> layout_violations(const Layout& layout, const Workload& w);

}  // namespace trident::planner
