// Read bandwidth of this machine: every thread sums its part of a buffer far larger than
// the caches (static OpenMP split, as the kernels read weights); best of ROUNDS, GB/s.
// The decode roofline of bench/generation.py divides it by the bytes of weights per token.
//   bench_bandwidth [GiB] [rounds]
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/first_touch.h"

namespace {

// Four independent vector sums, so the loads, not the add latency, set the pace.
float sum(const float* p, long n) {
  float total = 0;
  long i = 0;
#ifdef __AVX512F__
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  for (; i + 64 <= n; i += 64) {
    a = _mm512_add_ps(a, _mm512_loadu_ps(p + i));
    b = _mm512_add_ps(b, _mm512_loadu_ps(p + i + 16));
    c = _mm512_add_ps(c, _mm512_loadu_ps(p + i + 32));
    d = _mm512_add_ps(d, _mm512_loadu_ps(p + i + 48));
  }
  total = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
#endif
  for (; i < n; ++i) total += p[i];
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const long n = (long)(gib * (1L << 30)) / (long)sizeof(float);
  trident::FirstTouchVector<float> buffer;
  trident::assign_parallel(buffer, n, 1.f);
  double best = 0, sink = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
#pragma omp parallel reduction(+ : total)
    {
      const int t = omp_get_thread_num(), threads = omp_get_num_threads();
      const long begin = n * t / threads, end = n * (t + 1) / threads;
      total += sum(buffer.data() + begin, end - begin);
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, (double)n * sizeof(float) / sec / 1e9);
    sink += total;
  }
  std::printf("{\"read_gb_per_s\": %.2f, \"threads\": %d, \"buffer_gib\": %.2f, \"check\": %.0f}\n",
              best, omp_get_max_threads(), gib, sink / rounds);
  return 0;
}
