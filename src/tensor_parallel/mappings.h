#pragma once
// The conjugate operators of Megatron-LM (Shoeybi et al. 2019, section 3):
//   f: identity in forward, all-reduce in backward (before a column-parallel layer);
//   g: all-reduce in forward, identity in backward (after a row-parallel layer).
// With one rank both are no-ops; the model calls them so the collectives are explicit.
#include "comm/communicator.h"

namespace trident::tensor_parallel {

inline void copy_to_region_backward(comm::Communicator& tp, float* grad, long n) {  // f
  tp.all_reduce(grad, n, comm::ReduceOp::kSum);
}

inline void reduce_from_region_forward(comm::Communicator& tp, float* out, long n) {  // g
  tp.all_reduce(out, n, comm::ReduceOp::kSum);
}

}  // namespace trident::tensor_parallel
