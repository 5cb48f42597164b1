#include "kernels/low_precision.h"

#include <immintrin.h>

#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "kernels/bf16_widened.h"

namespace trident::kernels {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

void to_bf16(const float* x, bf16_t* out, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) out[i] = bf16_from_float(x[i]);
}

void from_bf16(const bf16_t* x, float* out, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) out[i] = bf16_to_float(x[i]);
}

#ifdef __F16C__
namespace {

// eight(i) for each whole 8 from i = 0, in parallel; one(i) for the rest. GCC has no AVX2
// vector type for _Float16, so element loops over it stayed scalar on such CPUs (Zen 3),
// each element one vcvtps2ph or vcvtph2ps; F16C's forms take 8 at a time, and as the same
// instructions (rounding as MXCSR says: to nearest even) they give the same bits.
template <class Eight, class One>
void in_eights(long n, const Eight& eight, const One& one) {
  const long full = n / 8 * 8;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < full; i += 8) eight(i);
  for (long i = full; i < n; ++i) one(i);
}

constexpr int kMxcsrRounding = _MM_FROUND_CUR_DIRECTION;

}  // namespace

void to_fp16(const float* x, fp16_t* out, long n) {
  in_eights(
      n,
      [&](long i) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kMxcsrRounding);
        _mm_storeu_si128((__m128i*)(out + i), h);
      },
      [&](long i) { out[i] = fp16_from_float(x[i]); });
}

void from_fp16(const fp16_t* x, float* out, long n) {
  in_eights(
      n,
      [&](long i) {
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(x + i))));
      },
      [&](long i) { out[i] = _cvtsh_ss(x[i]); });
}

void round_through_fp16(const float* x, float* out, long n) {
  in_eights(
      n,
      [&](long i) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kMxcsrRounding);
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
      },
      [&](long i) { out[i] = _cvtsh_ss(fp16_from_float(x[i])); });
}
#else
void to_fp16(const float* x, fp16_t* out, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) out[i] = fp16_from_float(x[i]);
}

void from_fp16(const fp16_t* x, float* out, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    _Float16 h;
    std::memcpy(&h, &x[i], 2);
    out[i] = (float)h;
  }
}

void round_through_fp16(const float* x, float* out, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) out[i] = (float)(_Float16)x[i];
}
#endif

namespace {

using dnnl::memory;

// A row-major matrix of `rows` x `cols` stored with leading dimension ld, or its transpose.
memory::desc matrix_desc(int rows, int cols, int ld, bool transposed, memory::data_type dt) {
  memory::dims strides = transposed ? memory::dims{1, ld} : memory::dims{ld, 1};
  return memory::desc({rows, cols}, dt, strides);
}

struct MatmulKey {
  bool ta, tb;
  int m, n, k, lda, ldb, ldc;
  bool accumulate;
  auto tie() const { return std::tie(ta, tb, m, n, k, lda, ldb, ldc, accumulate); }
  bool operator<(const MatmulKey& o) const { return tie() < o.tie(); }
};

// Building a primitive descriptor searches oneDNN's implementations; done once per shape.
struct MatmulCache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<MatmulKey, dnnl::matmul> primitives;

  dnnl::matmul& get(const MatmulKey& key) {
    auto it = primitives.find(key);
    if (it != primitives.end()) return it->second;
    auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
    memory::desc a = matrix_desc(key.m, key.k, key.lda, key.ta, bf16);
    memory::desc b = matrix_desc(key.k, key.n, key.ldb, key.tb, bf16);
    memory::desc c = matrix_desc(key.m, key.n, key.ldc, false, f32);
    dnnl::primitive_attr attr;
    if (key.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
    return primitives.emplace(key, dnnl::matmul(pd)).first->second;
  }
};

MatmulCache& matmul_cache() {
  static MatmulCache cache;  // compiled kernels only: no numerical state
  return cache;
}

}  // namespace

void gemm_bf16(Trans trans_a, Trans trans_b, int m, int n, int k, const bf16_t* a, int lda,
               const bf16_t* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (!onednn_runs_bf16())
    return gemm_bf16_widened(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  MatmulCache& cache = matmul_cache();
  MatmulKey key{trans_a == Trans::kYes, trans_b == Trans::kYes, m, n, k, lda, ldb, ldc, beta != 0};
  dnnl::matmul& mm = cache.get(key);
  auto bf16 = memory::data_type::bf16;
  memory A(matrix_desc(m, k, lda, key.ta, bf16), cache.engine, const_cast<bf16_t*>(a));
  memory B(matrix_desc(k, n, ldb, key.tb, bf16), cache.engine, const_cast<bf16_t*>(b));
  memory C(matrix_desc(m, n, ldc, false, memory::data_type::f32), cache.engine, c);
  mm.execute(cache.stream, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
  cache.stream.wait();
}

}  // namespace trident::kernels
