#include "kernels/bf16_widened.h"

#include <algorithm>
#include <cstring>
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
      const std::uint32_t bits = (std::uint32_t)in[c] << 16;
      std::memcpy(&row[c], &bits, 4);
    }
  }
}

struct Widened {
  const float* data;
  int ld;
};

// Outer indices [first, first + count) of an operand (op(A)'s rows, op(B)'s columns) with inner
// dimension k, widened. The operand stores them as rows (A as is, B transposed) or as columns.
Widened widen_block(const bf16_t* x, int ld, bool outer_is_rows, int first, int count, int k,
                    std::vector<float>& dst) {
  if (outer_is_rows) {
    widen_rows(x + (long)first * ld, count, k, ld, dst);
    return {dst.data(), std::max(k, 1)};
  }
  widen_rows(x + first, k, count, ld, dst);
  return {dst.data(), count};
}

}  // namespace

void gemm_bf16_widened(Trans trans_a, Trans trans_b, int m, int n, int k, const bf16_t* a, int lda,
                       const bf16_t* b, int ldb, float beta, float* c, int ldc,
                       long max_widened_floats) {
  if (m == 0 || n == 0) return;
  if (k == 0) return gemm(trans_a, trans_b, m, n, k, 1.f, nullptr, 1, nullptr, 1, beta, c, ldc);
  thread_local std::vector<float> a32, b32;  // scratch only: rewritten by every call
  // Blocks of both outer dimensions bound the scratch (the output layer's weight alone would
  // be 154 MiB widened in gpt2-small). The sums over k are the same in every block.
  const int block = (int)std::clamp(max_widened_floats / k, 1L, (long)std::max(m, n));
  for (int i = 0; i < m; i += block) {
    const int rows = std::min(block, m - i);
    const Widened wa = widen_block(a, lda, trans_a == Trans::kNo, i, rows, k, a32);
    for (int j = 0; j < n; j += block) {
      const int cols = std::min(block, n - j);
      const Widened wb = widen_block(b, ldb, trans_b == Trans::kYes, j, cols, k, b32);
      gemm(trans_a, trans_b, rows, cols, k, 1.f, wa.data, wa.ld, wb.data, wb.ld, beta,
           c + (long)i * ldc + j, ldc);
    }
  }
}

}  // namespace trident::kernels
