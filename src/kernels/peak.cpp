#include "kernels/peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_set.h"
#include "kernels/gemm.h"
#include "kernels/linear_bf16.h"

namespace trident::kernels {

double measure_gemm_peak_tflops(int m, int n, int k, double seconds, kernels::Precision precision) {
  std::vector<float> a((size_t)m * k, 0.5f), b((size_t)k * n, 0.25f), c((size_t)m * n);
  std::vector<kernels::bf16_t> a16(a.size()), b16(b.size());
  kernels::to_bf16(a.data(), a16.data(), (long)a.size());
  kernels::to_bf16(b.data(), b16.data(), (long)b.size());
  auto product = [&] {
    if (precision == kernels::Precision::kBf16)  // the layers' fastest bf16 product
      kernels::linear_forward_bf16(a16.data(), b16.data(), c.data(), m, k, n);
    else
      kernels::linear_forward(a.data(), b.data(), c.data(), m, k, n);
  };
  auto now = [] { return std::chrono::steady_clock::now(); };
  product();  // warm-up
  auto start = now();
  int reps = 0;
  double elapsed = 0;
  do {
    product();
    ++reps;
    elapsed = std::chrono::duration<double>(now() - start).count();
  } while (elapsed < seconds || reps < 3);
  return 2.0 * m * n * k * reps / elapsed / 1e12;
}

namespace {

// This thread's CPU time in seconds: a rate over it is the core's rate even when other
// processes take turns on the core (oversubscribed ranks, a busy neighbour).
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// One thread's multiply-add throughput in FLOP per CPU-second over about `seconds` of CPU
// time: independent accumulator chains (more than FMA latency x pipes) so the loop is
// bound by the arithmetic units only, on registers (no memory traffic).
double fma_rate_one_thread(kernels::Precision precision, double seconds) {
  constexpr int kChains = 12;
  constexpr long kInner = 1 << 14;
  double flops = 0, sink = 0;
  const double start = thread_cpu_seconds();
  double elapsed = 0;
#if defined(__AVX512BF16__)
  if (precision == kernels::Precision::kBf16) {
    __m512 acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_setzero_ps();
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3a83);  // bf16 ~1e-3: no overflow
    do {
      for (long r = 0; r < kInner; ++r)
        for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], x, x);
      flops += 64.0 * kChains * kInner;  // 32 bf16 pairs x (multiply + add) per instruction
      elapsed = thread_cpu_seconds() - start;
    } while (elapsed < seconds);
    for (int i = 0; i < kChains; ++i) sink += _mm512_reduce_add_ps(acc[i]);
    return flops / elapsed + (sink == -1 ? 1 : 0);  // keeps the chains alive
  }
#endif
#if defined(__AVX512F__)
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1.f + i);
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-6f);  // a fixed point
  do {
    for (long r = 0; r < kInner; ++r)
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
    flops += 32.0 * kChains * kInner;  // 16 lanes x (multiply + add)
    elapsed = thread_cpu_seconds() - start;
  } while (elapsed < seconds);
  for (int i = 0; i < kChains; ++i) sink += _mm512_reduce_add_ps(acc[i]);
#else
  float acc[kChains * 8];
  for (int i = 0; i < kChains * 8; ++i) acc[i] = 1.f + i;
  do {
    for (long r = 0; r < kInner; ++r)
#pragma omp simd
      for (int i = 0; i < kChains * 8; ++i) acc[i] = acc[i] * 0.999999f + 1e-6f;
    flops += 2.0 * kChains * 8 * kInner;
    elapsed = thread_cpu_seconds() - start;
  } while (elapsed < seconds);
  for (float a : acc) sink += a;
#endif
  return flops / elapsed + (sink == -1 ? 1 : 0);
}

}  // namespace

PeakMeasurement measure_peak_tflops(kernels::Precision precision, double cores, int trials) {
  // fp16 operands are multiplied in fp32 on this CPU: its peak is fp32's.
  const kernels::Precision unit =
      precision == kernels::Precision::kBf16 ? precision : kernels::Precision::kFp32;
  PeakMeasurement m;
  m.precision = unit;
  m.cores = cores;
  // Every thread runs the loop at once (all-core clocks); the best thread's rate per
  // CPU-second is the rate of one core, whoever else ran on it meanwhile.
  const int threads = omp_get_max_threads();
  std::vector<double> rates(threads);
#pragma omp parallel num_threads(threads)
  {
    double best = 0;
    for (int trial = 0; trial < trials; ++trial)
      best = std::max(best, fma_rate_one_thread(unit, 0.02));
    rates[omp_get_thread_num()] = best;
  }
  m.threads = threads;
  m.per_core_gflops = *std::max_element(rates.begin(), rates.end()) / 1e9;
  m.tflops = m.per_core_gflops * cores / 1e3;
  return m;
}

}  // namespace trident::kernels
