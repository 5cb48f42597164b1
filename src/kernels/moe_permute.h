#pragma once
// Token permutation for the experts (Megatron-Core's moe_utils.permute /
// unpermute): each token's row is copied once per chosen expert into expert-major order
// (expert 0's rows first, each expert's in ascending token order), so that every expert's
// rows are contiguous for the grouped GEMM; unpermute brings the experts' outputs back,
// each token's k rows weighted by its routing weights and summed. Both are written as
// gathers over the permutation (one writer per output row), so they are deterministic
// and their order does not depend on the number of threads.
#include <vector>

namespace trident::kernels {

struct MoePermutation {
  int tokens = 0, topk = 0, experts = 0;
  // Permuted row r holds token source[r]'s copy for slot j = slot[r] of its idx row (-1 and
  // -1 for a pad row).
  std::vector<int> source;
  std::vector<int> slot;
  // row_of[t * k + j]: the permuted row of token t's j-th expert (the inverse map); -1 for
  // a choice dropped at its expert's capacity.
  std::vector<long> row_of;
  // Expert e's rows are [offsets[e], offsets[e + 1]); offsets[E] = rows() (tokens * k
  // without dropping).
  std::vector<long> offsets;
  long rows() const { return (long)source.size(); }
  long rows_of(int e) const { return offsets[e + 1] - offsets[e]; }
};

// The permutation of a routing idx [tokens, k] (k distinct experts per token, each < E);
// with keep (moe_capacity_keep's mask), only the choices it keeps get a row. A dropped
// choice contributes nothing to unpermute's output and gets zero gradients. pad_to > 0
// (--moe-pad-expert-input-to-capacity): every expert gets exactly pad_to rows, its own
// followed by pad rows (source and slot -1) that permute fills with zeros and weight 0, so
// they add nothing to any output or gradient; no expert may have more than pad_to kept.
MoePermutation make_moe_permutation(const int* idx, int tokens, int topk, int experts,
                                    const unsigned char* keep = nullptr, long pad_to = 0);

// out [rows, h]: out[r] = x[source[r]], zeros for a pad row.
void moe_permute(const MoePermutation& p, const float* x, int h, float* out);
// Permute's backward: dx [tokens, h] = sum over each token's k rows of d_out (overwritten).
void moe_permute_backward(const MoePermutation& p, const float* d_out, int h, float* dx);

// The routing weights [tokens, k] in permuted order, out [rows] (for experts that scale
// their activations by the weight, as Megatron's do before fc2; 0 for a pad row), and its
// backward:
// d_weights[t, j] = d_out[row_of[t, j]] (overwritten).
void moe_permute_weights(const MoePermutation& p, const float* weights, float* out);
void moe_permute_weights_backward(const MoePermutation& p, const float* d_out, float* d_weights);

// y [tokens, h] = sum_j weights[t, j] * rows[row_of[t, j]] (overwritten); weights may be
// null (each weight 1: the experts have applied them already).
void moe_unpermute(const MoePermutation& p, const float* rows, const float* weights, int h,
                   float* y);
// Unpermute's backward: d_rows [rows, h] = weights[t, j] * dy[t] (overwritten) and, when
// d_weights is not null, d_weights[t, j] = <rows[row_of[t, j]], dy[t]> (overwritten).
void moe_unpermute_backward(const MoePermutation& p, const float* rows, const float* weights,
                            const float* dy, int h, float* d_rows, float* d_weights);

// Expert parallelism receives its rows as chunks ordered [source][local expert] (each
// source rank's rows, expert-major within it); the grouped GEMM wants [local expert][source]
// (Megatron's sort_chunks_by_idxs). counts[s * experts + e] is the rows source s sent for
// local expert e. out [sum of counts, h] gets the chunks in [e][s] order;
// unsort_chunks_by_expert is its inverse (and each is the other's backward).
void sort_chunks_by_expert(const float* in, const long* counts, int sources, int experts, int h,
                           float* out);
void unsort_chunks_by_expert(const float* in, const long* counts, int sources, int experts, int h,
                             float* out);

}  // namespace trident::kernels
