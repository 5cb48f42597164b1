// How close can a bf16 matrix product get to the multiply-add loop's peak on this machine,
// and is oneDNN the one falling short? A product kernel written here for the question (not
// used by training): avx512_bf16 dot products on a 14 x 32 register tile of fp32 sums, the
// weight packed ahead of the timing into 32-column panels of bf16 pairs, the input read in
// place, each thread its own half of the output columns (no sharing, one join). It prints
//   1. the tile kernel alone on operands that stay in L1, against the loop's peak per core;
//   2. gpt2-small's forward products (B4 T256, and the 1024-row output layer) with 1 and 2
//      threads: this kernel and oneDNN's inner product (what training calls), alternated
//      in the same loop, each as a fraction of the loop's peak for that many cores.
// Both must give the same sums; the bench checks that before timing.
// On an AVX2 CPU without avx512_bf16 it asks the fp32 question instead: a 6 x 16 register
// tile of fp32 multiply-adds (the classic AVX2 product kernel's shape: two loads and six
// broadcasts for twelve multiply-adds) on operands in L1, and gpt2-small's forward products
// through kernels::gemm (BLIS there), each against the fp32 loop's peak.
//   bench_gemm_ceiling [rounds]
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/low_precision.h"
#include "kernels/peak.h"

namespace {

[[maybe_unused]] double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Shape {
  const char* name;
  int m, k, n;
};

// gpt2-small's forward products at B4 T256, and its 1024-row output layer.
constexpr Shape kShapes[] = {{"qkv", 1024, 768, 2304},
                             {"projection", 1024, 768, 768},
                             {"fc1", 1024, 768, 3072},
                             {"fc2", 1024, 3072, 768},
                             {"output layer", 1024, 768, 50304}};

}  // namespace

#if defined(__AVX512BF16__)
namespace {

using trident::kernels::bf16_t;
using Word = std::uint32_t;  // a pair of bf16 along k
constexpr int kRows = 14, kCols = 32;
constexpr int kBlockColumns = 320;  // a thread's columns per pass: ~0.5 MB of panels at k = 768

// c[r][0:32] = sum over pairs p of a[r][p] . b[p][0:32] (a: rows of pairs, b: a packed panel).
template <int R>
void tile(const Word* a, long a_row, const Word* b, int pairs, float* c, long ldc) {
  __m512 sum[R][2];
  for (int r = 0; r < R; ++r) sum[r][0] = sum[r][1] = _mm512_setzero_ps();
  for (int p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * kCols);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * kCols + 16);
    for (int r = 0; r < R; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32((int)a[r * a_row + p]);
      sum[r][0] = _mm512_dpbf16_ps(sum[r][0], x, b0);
      sum[r][1] = _mm512_dpbf16_ps(sum[r][1], x, b1);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(c + r * ldc, sum[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, sum[r][1]);
  }
}

// w [n, k] bf16 row-major -> panels [n / 32][k / 2][32] of pairs.
std::vector<Word> pack_panels(const bf16_t* w, int n, int k) {
  const int pairs = k / 2;
  std::vector<Word> out((size_t)n * pairs);
  const Word* words = reinterpret_cast<const Word*>(w);
  for (int j = 0; j < n; ++j)
    for (int p = 0; p < pairs; ++p)
      out[(size_t)(j / kCols) * pairs * kCols + p * kCols + j % kCols] =
          words[(size_t)j * pairs + p];
  return out;
}

// y [m, n] = x [m, k] w^T, w packed; n a multiple of 64 (two halves of whole panels).
void product(const bf16_t* x, const Word* panels, float* y, int m, int n, int k) {
  const int pairs = k / 2;
  const Word* a = reinterpret_cast<const Word*>(x);
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int per = (n / kCols + threads - 1) / threads * kCols;
    const int first = t * per, last = std::min(n, first + per);
    for (int block = first; block < last; block += kBlockColumns) {
      const int end = std::min(last, block + kBlockColumns);
      int i = 0;
      for (; i + kRows <= m; i += kRows)
        for (int j = block; j < end; j += kCols)
          tile<kRows>(a + (long)i * pairs, pairs, panels + (long)j * pairs, pairs,
                      y + (long)i * n + j, n);
      for (; i < m; ++i)
        for (int j = block; j < end; j += kCols)
          tile<1>(a + (long)i * pairs, pairs, panels + (long)j * pairs, pairs, y + (long)i * n + j,
                  n);
    }
  }
}

double tile_in_l1_gflops() {
  const int pairs = 384, panels = 8;
  std::vector<Word> a(kRows * pairs, 0x3f803f80u), b((size_t)pairs * kCols * panels, 0x3f803f80u);
  std::vector<float> c(kRows * kCols * panels);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    long calls = 0;
    const double start = now();
    while (now() - start < 0.3)
      for (int j = 0; j < panels; ++j, ++calls)
        tile<kRows>(a.data(), pairs, b.data() + (size_t)j * pairs * kCols, pairs,
                    c.data() + j * kCols, kCols * panels);
    best = std::max(best, 2.0 * kRows * kCols * 2 * pairs * calls / (now() - start) / 1e9);
  }
  return best;
}

void compare(const Shape& s, int rounds, const double peak_per_core[2]) {
  using namespace dnnl;
  using tag = memory::format_tag;
  std::vector<bf16_t> x((size_t)s.m * s.k), w((size_t)s.n * s.k);
  std::mt19937 random(1);
  std::uniform_real_distribution<float> magnitude(0.5f, 1.f);  // positive inputs, signed weights:
  std::bernoulli_distribution negative(0.5);  // fp32 sums of the same terms in either order
  for (auto& v : x) v = trident::kernels::bf16_from_float(magnitude(random));
  for (auto& v : w)
    v = trident::kernels::bf16_from_float(negative(random) ? -magnitude(random)
                                                           : magnitude(random));
  std::vector<float> mine((size_t)s.m * s.n), theirs((size_t)s.m * s.n);
  const std::vector<Word> panels = pack_panels(w.data(), s.n, s.k);
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  memory::desc xd({s.m, s.k}, memory::data_type::bf16, tag::ab),
      wd({s.n, s.k}, memory::data_type::bf16, tag::ab),
      yd({s.m, s.n}, memory::data_type::f32, tag::ab);
  memory X(xd, eng, x.data()), W(wd, eng, w.data()), Y(yd, eng, theirs.data());
  inner_product_forward ip(inner_product_forward::primitive_desc(
      inner_product_forward::desc(prop_kind::forward_training, xd, wd, yd), eng));
  auto run_onednn = [&] {
    ip.execute(strm, {{DNNL_ARG_SRC, X}, {DNNL_ARG_WEIGHTS, W}, {DNNL_ARG_DST, Y}});
    strm.wait();
  };
  auto run_mine = [&] { product(x.data(), panels.data(), mine.data(), s.m, s.n, s.k); };
  run_onednn(), run_mine();
  double worst = 0;
  for (size_t i = 0; i < mine.size(); ++i)
    worst = std::max(worst, (double)std::fabs(mine[i] - theirs[i]) / (1 + std::fabs(theirs[i])));
  if (worst > 1e-5) {
    std::fprintf(stderr, "%s: the two products differ (%.2e)\n", s.name, worst);
    std::exit(1);
  }
  const double flops = 2.0 * s.m * s.n * s.k;
  std::printf("%-14s", s.name);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<double> ours, onednn;
    for (int r = 0; r < rounds; ++r) {
      double t = now();
      run_mine();
      ours.push_back(flops / (now() - t) / 1e9 / (peak_per_core[1] * threads));
      t = now();
      run_onednn();
      onednn.push_back(flops / (now() - t) / 1e9 / (peak_per_core[1] * threads));
    }
    std::sort(ours.begin(), ours.end());
    std::sort(onednn.begin(), onednn.end());
    std::printf(" | %d thread%s: this kernel %.2f (%.2f-%.2f), oneDNN %.2f (%.2f-%.2f)", threads,
                threads > 1 ? "s" : "", ours[rounds / 2], ours.front(), ours.back(),
                onednn[rounds / 2], onednn.front(), onednn.back());
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const auto peak = trident::kernels::measure_peak_tflops(trident::kernels::Precision::kBf16, 1,
                                                          trident::kernels::kCarefulPeakTrials);
  const double per_core[2] = {0, peak.per_core_gflops};
  std::printf(
      "bf16 loop peak %.1f GFLOP/s per core; the tile kernel in L1 (1 thread): %.2f of it\n",
      peak.per_core_gflops, tile_in_l1_gflops() / peak.per_core_gflops);
  std::printf(
      "forward products, fraction of the loop's peak for the threads used (median, range of %d):\n",
      rounds);
  for (const Shape& s : kShapes) compare(s, rounds, per_core);
  return 0;
}
#elif defined(__AVX2__) && defined(__FMA__)
namespace {

// c[0:6][0:16] += a[k][0:6] . b[k][0:16] over k (a and b packed, as a product kernel has them).
__attribute__((noinline)) void tile(const float* a, const float* b, float* c, int k) {
  __m256 sum[6][2];
  for (int r = 0; r < 6; ++r) sum[r][0] = sum[r][1] = _mm256_setzero_ps();
  for (int p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b + 16 * p), b1 = _mm256_loadu_ps(b + 16 * p + 8);
    for (int r = 0; r < 6; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + 6 * p + r);
      sum[r][0] = _mm256_fmadd_ps(x, b0, sum[r][0]);
      sum[r][1] = _mm256_fmadd_ps(x, b1, sum[r][1]);
    }
  }
  for (int r = 0; r < 6; ++r)
    for (int h = 0; h < 2; ++h)
      _mm256_storeu_ps(c + 16 * r + 8 * h,
                       _mm256_add_ps(_mm256_loadu_ps(c + 16 * r + 8 * h), sum[r][h]));
}

// One thread; 6 + 16 floats a step over k = 256: 22 KiB, in L1.
double tile_in_l1_gflops() {
  const int k = 256;
  std::vector<float> a(6 * k, 1e-3f), b(16 * k, 1e-3f), c(96, 0.f);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    long calls = 0;
    const double start = now();
    while (now() - start < 0.3)
      for (int i = 0; i < 1000; ++i, ++calls) tile(a.data(), b.data(), c.data(), k);
    best = std::max(best, 2.0 * 6 * 16 * k * calls / (now() - start) / 1e9);
  }
  return best + (c[0] == -1 ? 1 : 0);
}

// Median and range of the product's GFLOP/s over rounds, as fractions of the loop's peak.
void measure(const Shape& s, int rounds, int threads, double peak) {
  std::vector<float> x((long)s.m * s.k, 1e-3f), w((long)s.n * s.k, 1e-3f), y((long)s.m * s.n);
  omp_set_num_threads(threads);
  std::vector<double> got;
  for (int r = 0; r <= rounds; ++r) {
    const double start = now();
    trident::kernels::linear_forward(x.data(), w.data(), y.data(), s.m, s.k, s.n);
    const double gflops = 2.0 * s.m * s.k * s.n / (now() - start) / 1e9;
    if (r > 0) got.push_back(gflops / peak);  // the first call warms up
  }
  std::sort(got.begin(), got.end());
  std::printf("  %-13s %d thread%s: %.2f (%.2f-%.2f)\n", s.name, threads, threads > 1 ? "s" : "",
              got[got.size() / 2], got.front(), got.back());
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const auto peak = trident::kernels::measure_peak_tflops(trident::kernels::Precision::kFp32, 1,
                                                          trident::kernels::kCarefulPeakTrials);
  std::printf(
      "fp32 loop peak %.1f GFLOP/s per core; the 6 x 16 tile in L1 (1 thread): %.2f of it\n",
      peak.per_core_gflops, tile_in_l1_gflops() / peak.per_core_gflops);
  std::printf(
      "forward products (kernels::gemm), fraction of the loop's peak for the threads used\n"
      "(median, range of %d):\n",
      rounds);
  for (const Shape& s : kShapes)
    for (int threads : {1, 2}) measure(s, rounds, threads, threads * peak.per_core_gflops);
  return 0;
}
#else
int main() {
  std::printf("bench_gemm_ceiling needs AVX2 + FMA, or avx512_bf16 (built with -march=native)\n");
  return 0;
}
#endif
