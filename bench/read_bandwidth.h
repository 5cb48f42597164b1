#pragma once
// Read bandwidth: every thread sums its part of a buffer far larger than the caches (static
// OpenMP split, as the kernels read weights). The denominator of every read-only roofline
// (bench_bandwidth, bench_rooflines). A kernel that also writes gets another denominator,
// stream_gb_per_s: on this CPU's fabric reads and writes travel on separate paths, so such a
// kernel's bytes moved can exceed the read-only figure without any measuring error.
#include <immintrin.h>
#include <omp.h>

#include <chrono>

namespace trident::bench {

// Four independent vector sums, so the loads, not the add latency, set the pace.
inline float sum_floats(const float* p, long n) {
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
#elif defined(__AVX2__)
  // Not the scalar loop below: its chain of dependent adds reads ~4 GB/s a core, so every
  // roofline on an AVX2 CPU came out 2-3x too high.
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (; i + 32 <= n; i += 32) {
    a = _mm256_add_ps(a, _mm256_loadu_ps(p + i));
    b = _mm256_add_ps(b, _mm256_loadu_ps(p + i + 8));
    c = _mm256_add_ps(c, _mm256_loadu_ps(p + i + 16));
    d = _mm256_add_ps(d, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  for (float v : lanes) total += v;
#endif
  for (; i < n; ++i) total += p[i];
  return total;
}

// One pass over n floats: GB/s read. *sink takes the sum, so the reads cannot be skipped.
inline double read_gb_per_s(const float* buffer, long n, double* sink) {
  const auto t0 = std::chrono::steady_clock::now();
  double total = 0;
#pragma omp parallel reduction(+ : total)
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const long begin = n * t / threads, end = n * (t + 1) / threads;
    total += sum_floats(buffer + begin, end - begin);
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *sink += total;
  return (double)n * sizeof(float) / sec / 1e9;
}

// The simplest loop with a given traffic: Reads arrays of n floats read and the first Writes
// of them written back (x += 1e-7 x the sum over the arrays), split statically over the
// threads. GB/s moved (reads + writes): the roofline of a kernel with that mix of traffic
// (AdamW reads 4 arrays and writes 3 of them).
template <int Reads, int Writes>
double stream_gb_per_s(float* const* arrays, long n) {
  static_assert(Writes <= Reads, "the written arrays are read too");
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
  {
    float* x[Reads];
    for (int a = 0; a < Reads; ++a) x[a] = arrays[a];
#pragma omp for simd schedule(static)
    for (long i = 0; i < n; ++i) {
      float sum = 0;
      for (int a = 0; a < Reads; ++a) sum += x[a][i];
      for (int a = 0; a < Writes; ++a) x[a][i] += 1e-7f * sum;
    }
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return (double)n * sizeof(float) * (Reads + Writes) / sec / 1e9;
}

}  // namespace trident::bench
