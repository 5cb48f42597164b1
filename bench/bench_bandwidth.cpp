// Read bandwidth of this machine: every thread sums its part of a buffer far larger than
// the caches (static OpenMP split, as the kernels read weights); best of ROUNDS, GB/s.
// The decode roofline of bench/generation.py divides it by the bytes of weights per token.
//   bench_bandwidth [GiB] [rounds]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/first_touch.h"
#include "read_bandwidth.h"

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const long n = (long)(gib * (1L << 30)) / (long)sizeof(float);
  trident::FirstTouchVector<float> buffer;
  trident::assign_parallel(buffer, n, 1.f);
  double best = 0, sink = 0;
  for (int r = 0; r < rounds; ++r)
    best = std::max(best, trident::bench::read_gb_per_s(buffer.data(), n, &sink));
  std::printf("{\"read_gb_per_s\": %.2f, \"threads\": %d, \"buffer_gib\": %.2f, \"check\": %.0f}\n",
              best, omp_get_max_threads(), gib, sink / rounds);
  return 0;
}
