#include "kernels/bf16_widened.h"

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace trident::kernels {

bool onednn_runs_bf16() {
  static const bool runs = [] {
    using dnnl::memory;
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const memory::desc x({16, 16}, memory::data_type::bf16, memory::format_tag::ab);
    const memory::desc y({16, 16}, memory::data_type::f32, memory::format_tag::ab);
    try {
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(x, x, y), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return runs;
}

namespace {

// Rows of a row-major bf16 matrix (leading dimension ld) widened into dense fp32 rows.
void widen_rows(const bf16_t* src, int rows, int cols, int ld, std::vector<float>& dst) {
  if (dst.size() < (size_t)rows * cols) dst.resize((size_t)rows * cols);
  float* out = dst.data();
#pragma omp parallel for schedule(static) if ((long)rows * cols > (1 << 16))
  for (int r = 0; r < rows; ++r) {
    const bf16_t* in = src + (long)r * ld;
    float* row = out + (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      row[c] = bf16_to_float(in[c]);
    }
  }
}

struct Widened {
  const float* data;
  int ld;
};

// Outer indices [first, first + count) of an operand (op(A)'s rows, op(B)'s columns) at inner
// indices [p, p + kc), widened. The operand stores its outer indices as rows (A as is, B
// transposed) or as columns.
Widened widen_block(const bf16_t* x, int ld, bool outer_is_rows, int first, int count, int p,
                    int kc, std::vector<float>& dst) {
  if (outer_is_rows) {
    widen_rows(x + (long)first * ld + p, count, kc, ld, dst);
    return {dst.data(), kc};
  }
  widen_rows(x + (long)p * ld + first, kc, count, ld, dst);
  return {dst.data(), count};
}

}  // namespace

void gemm_bf16_widened(Trans trans_a, Trans trans_b, int m, int n, int k, const bf16_t* a, int lda,
                       const bf16_t* b, int ldb, float beta, float* c, int ldc,
                       long max_widened_floats, int k_block) {
  if (m == 0 || n == 0) return;
  if (k == 0) return gemm(trans_a, trans_b, m, n, k, 1.f, nullptr, 1, nullptr, 1, beta, c, ldc);
  thread_local std::vector<float> a32, b32;  // scratch only: rewritten by every call
  // Blocks of k first: each is widened just before sgemm reads it, so it is still in cache
  // (a rank-k_block update of C each; beta applies to the first only). Then blocks of both
  // outer dimensions bound the scratch (the output layer's weight alone would be 154 MiB
  // widened in gpt2-small).
  for (int p = 0; p < k; p += k_block) {
    const int kc = std::min(k_block, k - p);
    const float beta_p = p == 0 ? beta : 1.f;
    const int block = (int)std::clamp(max_widened_floats / kc, 1L, (long)std::max(m, n));
    for (int i = 0; i < m; i += block) {
      const int rows = std::min(block, m - i);
      const Widened wa = widen_block(a, lda, trans_a == Trans::kNo, i, rows, p, kc, a32);
      for (int j = 0; j < n; j += block) {
        const int cols = std::min(block, n - j);
        const Widened wb = widen_block(b, ldb, trans_b == Trans::kYes, j, cols, p, kc, b32);
        gemm(trans_a, trans_b, rows, cols, kc, 1.f, wa.data, wa.ld, wb.data, wb.ld, beta_p,
             c + (long)i * ldc + j, ldc);
      }
    }
  }
}

}  // namespace trident::kernels
