#include "kernels/embedding.h"

#include <algorithm>

namespace trident::kernels {

namespace {
constexpr int kColumnBlock = 64;
}

void embedding_forward(const int* ids, int n, const float* table, int vocab_start, int vocab_rows,
                       int cols, float* out) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    int local = ids[i] - vocab_start;
    float* dst = out + (long)i * cols;
    if (local >= 0 && local < vocab_rows)
      std::copy_n(table + (long)local * cols, cols, dst);
    else
      std::fill_n(dst, cols, 0.f);
  }
}

void embedding_backward(const int* ids, int n, const float* dout, int vocab_start, int vocab_rows,
                        int cols, float* dtable) {
  int blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; ++blk) {
    int c0 = blk * kColumnBlock, c1 = std::min(cols, c0 + kColumnBlock);
    for (int i = 0; i < n; ++i) {
      int local = ids[i] - vocab_start;
      if (local < 0 || local >= vocab_rows) continue;
      float* dst = dtable + (long)local * cols;
      const float* src = dout + (long)i * cols;
      for (int c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

void add_position_embedding(float* out, const float* pos, int batch, int seq, int cols,
                            const int* positions) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t) {
      float* dst = out + ((long)b * seq + t) * cols;
      const float* src = pos + (long)(positions ? positions[(long)b * seq + t] : t) * cols;
#pragma omp simd
      for (int c = 0; c < cols; ++c) dst[c] += src[c];
    }
}

void add_position_embedding_rows(float* out, const float* pos, long first_row, long rows, int seq,
                                 int cols, const int* positions) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    float* dst = out + r * cols;
    const long at = positions ? positions[first_row + r] : (first_row + r) % seq;
    const float* src = pos + at * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) dst[c] += src[c];
  }
}

void position_embedding_backward(const float* dout, float* dpos, int batch, int seq, int cols,
                                 const int* positions) {
  if (positions) {
    constexpr int kColumns = 64;
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < cols; c0 += kColumns)
      for (long r = 0; r < (long)batch * seq; ++r) {
        const float* src = dout + r * cols;
        float* dst = dpos + (long)positions[r] * cols;
        for (int c = c0; c < std::min(cols, c0 + kColumns); ++c) dst[c] += src[c];
      }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int t = 0; t < seq; ++t)
    for (int b = 0; b < batch; ++b) {
      const float* src = dout + ((long)b * seq + t) * cols;
      float* dst = dpos + (long)t * cols;
#pragma omp simd
      for (int c = 0; c < cols; ++c) dst[c] += src[c];
    }
}

}  // namespace trident::kernels
