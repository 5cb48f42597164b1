#pragma once
// The LoRA branch of one tensor-parallel linear (config/lora_config.h): y += s (x A^T) B^T
// with s = alpha / R. Its shards follow the base's (Megatron-Bridge's LoRA): beside a
// column-parallel linear A [R, in] is replicated and B [out / t, R] split by rows; beside a
// row-parallel one A [R, in / t] is split by columns and B [out, R] replicated. The
// row-parallel branch's x_i A_i^T B^T is a partial sum like the base's x_i W_i^T: it joins
// the base's output before that is all-reduced (or reduce-scattered under sequence
// parallelism), so it is reduced once with it.
//
// u = x A^T [rows, R] is small: backward recomputes it rather than keeping it.
// Gradients (all complete on every rank, so no tensor-parallel sum of them afterwards):
//   column: dB += s dy^T u; du = s dy B is a partial sum over the group: dx += du A joins the
//           base's partial dx (reduced with it), then du is all-reduced for dA += du^T x.
//   row:    u = sum over the group of x_i A_i^T (all-reduced); dB += s dy^T u; du = s dy B;
//           dA_i += du^T x_i; dx_i += du A_i.
#include "comm/communicator.h"
#include "parameters/parameters.h"

namespace trident::tensor_parallel {

struct LoraBranch {
  ParamRef a{nullptr, nullptr, 0};  // [R, in of this rank]
  ParamRef b{nullptr, nullptr, 0};  // [out of this rank, R]
  int rank = 0;
  float scale = 0.f;

  bool active() const { return a.value != nullptr; }
  // y [rows, out] += s (x A^T) B^T, x [rows, in] (this rank's in and out).
  void forward(const float* x, float* y, int rows, int in, int out) const;
  // Beside a column-parallel linear: dA, dB accumulated; dx (this rank's partial, before the
  // group's sum) += du A. Collective over tp (the all-reduce of du).
  void backward_column(const float* dy, const float* x, float* dx, int rows, int in, int out,
                       comm::Communicator& tp) const;
  // Beside a row-parallel linear: dy is every rank's (replicated); dx += du A_i.
  // Collective over tp (the all-reduce of u).
  void backward_row(const float* dy, const float* x, float* dx, int rows, int in, int out,
                    comm::Communicator& tp) const;
};

}  // namespace trident::tensor_parallel
