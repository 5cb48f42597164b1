#include "kernels/skinny_linear.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/skinny_dispatch.h"
#include "kernels/skinny_linear_avx2.h"

namespace trident::kernels {

using skinny::kPanel;

#ifdef __AVX512F__
namespace {

constexpr int kPrefetchRows = 4;
constexpr int kPrefetchFromRows = 2;

// One w row against R rows of x: R independent accumulators, w loaded once per 16 floats.
template <int R>
void rows_fp32(const float* x, const float* w, float* y, int in, int out) {
  const int full = in / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (in - full)) - 1);
#pragma omp parallel for schedule(static)
  for (int o = 0; o < out; ++o) {
    const float* wr = w + (long)o * in;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int i = 0; i < full; i += 16) {
      // The hardware prefetcher falls behind while the FMAs of several rows run; ask for the
      // row kPrefetchRows ahead (lm-head product, interleaved runs: ~10% faster at 8 rows,
      // ~17% at 16). One row is the other way round: there the prefetcher keeps up alone,
      // and the extra requests cost a fifth of the speed when memory is fast (gpt2-small's
      // decode products on a Zen 4 at a 62 GB/s read pass: 0.77 of it with them, 0.95
      // without; alike at 35 GB/s).
      if constexpr (R >= kPrefetchFromRows)
        _mm_prefetch((const char*)(wr + (long)kPrefetchRows * in + i), _MM_HINT_T0);
      const __m512 wv = _mm512_loadu_ps(wr + i);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (long)r * in + i), acc[r]);
    }
    if (tail) {
      const __m512 wv = _mm512_maskz_loadu_ps(tail, wr + full);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(tail, x + (long)r * in + full), acc[r]);
    }
    for (int r = 0; r < R; ++r) y[(long)r * out + o] = _mm512_reduce_add_ps(acc[r]);
  }
}

#ifdef __AVX512BF16__
// The same with vdpbf16ps: 32 bf16 pairs of (w, x) per instruction, fp32 accumulation.
template <int R>
void rows_bf16(const bf16_t* x, const bf16_t* w, float* y, int in, int out) {
  const int full = in / 32 * 32;
  const __mmask32 tail = (__mmask32)((1ull << (in - full)) - 1);
#pragma omp parallel for schedule(static)
  for (int o = 0; o < out; ++o) {
    const bf16_t* wr = w + (long)o * in;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int i = 0; i < full; i += 32) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(wr + i);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_dpbf16_ps(acc[r], wv, (__m512bh)_mm512_loadu_si512(x + (long)r * in + i));
    }
    if (tail) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(tail, wr + full);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_dpbf16_ps(
            acc[r], wv, (__m512bh)_mm512_maskz_loadu_epi16(tail, x + (long)r * in + full));
    }
    for (int r = 0; r < R; ++r) y[(long)r * out + o] = _mm512_reduce_add_ps(acc[r]);
  }
}
#endif

// Panel form: 16 outputs per block; each input's 16 weights are one load, x[r][i] a
// broadcast. Outputs past `out` in the last block are masked off the store.
constexpr int kPanelPrefetch = 64;  // inputs ahead: 4 KB of fp32 panel

inline __mmask16 block_mask(int out, int block) {
  const int left = out - block * kPanel;
  return left >= kPanel ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

// x transposed to [input][row] (bf16: [input pair][row]) so that one input's R broadcasts
// come from one cache line instead of R lines `in` apart: gpt2-small's whole decode step of
// products at 8 rows then takes 1.1x the one-row time, against 1.4x with x as given.

template <int R>
void panels_fp32(const float* x, const float* panels, float* y, int in, int out) {
  const float* xt = skinny::transposed(x, R, in);
  const int blocks = (out + kPanel - 1) / kPanel;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; ++b) {
    const float* pb = panels + (long)b * in * kPanel;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int i = 0; i < in; ++i) {
      if ((i & 3) == 0)
        _mm_prefetch((const char*)(pb + (long)(i + kPanelPrefetch) * kPanel), _MM_HINT_T0);
      const __m512 wv = _mm512_loadu_ps(pb + (long)i * kPanel);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xt[(long)i * R + r]), acc[r]);
    }
    const __mmask16 m = block_mask(out, b);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (long)r * out + b * kPanel, m, acc[r]);
  }
}

#ifdef __AVX512BF16__
template <int R>
void panels_bf16(const bf16_t* x, const bf16_t* panels, float* y, int in, int out) {
  const int pairs = (in + 1) / 2;
  std::int32_t* xt = skinny::scratch<std::int32_t>((long)pairs * R);
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < pairs; ++k) {  // an odd input's partner is zero, as in the panel
      const std::uint32_t lo = x[(long)r * in + 2 * k],
                          hi = 2 * k + 1 < in ? x[(long)r * in + 2 * k + 1] : 0u;
      xt[(long)k * R + r] = (std::int32_t)(lo | hi << 16);
    }
  const int blocks = (out + kPanel - 1) / kPanel;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; ++b) {
    const bf16_t* pb = panels + (long)b * pairs * 2 * kPanel;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int k = 0; k < pairs; ++k) {
      if ((k & 3) == 0)
        _mm_prefetch((const char*)(pb + (long)(k + kPanelPrefetch) * 2 * kPanel), _MM_HINT_T0);
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(pb + (long)k * 2 * kPanel);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_dpbf16_ps(acc[r], wv, (__m512bh)_mm512_set1_epi32(xt[(long)k * R + r]));
    }
    const __mmask16 m = block_mask(out, b);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (long)r * out + b * kPanel, m, acc[r]);
  }
}
#endif

template <int R>
struct Fp32 {
  static void run(const float* x, const float* w, float* y, int in, int out) {
    rows_fp32<R>(x, w, y, in, out);
  }
};

#ifdef __AVX512BF16__
template <int R>
struct Bf16 {
  static void run(const bf16_t* x, const bf16_t* w, float* y, int in, int out) {
    rows_bf16<R>(x, w, y, in, out);
  }
};
#endif

template <int R>
struct PanelsFp32 {
  static void run(const float* x, const float* p, float* y, int in, int out) {
    panels_fp32<R>(x, p, y, in, out);
  }
};

#ifdef __AVX512BF16__
template <int R>
struct PanelsBf16 {
  static void run(const bf16_t* x, const bf16_t* p, float* y, int in, int out) {
    panels_bf16<R>(x, p, y, in, out);
  }
};
#endif

}  // namespace
#endif

bool skinny_linear_available(Precision p, int rows) {
  if (rows < 1 || rows > kSkinnyMaxRows) return false;
#if defined(__AVX512F__) || defined(TRIDENT_SKINNY_AVX2_FP32)
  if (p == Precision::kFp32) return true;
#endif
#if defined(__AVX512BF16__) || defined(TRIDENT_SKINNY_AVX2_BF16)
  if (p == Precision::kBf16) return true;
#endif
  return false;
}

void skinny_linear_forward(const float* x, const float* w, float* y, int rows, int in, int out) {
#if defined(__AVX512F__)
  skinny::dispatch<Fp32>(x, w, y, rows, in, out);
#elif defined(TRIDENT_SKINNY_AVX2_FP32)
  avx2::skinny_linear_forward(x, w, y, rows, in, out);
#else
  (void)x, (void)w, (void)y, (void)rows, (void)in, (void)out;
  throw std::logic_error("skinny_linear_forward: built without AVX-512 or AVX2");
#endif
}

void skinny_linear_forward_bf16(const bf16_t* x, const bf16_t* w, float* y, int rows, int in,
                                int out) {
#if defined(__AVX512BF16__)
  skinny::dispatch<Bf16>(x, w, y, rows, in, out);
#elif defined(TRIDENT_SKINNY_AVX2_BF16)
  avx2::skinny_linear_forward_bf16(x, w, y, rows, in, out);
#else
  (void)x, (void)w, (void)y, (void)rows, (void)in, (void)out;
  throw std::logic_error("skinny_linear_forward_bf16: built without AVX512_BF16 or AVX2");
#endif
}

long panel_elements(Precision p, int out, int in) {
  const long outputs = (long)(out + kPanel - 1) / kPanel * kPanel;
  return p == Precision::kBf16 ? outputs * ((in + 1) / 2 * 2) : outputs * in;
}

void pack_panels(const float* w, int out, int in, float* panels) {
#pragma omp parallel for schedule(static)
  for (int o = 0; o < (out + kPanel - 1) / kPanel * kPanel; ++o)
    for (int i = 0; i < in; ++i)
      panels[((long)(o / kPanel) * in + i) * kPanel + o % kPanel] =
          o < out ? w[(long)o * in + i] : 0.f;
}

void pack_panels_bf16(const bf16_t* w, int out, int in, bf16_t* panels) {
  const int in_even = (in + 1) / 2 * 2;
#pragma omp parallel for schedule(static)
  for (int o = 0; o < (out + kPanel - 1) / kPanel * kPanel; ++o)
    for (int i = 0; i < in_even; ++i)
      panels[((long)(o / kPanel) * in_even + i / 2 * 2) * kPanel + (o % kPanel) * 2 + i % 2] =
          o < out && i < in ? w[(long)o * in + i] : (bf16_t)0;
}

void panel_linear_forward(const float* x, const float* panels, float* y, int rows, int in,
                          int out) {
#if defined(__AVX512F__)
  skinny::dispatch<PanelsFp32>(x, panels, y, rows, in, out);
#elif defined(TRIDENT_SKINNY_AVX2_FP32)
  avx2::panel_linear_forward(x, panels, y, rows, in, out);
#else
  (void)x, (void)panels, (void)y, (void)rows, (void)in, (void)out;
  throw std::logic_error("panel_linear_forward: built without AVX-512 or AVX2");
#endif
}

void panel_linear_forward_bf16(const bf16_t* x, const bf16_t* panels, float* y, int rows, int in,
                               int out) {
#if defined(__AVX512BF16__)
  skinny::dispatch<PanelsBf16>(x, panels, y, rows, in, out);
#elif defined(TRIDENT_SKINNY_AVX2_BF16)
  avx2::panel_linear_forward_bf16(x, panels, y, rows, in, out);
#else
  (void)x, (void)panels, (void)y, (void)rows, (void)in, (void)out;
  throw std::logic_error("panel_linear_forward_bf16: built without AVX512_BF16 or AVX2");
#endif
}

}  // namespace trident::kernels
