#include "kernels/elementwise.h"

#include <cmath>
#include <vector>

#include "kernels/fast_math.h"

namespace trident::kernels {

namespace {
constexpr int kRowChunk = 64;
}  // namespace

void add_bias(float* y, const float* bias, int rows, int cols) {
  if (!bias) return;  // --disable-bias-linear
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* row = y + (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void bias_residual_add(const float* a, const float* y, const float* bias, float* out, int rows,
                       int cols) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    long o = (long)r * cols;
    if (!bias) {
#pragma omp simd
      for (int c = 0; c < cols; ++c) out[o + c] = a[o + c] + y[o + c];
      continue;
    }
#pragma omp simd
    for (int c = 0; c < cols; ++c) out[o + c] = a[o + c] + y[o + c] + bias[c];
  }
}

namespace {
// dbias[c] += sum over rows of what row_op(r, acc) adds to acc[c], summed in fixed row chunks
// so the result does not depend on the thread count.
template <typename RowOp>
void sum_rows_in_chunks(float* dbias, int rows, int cols, RowOp row_op) {
  int chunks = (rows + kRowChunk - 1) / kRowChunk;
  std::vector<float> partial((size_t)chunks * cols, 0.f);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    float* acc = partial.data() + (size_t)ch * cols;
    int end = std::min(rows, (ch + 1) * kRowChunk);
    for (int r = ch * kRowChunk; r < end; ++r) row_op(r, acc);
  }
  for (int ch = 0; ch < chunks; ++ch) {
    const float* acc = partial.data() + (size_t)ch * cols;
    for (int c = 0; c < cols; ++c) dbias[c] += acc[c];
  }
}
}  // namespace

void bias_backward(const float* dy, float* dbias, int rows, int cols, bf16_t* dy16) {
  sum_rows_in_chunks(dbias, rows, cols, [&](int r, float* acc) {
    const float* row = dy + (long)r * cols;
    if (dy16) {
      bf16_t* out = dy16 + (long)r * cols;
#pragma omp simd
      for (int c = 0; c < cols; ++c) {
        acc[c] += row[c];
        out[c] = bf16_from_float(row[c]);
      }
      return;
    }
#pragma omp simd
    for (int c = 0; c < cols; ++c) acc[c] += row[c];
  });
}

void gelu_bias_backward(const float* pre, float* d, float* dbias, int rows, int cols, bf16_t* d16) {
  if (!dbias) {  // no bias (--disable-bias-linear): the GeLU gradient alone
    gelu_backward_inplace(pre, d, (long)rows * cols);
    if (d16) to_bf16(d, d16, (long)rows * cols);
    return;
  }
  sum_rows_in_chunks(dbias, rows, cols, [&](int r, float* acc) {
    const float* p = pre + (long)r * cols;
    float* row = d + (long)r * cols;
    if (d16) {
      bf16_t* out = d16 + (long)r * cols;
#pragma omp simd
      for (int c = 0; c < cols; ++c) {
        const float g = row[c] * gelu_grad(p[c]);
        acc[c] += g;
        out[c] = bf16_from_float(g);
      }
      return;
    }
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      const float g = row[c] * gelu_grad(p[c]);
      acc[c] += g;
      row[c] = g;
    }
  });
}

float gelu_scalar(float x) {
  return gelu(x);
}
float gelu_grad_scalar(float x) {
  return gelu_grad(x);
}

namespace {

template <typename Out>
void bias_gelu_forward_into(float* pre, const float* bias, Out* out, int rows, int cols) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    long o = (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      float v = bias ? pre[o + c] + bias[c] : pre[o + c];
      pre[o + c] = v;
      store_as(out + o + c, gelu(v));
    }
  }
}
}  // namespace

void bias_gelu_forward(float* pre, const float* bias, float* out, int rows, int cols) {
  bias_gelu_forward_into(pre, bias, out, rows, cols);
}

void bias_gelu_forward(float* pre, const float* bias, bf16_t* out, int rows, int cols) {
  bias_gelu_forward_into(pre, bias, out, rows, cols);
}

void bias_gelu_forward(float* pre, const float* bias, const GemmOperandBuffer& out, int rows,
                       int cols) {
  if (out.bf16)
    bias_gelu_forward_into(pre, bias, out.bf16, rows, cols);
  else
    bias_gelu_forward_into(pre, bias, out.fp32, rows, cols);
}

void gelu_backward_inplace(const float* pre, float* dinout, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) dinout[i] *= gelu_grad(pre[i]);
}

void accumulate(float* y, const float* x, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) y[i] += x[i];
}

void fill(float* y, float value, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) y[i] = value;
}

}  // namespace trident::kernels
