#pragma once
// Small matrix products for attention tiles (64 x 64 x head_dim), same contract as gemm():
// C = alpha * op(A) op(B) + beta * C. In fp32 it is gemm(). In bf16 both operands are
// rounded to bf16 while being packed (A row-major, B in the pair-interleaved layout the
// avx512_bf16 dot-product instruction reads) and multiplied with fp32 accumulation by a
// register-blocked kernel written here: a oneDNN call per 64 x 64 tile costs as much as
// the tile, and no Debian BLAS has bf16 small-matrix kernels. Packing is O(mk + kn) against
// O(mnk) multiply-adds.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/low_precision.h"

namespace trident::kernels {

// bf16 B operands packed once and reused by many tile products (attention packs each
// key/value/query block once per head instead of once per tile). An entry is named by the
// source pointer and shape, so clear() whenever the source buffers are refilled.
class TileOperandCache {
 public:
  void clear();
  const std::uint32_t* packed_b(Trans t, int k, int n, const float* b, int ldb);

 private:
  struct Entry {
    const float* b;
    Trans t;
    int k, n, ldb;
    std::size_t offset;
  };
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> words_;
};

void tile_gemm(Precision precision, Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
               const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc,
               TileOperandCache* b_cache = nullptr);

}  // namespace trident::kernels
