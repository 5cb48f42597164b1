// Compares sgemm throughput of one BLAS library on the GEMM shapes of a GPT
// transformer layer. Built once per library (OpenBLAS, BLIS, oneDNN) because
// OpenBLAS and BLIS export the same cblas symbols and cannot share a binary.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(TRIDENT_GEMM_DNNL)
#include <oneapi/dnnl/dnnl.h>
static const char* kLibrary = "oneDNN";
#else
#include <cblas.h>
#if defined(TRIDENT_GEMM_BLIS)
static const char* kLibrary = "BLIS";
#else
static const char* kLibrary = "OpenBLAS";
#endif
#endif

namespace {

struct Shape {
  const char* what;
  bool trans_a, trans_b;
  int m, n, k;
};

// Row-major C[m,n] = op(A) op(B).
void sgemm(bool ta, bool tb, int m, int n, int k, const float* a, const float* b, float* c) {
  int lda = ta ? m : k, ldb = tb ? k : n;
#if defined(TRIDENT_GEMM_DNNL)
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.f, a, lda, b, ldb, 0.f, c, n);
#else
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.f, a, lda, b, ldb, 0.f, c, n);
#endif
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int tokens = argc > 1 ? std::atoi(argv[1]) : 1024;  // micro-batch x seq
  const int h = argc > 2 ? std::atoi(argv[2]) : 768;
  const int vocab = 50304;
  std::vector<Shape> shapes = {{"qkv fwd", false, true, tokens, 3 * h, h},
                               {"proj fwd", false, true, tokens, h, h},
                               {"fc1 fwd", false, true, tokens, 4 * h, h},
                               {"fc2 fwd", false, true, tokens, h, 4 * h},
                               {"fc1 dgrad", false, false, tokens, h, 4 * h},
                               {"fc1 wgrad", true, false, 4 * h, h, tokens},
                               {"logits fwd", false, true, tokens, vocab, h},
                               {"logits wgrad", true, false, vocab, h, tokens},
                               {"square 2048", false, false, 2048, 2048, 2048}};
  double total_flops = 0, total_time = 0;
  std::printf("%-10s %-14s %6s %6s %6s %9s\n", "library", "shape", "M", "N", "K", "GFLOP/s");
  for (const Shape& s : shapes) {
    std::vector<float> a((size_t)s.m * s.k, 0.01f), b((size_t)s.k * s.n, 0.02f),
        c((size_t)s.m * s.n);
    sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(), b.data(), c.data());  // warm-up
    double flops = 2.0 * s.m * s.n * s.k, start = seconds_now();
    int reps = 0;
    while (seconds_now() - start < 0.6 || reps < 3) {
      sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(), b.data(), c.data());
      ++reps;
    }
    double t = (seconds_now() - start) / reps;
    total_flops += flops;
    total_time += t;
    std::printf("%-10s %-14s %6d %6d %6d %9.1f\n", kLibrary, s.what, s.m, s.n, s.k,
                flops / t / 1e9);
  }
  std::printf("%-10s %-14s %29.1f\n", kLibrary, "all shapes", total_flops / total_time / 1e9);
  return 0;
}
