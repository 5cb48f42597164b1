#pragma once
// The layout search: every valid (t, c, p, d, b, v, recomputation, data-parallel sharding
// strategy, sequence parallelism, the zero-bubble schedule, MoE's expert parallelism) for n
// devices, with t inside a node (Megatron's and MT-NLG's placement), the ones over memory
// set aside, the rest ranked by predicted time per iteration. A dimension the user gave is
// fixed. Context parallelism (c > 1) is searched for sequences of kContextSearchSeq tokens
// and more, and for shorter ones only when no layout without it fits.
#include <optional>
#include <string>
#include <vector>

#include "planner/iteration_model.h"

namespace trident::planner {

// Below this many tokens per sample attention is a small part of a layer and c > 1 only
// adds traffic and shrinks every GEMM by c (Megatron-Core's guidance: context parallelism
// for 8K tokens and more); searching it there would multiply the layouts for nothing.
constexpr int kContextSearchSeq = 8192;

struct SearchOptions {
  long num_devices = 0;
  // 0 / nullopt: searched.
  int tensor = 0, pipeline = 0, micro_batch = 0;
  int layers_per_virtual_stage = 0;  // --num-layers-per-virtual-pipeline-stage: v = l / (p x it)
  std::optional<Recompute> recompute;
  // --data-parallel-sharding-strategy. Searched when d > 1: no_shard, optim, optim_grads and
  // optim_grads_params (sharded gradients never with zb-h1: layout_violations).
  std::optional<data_parallel::ShardingStrategy> sharding;
  std::optional<bool> sequence_parallel;  // searched over t > 1 when not given
  std::optional<bool> zero_bubble;        // zb-h1: searched over p > 1, v = 1 when not given
  int max_micro_batch = 64;
  int expert = 0;  // --expert-model-parallel-size (MoE): 0 searches the divisors of d
  // --context-parallel-size: 0 searches the divisors of n / t that the rules allow (c > 1
  // from kContextSearchSeq tokens, or when nothing fits without it); --cp-comm-type: fixed.
  int context = 0;
  context_parallel::CpCommType cp_comm_type = context_parallel::CpCommType::kP2p;
};

struct SearchResult {
  std::vector<Prediction> fitting;      // fastest first
  std::vector<Prediction> over_memory;  // smallest memory first
  long evaluated = 0;                   // valid layouts whose memory was modelled
  long timed = 0;                       // ... and whose time was modelled (the fitting ones)
};

SearchResult search_layouts(IterationModel& model, const SearchOptions& options);

// Why nothing fits, in one message naming the flags, with the closest thing that would
// (the smallest device count with a fitting layout, or the layout nearest to fitting).
std::string explain_no_fit(IterationModel& model, const SearchOptions& options,
                           const SearchResult& result);

// Rules the request breaks before any search (t beyond a node, heads not divisible by any
// t, fixed dimensions that do not divide the devices); empty when none.
std::vector<std::string> request_violations(const IterationModel& model,
                                            const SearchOptions& options);

}  // namespace trident::planner
