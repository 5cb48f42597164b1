#pragma once
// Small matrix products for attention tiles (64 x 64 x head_dim), same contract as gemm():
// C = alpha * op(A) op(B) + beta * C. In fp32 it is gemm(). In bf16 both operands are
// rounded to bf16 while being packed, and multiplied with fp32 accumulation:
//   on avx512_bf16, A row-major and B in the pair-interleaved layout the dot-product
//   instruction reads, by a register-blocked kernel written here (a oneDNN call per 64 x 64
//   tile costs as much as the tile, and no Debian BLAS has bf16 small-matrix kernels);
//   elsewhere, the rounded values kept in fp32, by gemm() (tile_gemm.cpp says why).
// Packing is O(mk + kn) against O(mnk) multiply-adds.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/low_precision.h"

namespace trident::kernels {

// What a packed bf16 B operand is made of: on avx512_bf16, words of two bf16 values in the
// dot-product instruction's layout; elsewhere bf16 values kept in fp32 for sgemm.
#if defined(__AVX512BF16__)
using TileWord = std::uint32_t;
#else
using TileWord = float;
#endif

// bf16 B operands packed once and reused by many tile products (attention packs each
// key/value/query block once per head instead of once per tile). An entry is named by the
// source pointer and shape, so clear() whenever the source buffers are refilled.
class TileOperandCache {
 public:
  void clear();
  const TileWord* packed_b(Trans t, int k, int n, const float* b, int ldb);

 private:
  struct Entry {
    const float* b;
    Trans t;
    int k, n, ldb;
    std::size_t offset;
  };
  std::vector<Entry> entries_;
  std::vector<TileWord> words_;
};

void tile_gemm(Precision precision, Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
               const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc,
               TileOperandCache* b_cache = nullptr);

}  // namespace trident::kernels
