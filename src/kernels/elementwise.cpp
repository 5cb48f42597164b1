#include "kernels/elementwise.h"

#include <cmath>
#include <vector>

namespace trident::kernels {

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr int kRowChunk = 64;
}  // namespace

void add_bias(float* y, const float* bias, int rows, int cols) {
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
#pragma omp simd
    for (int c = 0; c < cols; ++c) out[o + c] = a[o + c] + y[o + c] + bias[c];
  }
}

void bias_backward(const float* dy, float* dbias, int rows, int cols) {
  int chunks = (rows + kRowChunk - 1) / kRowChunk;
  std::vector<float> partial((size_t)chunks * cols, 0.f);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    float* acc = partial.data() + (size_t)ch * cols;
    int end = std::min(rows, (ch + 1) * kRowChunk);
    for (int r = ch * kRowChunk; r < end; ++r) {
      const float* row = dy + (long)r * cols;
#pragma omp simd
      for (int c = 0; c < cols; ++c) acc[c] += row[c];
    }
  }
  for (int ch = 0; ch < chunks; ++ch) {
    const float* acc = partial.data() + (size_t)ch * cols;
    for (int c = 0; c < cols; ++c) dbias[c] += acc[c];
  }
}

float gelu_scalar(float x) {
  float inner = kGeluC * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + std::tanh(inner));
}

float gelu_grad_scalar(float x) {
  float inner = kGeluC * (x + 0.044715f * x * x * x);
  float t = std::tanh(inner);
  float dinner = kGeluC * (1.f + 3.f * 0.044715f * x * x);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * dinner;
}

void bias_gelu_forward(float* pre, const float* bias, float* out, int rows, int cols) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    long o = (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      float v = pre[o + c] + bias[c];
      pre[o + c] = v;
      out[o + c] = gelu_scalar(v);
    }
  }
}

void gelu_backward_inplace(const float* pre, float* dinout, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) dinout[i] *= gelu_grad_scalar(pre[i]);
}

void add_inplace(float* y, const float* x, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) y[i] += x[i];
}

void fill(float* y, float value, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) y[i] = value;
}

}  // namespace trident::kernels
