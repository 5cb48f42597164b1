#include "kernels/adamw.h"

#include <cmath>
#include <vector>

namespace trident::kernels {

namespace {

template <typename Store>
void adamw_loop(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, long n,
                const AdamWStep& s, bool decay, Store store) {
  const float bc1 = 1.f - std::pow(s.beta1, (float)s.step);
  const float bc2 = 1.f - std::pow(s.beta2, (float)s.step);
  const float step_size = s.lr / bc1;
  const float inv_sqrt_bc2 = 1.f / std::sqrt(bc2);
  const float decay_factor = decay ? 1.f - s.lr * s.weight_decay : 1.f;
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    float g = grad[i] * s.grad_scale;
    float m = s.beta1 * exp_avg[i] + (1.f - s.beta1) * g;
    float v = s.beta2 * exp_avg_sq[i] + (1.f - s.beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float p = param[i] * decay_factor - step_size * m / (std::sqrt(v) * inv_sqrt_bc2 + s.eps);
    param[i] = p;
    store(i, p);
  }
}

}  // namespace

void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, long n,
                  const AdamWStep& s, bool decay, std::uint16_t* low, Precision low_precision) {
  if (!low)
    adamw_loop(param, grad, exp_avg, exp_avg_sq, n, s, decay, [](long, float) {});
  else if (low_precision == Precision::kBf16)
    adamw_loop(param, grad, exp_avg, exp_avg_sq, n, s, decay,
               [low](long i, float p) { low[i] = bf16_from_float(p); });
  else
    adamw_loop(param, grad, exp_avg, exp_avg_sq, n, s, decay,
               [low](long i, float p) { low[i] = fp16_from_float(p); });
}

double sum_of_squares(const float* x, long n) {
  constexpr long kChunk = 1 << 14;
  long chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks, 0.0);
#pragma omp parallel for schedule(static)
  for (long ch = 0; ch < chunks; ++ch) {
    long end = std::min(n, (ch + 1) * kChunk);
    // Vector lanes are independent partial sums (a fixed order for a given build): one
    // scalar double accumulator would be bound by the add latency, not by memory.
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (long i = ch * kChunk; i < end; ++i) acc += (double)x[i] * x[i];
    partial[ch] = acc;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace trident::kernels
