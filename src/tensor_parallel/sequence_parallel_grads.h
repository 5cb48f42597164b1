#pragma once
// Sequence parallelism's part of Megatron's finalize_model_grads
// (_allreduce_non_tensor_model_parallel_grads): each tensor-parallel rank's LayerNorms
// saw only its 1/t of the rows, so their weight and bias gradients are partial sums,
// completed here by one all-reduce over the tensor group before the optimizer step.
//
// The other replicated parameters are arranged to need none: the row-parallel biases
// (attention projection, fc2) take their gradient from the all-gathered d(output), and the
// position embedding from the all-gathered d(embedding output), both of all rows, which
// backward gathers anyway for the weight gradients and the word-embedding lookup; and an
// MoE layer's router, which every tensor rank runs on all the (all-gathered) rows
// (model/moe_layer.h), so its gradient is complete on each — except with whole experts
// (--expert-tensor-parallel-size 1 < t), where each rank routes only its own rows and the
// router weight's gradient is a partial sum like the LayerNorms'.
#include "comm/communicator.h"
#include "parameters/parameters.h"

namespace trident::tensor_parallel {

// Whether a parameter's gradient is partial under sequence parallelism.
bool is_sequence_parallel_param(const ParamSpec& spec);
// An MoE layer's router weight (partial when each tensor rank routes its own rows).
bool is_router_param(const ParamSpec& spec);

// Grouped-query attention with t > G: each group's key/value projection is replicated on
// t / G ranks, each of which computes every group's keys and values but uses only its own
// heads' — its weight (and bias) gradient is a partial sum too (Megatron's replicated KV
// heads), with or without sequence parallelism.
bool is_replicated_kv_param(const ParamSpec& spec);

// --qk-layernorm's q and k norm weights: replicated, but each rank normalises only its own
// heads (or its groups'), so its gradient is a partial sum over the tensor group, with or
// without sequence parallelism.
bool is_qk_norm_param(const ParamSpec& spec);

// Sums the partial gradients over the tensor group, in place, with one all-reduce: the
// norm weights and biases (every layer's two and the final one) under sequence
// parallelism, replicated key/value projections and the q / k norms, and with
// routers_see_own_rows the MoE routers' weights. The layouts of a tensor group's ranks match
// spec for spec, so the packed buffers line up.
void allreduce_sequence_parallel_grads(Parameters& params, comm::Communicator& tp,
                                       bool sequence_parallel, bool routers_see_own_rows = false);

}  // namespace trident::tensor_parallel
