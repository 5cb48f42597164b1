#include "kernels/skinny_linear_avx2.h"

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/skinny_dispatch.h"

#if defined(TRIDENT_SKINNY_AVX2_FP32) || defined(TRIDENT_SKINNY_AVX2_BF16)
namespace trident::kernels::avx2 {
namespace {

using skinny::kPanel;
constexpr int kPanelPrefetch = 64;  // inputs ahead in a panel block
constexpr int kPrefetchRows = 4;    // w rows ahead in the rows form (see rows_form)

// Sixteen ymm registers: a group's accumulators plus the weights and a broadcast must fit.
constexpr int kRowGroupFp32 = 6;    // rows form: two accumulators a row
constexpr int kRowGroupBf16 = 3;    // four a row
constexpr int kPanelGroupFp32 = 6;  // two a row, two weight vectors, a broadcast
constexpr int kPanelGroupBf16 = 4;  // two a row, four widened weight vectors, two broadcasts

inline float widen(float v) {
  return v;
}
inline float widen(bf16_t v) {
  return bf16_to_float(v);
}

inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// Calls f(std::integral_constant<int, G>, first row) over R rows in groups of at most Max:
// each group's accumulators are a compile-time count.
template <int R, int Max, class F>
inline void in_groups(const F& f, int first = 0) {
  constexpr int G = R < Max ? R : Max;
  f(std::integral_constant<int, G>{}, first);
  if constexpr (R > G) in_groups<R - G, Max>(f, first + G);
}

// Rows form: G rows of x (fp32) against one w row while it is in L1. Two accumulators a
// row, so that a single row does not wait on the multiply-add's latency.
template <int G>
void row_dots(const float* x, const float* wr, float* y, int in, int out) {
  const int full = in / 16 * 16;
  __m256 acc[G][2];
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (int i = 0; i < full; i += 16)
    for (int c = 0; c < 2; ++c) {
      const __m256 wv = _mm256_loadu_ps(wr + i + 8 * c);
      for (int g = 0; g < G; ++g)
        acc[g][c] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (long)g * in + i + 8 * c), acc[g][c]);
    }
  for (int g = 0; g < G; ++g) {
    float s = sum8(_mm256_add_ps(acc[g][0], acc[g][1]));
    for (int i = full; i < in; ++i) s += wr[i] * x[(long)g * in + i];
    y[(long)g * out] = s;
  }
}

// The same for bf16 w: each load of 16 weights is split in registers into its even inputs
// (shift) and odd ones (mask), both exact fp32, so x comes widened with each 16 inputs' even
// ones first (widen_rows_bf16). Four accumulators a row, two loads of 16 at a time: with two,
// one row's 16 weights per multiply-add latency capped the kernel at ~47 GB/s even from
// cache, about the bandwidth it must reach.
template <int G>
void row_dots(const float* x, const bf16_t* wr, float* y, int in, int out) {
  const int full = in / 32 * 32;
  const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
  __m256 acc[G][4];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < 4; ++c) acc[g][c] = _mm256_setzero_ps();
  for (int i = 0; i < full; i += 32)
    for (int h = 0; h < 2; ++h) {
      const __m256i words = _mm256_loadu_si256((const __m256i*)(wr + i + 16 * h));
      const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
      const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(words, high));
      for (int g = 0; g < G; ++g) {
        const float* xg = x + (long)g * in + i + 16 * h;
        acc[g][2 * h] = _mm256_fmadd_ps(even, _mm256_loadu_ps(xg), acc[g][2 * h]);
        acc[g][2 * h + 1] = _mm256_fmadd_ps(odd, _mm256_loadu_ps(xg + 8), acc[g][2 * h + 1]);
      }
    }
  for (int g = 0; g < G; ++g) {
    float s = sum8(
        _mm256_add_ps(_mm256_add_ps(acc[g][0], acc[g][1]), _mm256_add_ps(acc[g][2], acc[g][3])));
    for (int i = full; i < in; ++i) s += widen(wr[i]) * x[(long)g * in + i];
    y[(long)g * out] = s;
  }
}

// rows x `in` bf16 to fp32 for the bf16 rows form: within each whole 32 inputs, each 16's 8
// even ones, then its 8 odd ones; the rest (in % 32) in order.
void widen_rows_bf16(const bf16_t* x, float* xf, int rows, int in) {
  const int full = in / 32 * 32;
  for (int r = 0; r < rows; ++r) {
    const bf16_t* xr = x + (long)r * in;
    float* out = xf + (long)r * in;
    for (int i = 0; i < full; i += 16)
      for (int j = 0; j < 8; ++j)
        out[i + j] = widen(xr[i + 2 * j]), out[i + 8 + j] = widen(xr[i + 2 * j + 1]);
    for (int i = full; i < in; ++i) out[i] = widen(xr[i]);
  }
}

// x is fp32 here (bf16 rows are widened first, by widen_rows_bf16: exact, and done once
// rather than per w row).
template <int R, class T>
void rows_form(const float* x, const T* w, float* y, int in, int out) {
  const long row_bytes = (long)in * sizeof(T);
#pragma omp parallel for schedule(static)
  for (int o = 0; o < out; ++o) {
    const T* wr = w + (long)o * in;
    // Rows ahead asked for: from 2 rows of x, as in the AVX-512 kernel; and at 1 row in bf16,
    // whose products (half fp32's bytes) otherwise read a fifth slower than fp32's here
    // (gpt2-small's decode products on a Zen 3, bench_rooflines: 0.65-0.71 of the read pass
    // against fp32's 0.86-0.92; with it 0.78-0.88). fp32 at 1 row is no faster with it.
    if constexpr (R >= 2 || !std::is_same_v<T, float>)
      for (long b = 0; b < row_bytes; b += 64)
        _mm_prefetch((const char*)(wr + (long)kPrefetchRows * in) + b, _MM_HINT_T0);
    in_groups<R, std::is_same_v<T, float> ? kRowGroupFp32 : kRowGroupBf16>([&](auto g, int r0) {
      row_dots<decltype(g)::value>(x + (long)r0 * in, wr, y + (long)r0 * out + o, in, out);
    });
  }
}

// One panel block's 16 outputs for a row: both halves stored, or those before `out`.
inline void store_block(__m256 lo, __m256 hi, float* y, int left) {
  if (left >= kPanel) {
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
    return;
  }
  alignas(32) float t[kPanel];
  _mm256_store_ps(t, lo);
  _mm256_store_ps(t + 8, hi);
  for (int j = 0; j < left; ++j) y[j] = t[j];
}

// fp32 panel block [in][16] against G rows: xt is x transposed, [input][stride].
template <int G>
void panel_rows_fp32(const float* xt, int stride, const float* pb, float* y, int in, int out,
                     int left) {
  __m256 acc[G][2];
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (int i = 0; i < in; ++i) {
    if ((i & 3) == 0)
      _mm_prefetch((const char*)(pb + (long)(i + kPanelPrefetch) * kPanel), _MM_HINT_T0);
    const __m256 w0 = _mm256_loadu_ps(pb + (long)i * kPanel);
    const __m256 w1 = _mm256_loadu_ps(pb + (long)i * kPanel + 8);
    for (int g = 0; g < G; ++g) {
      const __m256 xv = _mm256_broadcast_ss(xt + (long)i * stride + g);
      acc[g][0] = _mm256_fmadd_ps(w0, xv, acc[g][0]);
      acc[g][1] = _mm256_fmadd_ps(w1, xv, acc[g][1]);
    }
  }
  for (int g = 0; g < G; ++g) store_block(acc[g][0], acc[g][1], y + (long)g * out, left);
}

// bf16 panel block [pairs][16][2] against G rows: xt is x's pairs widened and transposed,
// [pair][stride][2] (even input, odd input).
template <int G>
void panel_rows_bf16(const float* xt, int stride, const bf16_t* pb, float* y, int pairs, int out,
                     int left) {
  const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
  __m256 acc[G][2];
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (int k = 0; k < pairs; ++k) {
    const bf16_t* pk = pb + (long)k * 2 * kPanel;
    if ((k & 3) == 0)
      _mm_prefetch((const char*)(pk + (long)kPanelPrefetch * 2 * kPanel), _MM_HINT_T0);
    __m256 even[2], odd[2];
    for (int c = 0; c < 2; ++c) {
      const __m256i words = _mm256_loadu_si256((const __m256i*)(pk + c * kPanel));
      even[c] = _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
      odd[c] = _mm256_castsi256_ps(_mm256_and_si256(words, high));
    }
    for (int g = 0; g < G; ++g) {
      const float* xg = xt + ((long)k * stride + g) * 2;
      const __m256 xe = _mm256_broadcast_ss(xg), xo = _mm256_broadcast_ss(xg + 1);
      for (int c = 0; c < 2; ++c)
        acc[g][c] = _mm256_fmadd_ps(xo, odd[c], _mm256_fmadd_ps(xe, even[c], acc[g][c]));
    }
  }
  for (int g = 0; g < G; ++g) store_block(acc[g][0], acc[g][1], y + (long)g * out, left);
}

template <int R>
void panels_fp32(const float* x, const float* panels, float* y, int in, int out) {
  const float* xt = skinny::transposed(x, R, in);
  const int blocks = (out + kPanel - 1) / kPanel;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; ++b) {
    const float* pb = panels + (long)b * in * kPanel;
    in_groups<R, kPanelGroupFp32>([&](auto g, int r0) {
      panel_rows_fp32<decltype(g)::value>(xt + r0, R, pb, y + (long)r0 * out + b * kPanel, in, out,
                                          out - b * kPanel);
    });
  }
}

template <int R>
void panels_bf16(const bf16_t* x, const bf16_t* panels, float* y, int in, int out) {
  const int pairs = (in + 1) / 2;
  float* xt = skinny::scratch<float>((long)pairs * R * 2);
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < 2 * pairs; ++i)  // an odd input's partner is zero, as in the panel
      xt[((long)(i / 2) * R + r) * 2 + i % 2] = i < in ? widen(x[(long)r * in + i]) : 0.f;
  const int blocks = (out + kPanel - 1) / kPanel;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; ++b) {
    const bf16_t* pb = panels + (long)b * pairs * 2 * kPanel;
    in_groups<R, kPanelGroupBf16>([&](auto g, int r0) {
      panel_rows_bf16<decltype(g)::value>(xt + 2 * r0, R, pb, y + (long)r0 * out + b * kPanel,
                                          pairs, out, out - b * kPanel);
    });
  }
}

template <int R>
struct RowsFp32 {
  static void run(const float* x, const float* w, float* y, int in, int out) {
    rows_form<R>(x, w, y, in, out);
  }
};

template <int R>
struct RowsBf16 {
  static void run(const bf16_t* x, const bf16_t* w, float* y, int in, int out) {
    float* xf = skinny::scratch<float>((long)R * in);
    widen_rows_bf16(x, xf, R, in);
    rows_form<R>(xf, w, y, in, out);
  }
};

template <int R>
struct PanelsFp32 {
  static void run(const float* x, const float* p, float* y, int in, int out) {
    panels_fp32<R>(x, p, y, in, out);
  }
};

template <int R>
struct PanelsBf16 {
  static void run(const bf16_t* x, const bf16_t* p, float* y, int in, int out) {
    panels_bf16<R>(x, p, y, in, out);
  }
};

}  // namespace

void skinny_linear_forward(const float* x, const float* w, float* y, int rows, int in, int out) {
  skinny::dispatch<RowsFp32>(x, w, y, rows, in, out);
}

void skinny_linear_forward_bf16(const bf16_t* x, const bf16_t* w, float* y, int rows, int in,
                                int out) {
  skinny::dispatch<RowsBf16>(x, w, y, rows, in, out);
}

void panel_linear_forward(const float* x, const float* panels, float* y, int rows, int in,
                          int out) {
  skinny::dispatch<PanelsFp32>(x, panels, y, rows, in, out);
}

void panel_linear_forward_bf16(const bf16_t* x, const bf16_t* panels, float* y, int rows, int in,
                               int out) {
  skinny::dispatch<PanelsBf16>(x, panels, y, rows, in, out);
}

}  // namespace trident::kernels::avx2
#endif
