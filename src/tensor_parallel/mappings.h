#pragma once
// The conjugate operators of Megatron-LM (Shoeybi et al. 2019, section 3):
//   f: identity in forward, all-reduce in backward (before a column-parallel layer);
//   g: all-reduce in forward, identity in backward (after a row-parallel layer).
// With one rank both are no-ops; the model calls them so the collectives are explicit.
//
// Sequence parallelism (Korthikanti et al. 2022, section 4.2.2) replaces them by
//   g-bar = gather_from_sequence_parallel_region: all-gather of the row blocks in forward,
//           reduce-scatter in backward (before a column-parallel layer);
//   g-bar' = reduce_scatter_to_sequence_parallel_region: reduce-scatter in forward,
//           all-gather in backward (after a row-parallel layer).
// A "region" is [rows, cols] row-major; rank r holds rows [r * rows / t, (r + 1) * rows / t)
// (trident's rows are batch-major, so with micro-batch 1 this is Megatron's split of the
// sequence dimension). `local` counts the floats of one rank's block.
#include <stdexcept>

#include "comm/communicator.h"
#include "kernels/low_precision.h"

namespace trident::tensor_parallel {

inline void copy_to_region_backward(comm::Communicator& tp, float* grad, long n) {  // f
  tp.all_reduce(grad, n, comm::ReduceOp::kSum);
}

inline void reduce_from_region_forward(comm::Communicator& tp, float* out, long n) {  // g
  tp.all_reduce(out, n, comm::ReduceOp::kSum);
}

// full[rows, cols] = the row blocks of every rank, in rank order.
inline void gather_from_sequence_parallel_region(comm::Communicator& tp, const float* local,
                                                 float* full, long local_count) {
  tp.all_gather(local, full, local_count);
}

// reduce_scatter_to_sequence_parallel_region: this rank's block of the sum over ranks of
// `full` (a row-parallel layer's partial products), reduced in place into that block of
// `full`, which is returned. In place on purpose: Open MPI's MPI_Reduce_scatter_block (the
// out-of-place form) took 1.7 ms for a 4 x 256 x 768 buffer over 2 ranks here, 5x an
// all-reduce of it (0.34 ms); the in-place form (one reduce per block) took 0.29 ms.
inline float* reduce_scatter_to_sequence_parallel_region(comm::Communicator& tp, float* full,
                                                         long local_count) {
  tp.reduce_scatter(full, full, local_count);
  return full + (long)tp.rank() * local_count;
}

// gather_from_sequence_parallel_region's backward is the same reduce-scatter.
inline float* gather_from_sequence_parallel_region_backward(comm::Communicator& tp,
                                                            float* full_grad, long local_count) {
  return reduce_scatter_to_sequence_parallel_region(tp, full_grad, local_count);
}

// Its backward: every rank's gradient block, gathered.
inline void reduce_scatter_to_sequence_parallel_region_backward(comm::Communicator& tp,
                                                                const float* local_grad,
                                                                float* full_grad,
                                                                long local_count) {
  tp.all_gather(local_grad, full_grad, local_count);
}

// gather_from_sequence_parallel_region for an activation that only matrix products read,
// stored fp32 or (bf16 runs) as bf16 pairs packed two to a float: the blocks are gathered
// as floats, so a bf16 block must hold an even number of elements.
inline void gather_from_sequence_parallel_region(comm::Communicator& tp, kernels::GemmOperand local,
                                                 const kernels::GemmOperandBuffer& full,
                                                 long local_elements) {
  if (local.fp32)
    return gather_from_sequence_parallel_region(tp, local.fp32, full.fp32, local_elements);
  if (local_elements % 2 != 0)
    throw std::logic_error("sequence parallelism: a bf16 block of odd length");
  tp.all_gather(reinterpret_cast<const float*>(local.bf16), reinterpret_cast<float*>(full.bf16),
                local_elements / 2);
}

}  // namespace trident::tensor_parallel
