#pragma once
// The LoRA branch of one tensor-parallel linear (config/lora_config.h): y += s (x A^T) B^T
// with s = alpha / R. Its shards follow the base's (Megatron-Bridge's LoRA): beside a
// column-parallel linear A [R, in] is replicated and B [out / t, R] split by rows; beside a
// row-parallel one A [R, in / t] is split by columns and B [out, R] replicated. The
// row-parallel branch's x_i A_i^T B^T is a partial sum like the base's x_i W_i^T: it joins
// the base's output before that is all-reduced (or reduce-scattered under sequence
// parallelism), so it is reduced once with it.
//
// --lora-dropout p (PEFT's lora_dropout): y += s B A dropout(x), the mask keyed by
// (sample, layer, linear, element of the unsplit x) like the model's other dropout masks
// (kernels/dropout.h), so every layout drops the same elements; backward regenerates it.
// x's gradient through the branch is then masked too: dx += mask / (1 - p) * (du A).
// Off outside training (DropoutBatch::training()).
//
// u = x A^T [rows, R] is small: backward recomputes it rather than keeping it. It, du and
// (with dropout) the dropped x live in the chunk's scratch (model/chunk_memory.h "LoRA
// branch" row), handed to each call; a call without (generation, tests) allocates them.
// Gradients (all complete on every rank, so no tensor-parallel sum of them afterwards):
//   column: dB += s dy^T u; du = s dy B is a partial sum over the group: dx += du A joins the
//           base's partial dx (reduced with it), then du is all-reduced for dA += du^T x.
//   row:    u = sum over the group of x_i A_i^T (all-reduced); dB += s dy^T u; du = s dy B;
//           dA_i += du^T x_i; dx_i += du A_i.
#include "comm/communicator.h"
#include "kernels/dropout.h"
#include "kernels/low_precision.h"
#include "parameters/parameters.h"

namespace trident::tensor_parallel {

// A branch's working buffers: u and du [rows, R]; x [rows, in], the branch's fp32 input
// (dropped, or widened from bf16) and backward's (du A) before its mask, needed with
// --lora-dropout or bf16 inputs only; low, bf16 runs: bf16(s u) [rows, R] then bf16(s B)
// [out, R] for the products with a bf16 dy. Null: allocated by the call.
struct LoraScratch {
  float* u = nullptr;
  float* du = nullptr;
  float* x = nullptr;
  kernels::bf16_t* low = nullptr;
};

// What one call of a branch needs besides its operands: which samples its rows are
// (--lora-dropout; the default, none: evaluation and generation) and the scratch.
struct LoraCall {
  kernels::DropoutBatch dropout{};
  LoraScratch scratch{};
};

struct LoraBranch {
  ParamRef a{nullptr, nullptr, 0};  // [R, in of this rank]
  ParamRef b{nullptr, nullptr, 0};  // [out of this rank, R]
  int rank = 0;
  float scale = 0.f;
  // Where x's dropout mask comes from: the branch's site, and which columns of the unsplit
  // input this rank's x holds (a row-parallel linear's x is split by columns).
  kernels::DropoutColumns dropout{};

  bool active() const { return a.value != nullptr; }
  // y [rows, out] += s (dropout(x) A^T) B^T, x [rows, in] (this rank's in and out; rows: all
  // of the micro-batch's, dropout.first_row unused). x and dy come as the base's products
  // take them (bf16 in bf16 runs): the branch runs in fp32 on x widened, and its products
  // with a bf16 dy are bf16 products (fp32 sums) with s u and s B rounded to bf16.
  void forward(kernels::GemmOperand x, float* y, int rows, int in, int out,
               const LoraCall& call) const;
  // Beside a column-parallel linear: dA, dB accumulated; dx (this rank's partial, before the
  // group's sum) += du A. Collective over tp (the all-reduce of du).
  void backward_column(kernels::GemmOperand dy, kernels::GemmOperand x, float* dx, int rows, int in,
                       int out, comm::Communicator& tp, const LoraCall& call) const;
  // Beside a row-parallel linear: dy is every rank's (replicated); dx += du A_i.
  // Collective over tp (the all-reduce of u).
  void backward_row(kernels::GemmOperand dy, kernels::GemmOperand x, float* dx, int rows, int in,
                    int out, comm::Communicator& tp, const LoraCall& call) const;
};

}  // namespace trident::tensor_parallel
