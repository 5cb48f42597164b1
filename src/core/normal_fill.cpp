#include "core/normal_fill.h"

#include <immintrin.h>

#include <cmath>

#include "core/random.h"

namespace trident {

namespace {

thread_local long fallbacks = 0;

float scalar_draw(double sigma, std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return (float)(sigma * normal_at(seed, stream, index));
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)

__m512i mix64_v(__m512i x) {  // splitmix64's finaliser, as mix64
  x = _mm512_add_epi64(x, _mm512_set1_epi64((long long)0x9e3779b97f4a7c15ULL));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                         _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ULL));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                         _mm512_set1_epi64((long long)0x94d049bb133111ebULL));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

// uniform_at for eight indices: the top 53 bits of the mixed counter, times 2^-53.
__m512d uniform_v(std::uint64_t key, __m512i index) {
  __m512i x = mix64_v(_mm512_add_epi64(_mm512_set1_epi64((long long)key), index));
  return _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(x, 11)), _mm512_set1_pd(0x1.0p-53));
}

// log(x) for x in (0, 1]: x = m 2^e with m in [0.75, 1.5); log m = 2 atanh(f), f =
// (m - 1) / (m + 1), |f| < 0.2, by its odd series to f^27 (the next term is < 2^-60 of
// it); e ln 2 in two parts so e ln2_hi is exact.
__m512d log_v(__m512d x) {
  const __m512d m = _mm512_getmant_pd(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_src);
  const __m512d e = _mm512_sub_pd(_mm512_getexp_pd(x), _mm512_getexp_pd(m));
  const __m512d one = _mm512_set1_pd(1.0);
  const __m512d f = _mm512_div_pd(_mm512_sub_pd(m, one), _mm512_add_pd(m, one));
  const __m512d f2 = _mm512_mul_pd(f, f);
  __m512d p = _mm512_set1_pd(1.0 / 27);
  for (int k = 25; k >= 3; k -= 2) p = _mm512_fmadd_pd(p, f2, _mm512_set1_pd(1.0 / k));
  p = _mm512_fmadd_pd(p, f2, one);                              // 1 + f^2/3 + ...
  const __m512d log_m = _mm512_mul_pd(_mm512_add_pd(f, f), p);  // 2f (1 + ...)
  const __m512d ln2_hi = _mm512_set1_pd(0x1.62e42fefa3800p-1);  // trailing zeros: e*hi exact
  const __m512d ln2_lo = _mm512_set1_pd(0x1.ef35793c76730p-45);
  return _mm512_add_pd(_mm512_mul_pd(e, ln2_hi), _mm512_fmadd_pd(e, ln2_lo, log_m));
}

// cos(a) for a in [0, 2 pi): a - k pi/2 in three parts (Cody and Waite, the products exact
// in the FMAs), then +-cos or +-sin of r in [-pi/4, pi/4] by Taylor series (next terms
// below 2^-60 relative).
__m512d cos_v(__m512d a) {
  const __m512d k =
      _mm512_roundscale_pd(_mm512_mul_pd(a, _mm512_set1_pd(M_2_PI)), _MM_FROUND_TO_NEAREST_INT);
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.921fb54442d18p+0), a);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.1a62633145c07p-54), r);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(-0x1.f1976b7ed8fbcp-110), r);
  const __m512d r2 = _mm512_mul_pd(r, r);
  // cos r = sum (-1)^j r^2j / (2j)!, sin r = r sum (-1)^j r^2j / (2j+1)!, to j = 10.
  __m512d c = _mm512_set1_pd(1.0 / 2432902008176640000.0);   // 1/20!
  __m512d s = _mm512_set1_pd(1.0 / 51090942171709440000.0);  // 1/21!
  double fc = 2432902008176640000.0, fs = 51090942171709440000.0;
  for (int j = 9; j >= 0; --j) {
    fc /= (2.0 * j + 2) * (2.0 * j + 1);
    fs /= (2.0 * j + 3) * (2.0 * j + 2);
    const double sign = j % 2 ? -1.0 : 1.0;
    c = _mm512_fmadd_pd(c, r2, _mm512_set1_pd(sign / fc));
    s = _mm512_fmadd_pd(s, r2, _mm512_set1_pd(sign / fs));
  }
  s = _mm512_mul_pd(s, r);
  // Quadrant k mod 4: cos, -sin, -cos, sin.
  const __m512i q = _mm512_and_si512(_mm512_cvtpd_epi64(k), _mm512_set1_epi64(3));
  const __mmask8 odd = _mm512_test_epi64_mask(q, _mm512_set1_epi64(1));
  const __mmask8 negate =
      _mm512_test_epi64_mask(_mm512_add_epi64(q, _mm512_set1_epi64(1)), _mm512_set1_epi64(2));
  __m512d v = _mm512_mask_blend_pd(odd, c, s);
  return _mm512_mask_sub_pd(v, negate, _mm512_setzero_pd(), v);
}

// A double v rounds to the same float as any value within `slack` of it unless a float
// rounding boundary (the midpoint between neighbouring floats) lies that close.
__mmask8 near_float_boundary(__m512d v, __m512d slack) {
  const __m512d back = _mm512_cvtps_pd(_mm512_cvtpd_ps(v));
  // The spacing of floats at `back` (exact: 2^(exponent - 23)), halved on the side towards
  // zero when `back` is a power of two.
  const __m512d one = _mm512_set1_pd(1.0);
  __m512d ulp = _mm512_scalef_pd(one, _mm512_sub_pd(_mm512_getexp_pd(back), _mm512_set1_pd(23)));
  const __mmask8 towards_zero =
      _mm512_cmp_pd_mask(_mm512_abs_pd(v), _mm512_abs_pd(back), _CMP_LT_OQ);
  const __mmask8 power_of_two = _mm512_cmp_pd_mask(
      _mm512_getmant_pd(back, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero), one, _CMP_EQ_OQ);
  ulp = _mm512_mask_mul_pd(ulp, towards_zero & power_of_two, ulp, _mm512_set1_pd(0.5));
  const __m512d off = _mm512_abs_pd(_mm512_sub_pd(v, back));  // <= half the spacing
  return _mm512_cmp_pd_mask(_mm512_add_pd(off, slack), _mm512_mul_pd(ulp, _mm512_set1_pd(0.5)),
                            _CMP_GE_OQ) |
         _mm512_cmp_pd_mask(_mm512_abs_pd(v), _mm512_set1_pd(0x1.0p-120), _CMP_LT_OQ);
}

void normal_fill_avx512(float* dst, long n, double sigma, std::uint64_t seed, std::uint64_t stream,
                        std::uint64_t first) {
  const std::uint64_t key = mix64(seed ^ mix64(stream));
  const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  long i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512i g = _mm512_add_epi64(_mm512_set1_epi64((long long)(first + i)), lanes);
    const __m512i g2 = _mm512_add_epi64(g, g);
    const __m512d u1 = uniform_v(key, g2);
    const __m512d u2 = uniform_v(key, _mm512_add_epi64(g2, _mm512_set1_epi64(1)));
    const __m512d radius = _mm512_sqrt_pd(
        _mm512_mul_pd(_mm512_set1_pd(-2.0), log_v(_mm512_sub_pd(_mm512_set1_pd(1.0), u1))));
    const __m512d angle = _mm512_mul_pd(_mm512_set1_pd(2.0 * M_PI), u2);  // as normal_at
    const __m512d v = _mm512_mul_pd(_mm512_set1_pd(sigma), _mm512_mul_pd(radius, cos_v(angle)));
    // Our log and cos are within a few ulp of glibc's: 2^-44 relative (thousands of ulp)
    // plus an absolute term for cos near its zeros covers that with a wide margin.
#ifdef TRIDENT_NORMAL_FILL_NO_SLACK  // experiments: how often would the raw vector differ?
    const __m512d slack = _mm512_setzero_pd();
#else
    const __m512d slack =
        _mm512_fmadd_pd(_mm512_abs_pd(v), _mm512_set1_pd(0x1.0p-44),
                        _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(std::fabs(sigma)), radius),
                                      _mm512_set1_pd(0x1.0p-90)));
#endif
    __mmask8 redo = near_float_boundary(v, slack);
    _mm256_storeu_ps(dst + i, _mm512_cvtpd_ps(v));
    for (int k = 0; redo; ++k, redo >>= 1)
      if (redo & 1) dst[i + k] = scalar_draw(sigma, seed, stream, first + i + k), ++fallbacks;
  }
  for (; i < n; ++i) dst[i] = scalar_draw(sigma, seed, stream, first + i);
}

#endif

}  // namespace

void normal_fill(float* dst, long n, double sigma, std::uint64_t seed, std::uint64_t stream,
                 std::uint64_t first) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
  normal_fill_avx512(dst, n, sigma, seed, stream, first);
#else
  for (long i = 0; i < n; ++i) dst[i] = scalar_draw(sigma, seed, stream, first + i);
#endif
}

long normal_fill_fallbacks() {
  return fallbacks;
}

}  // namespace trident
