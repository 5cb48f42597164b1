#include "kernels/tile_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace trident::kernels {

namespace {

#if defined(__AVX512BF16__)

constexpr int kLanes = 16;  // fp32 lanes of a 512-bit register

// A in words of bf16 pairs (A(i, 2p) low, A(i, 2p + 1) high; odd k padded with 0), word
// (i, p) at out[i * row + p * pair]: op(A) = A is packed [m][pairs] (row = pairs, pair = 1),
// op(A) = a^T [pairs][m] (row = 1, pair = m), so both read their source rows and write
// their words contiguously.
struct PackedA {
  long row, pair;
};

PackedA pack_a(Trans t, int m, int k, const float* a, int lda, std::uint32_t* out) {
  const int pairs = (k + 1) / 2, width = 2 * pairs;
  if (t == Trans::kNo) {
    bf16_t* o = reinterpret_cast<bf16_t*>(out);
    if (k % 2)
      for (int i = 0; i < m; ++i) o[(long)i * width + k] = 0;
    for (int i = 0; i < m; ++i) {
      const float* row = a + (long)i * lda;
      bf16_t* dst = o + (long)i * width;
#pragma omp simd
      for (int kk = 0; kk < k; ++kk) dst[kk] = bf16_from_float(row[kk]);
    }
    return {pairs, 1};
  }
  for (int p = 0; p < pairs; ++p) {  // A(i, kk) = a[kk][i]: rows 2p and 2p + 1 of a, paired
    const float* lo = a + 2L * p * lda;
    const float* hi = lo + lda;
    std::uint32_t* dst = out + (long)p * m;
    if (2 * p + 1 < k) {
#pragma omp simd
      for (int i = 0; i < m; ++i)
        dst[i] = (std::uint32_t)bf16_from_float(lo[i]) | (std::uint32_t)bf16_from_float(hi[i])
                                                             << 16;
    } else {
#pragma omp simd
      for (int i = 0; i < m; ++i) dst[i] = bf16_from_float(lo[i]);
    }
  }
  return {1, m};
}

// 16 floats rounded to bf16 as bf16_from_float rounds (to nearest even, NaN made quiet), each
// in the high half of its lane.
inline __m512i round_to_bf16_high(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
  return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}

// The 8 words (bf16(x[2i]), bf16(x[2i + 1])) of 16 floats: in each 64-bit lane the even
// float's bf16 moved to the low half of the low dword, the odd one's kept high.
inline __m256i words_of_pairs(__m512 x) {
  const __m512i r = round_to_bf16_high(x);
  return _mm512_cvtepi64_epi32(_mm512_or_si512(_mm512_srli_epi32(r, 16), _mm512_srli_epi64(r, 32)));
}

// Words (bf16(x[2i]), bf16(x[2i + 1])) of 32 floats, zero past `count`: the pairs of a row.
inline __m512i pair_words(const float* x, int count) {
  const __mmask16 m0 = count >= 16 ? 0xffff : (__mmask16)((1u << std::max(count, 0)) - 1);
  const int rest = count - 16;
  const __mmask16 m1 = rest >= 16 ? 0xffff : (__mmask16)((1u << std::max(rest, 0)) - 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(words_of_pairs(_mm512_maskz_loadu_ps(m0, x))),
                            words_of_pairs(_mm512_maskz_loadu_ps(m1, x + 16)), 1);
}

// r[i] lane j <- r[j] lane i, for 16 rows of 16 dwords.
inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)  // within each 128-bit lane, r[i + c] is column c
    for (int j = 0; j < 2; ++j) {
      r[i + 2 * j] = _mm512_unpacklo_epi64(t[i + j], t[i + j + 2]);
      r[i + 2 * j + 1] = _mm512_unpackhi_epi64(t[i + j], t[i + j + 2]);
    }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
  }
}

// B = b^T (attention's K^T): word (p, j) is the pair p of row j of b, so 16 rows' pairs are
// rounded 32 floats at a time and transposed 16 x 16 in registers (not one 16-bit store per
// element at a stride of np words). np is a multiple of 16.
void pack_b_transposed(int k, int n, int np, const float* b, int ldb, std::uint32_t* out) {
  const int pairs = (k + 1) / 2;
  for (int j0 = 0; j0 < np; j0 += 16)
    for (int p0 = 0; p0 < pairs; p0 += 16) {
      __m512i r[16];
      for (int j = 0; j < 16; ++j)
        r[j] = j0 + j < n ? pair_words(b + (long)(j0 + j) * ldb + 2 * p0, k - 2 * p0)
                          : _mm512_setzero_si512();
      // Lane order after the transpose: r[i] is pair p0 + i, lanes j0..j0 + 15.
      transpose16(r);
      for (int i = 0; i < 16 && p0 + i < pairs; ++i)
        _mm512_storeu_si512(out + (long)(p0 + i) * np + j0, r[i]);
    }
}
// B = b (attention's V, dO, Q): word (p, j) pairs rows 2p and 2p + 1 of b at column j, so
// the two rows are rounded 16 columns at a time and merged into 16 words. Columns past n
// and a last odd row's partner are 0.
void pack_b_rows(int k, int n, int np, const float* b, int ldb, std::uint32_t* out) {
  const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
  for (int p = 0; p < (k + 1) / 2; ++p) {
    const float* even = b + 2L * p * ldb;
    const bool has_odd = 2 * p + 1 < k;
    for (int j = 0; j < np; j += 16) {
      const int left = n - j;
      const __mmask16 m = left >= 16 ? 0xffff : (__mmask16)((1u << std::max(left, 0)) - 1);
      const __m512i lo =
          _mm512_srli_epi32(round_to_bf16_high(_mm512_maskz_loadu_ps(m, even + j)), 16);
      const __m512i hi =
          has_odd
              ? _mm512_and_si512(round_to_bf16_high(_mm512_maskz_loadu_ps(m, even + ldb + j)), high)
              : _mm512_setzero_si512();
      _mm512_storeu_si512(out + (long)p * np + j, _mm512_or_si512(lo, hi));
    }
  }
}

// B as [pairs][np] words: pair p, column j = (B(2p, j), B(2p + 1, j)), the layout the
// dot-product instruction reads; rows past k and columns past n are 0.
void pack_b(Trans t, int k, int n, int np, const float* b, int ldb, TileWord* out) {
  if (t == Trans::kYes) return pack_b_transposed(k, n, np, b, ldb, out);
  pack_b_rows(k, n, np, b, ldb, out);
}

// C[m][n] = alpha * A B + beta * C, the product written straight into C (columns past n,
// the packing's padding, are never stored).
struct Output {
  float* c;
  int ldc, n;
  float alpha, beta;
};

// Rows [0, R) x column blocks [0, C) of 16, starting at column j0 of the output.
template <int R, int C>
void kernel(const std::uint32_t* a, PackedA sa, int pairs, const std::uint32_t* b, int np, int j0,
            const Output& out) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int p = 0; p < pairs; ++p) {
    __m512bh bv[C];
    for (int c = 0; c < C; ++c)
      bv[c] = (__m512bh)_mm512_loadu_si512(b + (long)p * np + j0 + c * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r * sa.row + p * sa.pair]);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, bv[c]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(out.alpha), beta = _mm512_set1_ps(out.beta);
  for (int c = 0; c < C; ++c) {
    const int left = out.n - (j0 + c * kLanes);
    const __mmask16 mask = left >= kLanes ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    for (int r = 0; r < R; ++r) {
      float* dst = out.c + (long)r * out.ldc + j0 + c * kLanes;
      __m512 v = _mm512_mul_ps(alpha, acc[r][c]);
      if (out.beta != 0.f) v = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(mask, dst), v);
      _mm512_mask_storeu_ps(dst, mask, v);
    }
  }
}

template <int R>
void row_block(const std::uint32_t* a, PackedA sa, int pairs, const std::uint32_t* b, int np,
               const Output& out) {
  for (int j = 0; j < np; j += 4 * kLanes) {
    switch (std::min(4, (np - j) / kLanes)) {
      case 4:
        kernel<R, 4>(a, sa, pairs, b, np, j, out);
        break;
      case 3:
        kernel<R, 3>(a, sa, pairs, b, np, j, out);
        break;
      case 2:
        kernel<R, 2>(a, sa, pairs, b, np, j, out);
        break;
      default:
        kernel<R, 1>(a, sa, pairs, b, np, j, out);
        break;
    }
  }
}

void multiply(int m, int pairs, int np, const std::uint32_t* a, PackedA sa, const std::uint32_t* b,
              Output out) {
  int i = 0;
  float* const c0 = out.c;
  // Six rows by four 16-lane columns is 24 sums in registers, four B vectors and one
  // broadcast: 10 loads per 24 dot products, against 8 per 16 with four rows.
  for (; i + 6 <= m; i += 6) {
    out.c = c0 + (long)i * out.ldc;
    row_block<6>(a + i * sa.row, sa, pairs, b, np, out);
  }
  for (; i + 4 <= m; i += 4) {
    out.c = c0 + (long)i * out.ldc;
    row_block<4>(a + i * sa.row, sa, pairs, b, np, out);
  }
  for (; i < m; ++i) {
    out.c = c0 + (long)i * out.ldc;
    row_block<1>(a + i * sa.row, sa, pairs, b, np, out);
  }
}

int padded_columns(int n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

std::size_t packed_b_size(int k, int n) {
  return (std::size_t)(k + 1) / 2 * padded_columns(n);
}

void pack_b(Trans t, int k, int n, const float* b, int ldb, TileWord* out) {
  pack_b(t, k, n, padded_columns(n), b, ldb, out);
}

void bf16_product(Trans trans_a, Trans /*b's, packed in*/, int m, int n, int k, float alpha,
                  const float* a, int lda, const TileWord* b, float beta, float* c, int ldc) {
  const int pairs = (k + 1) / 2;
  thread_local std::vector<std::uint32_t> packed_a;
  packed_a.resize((size_t)m * pairs);
  const PackedA sa = pack_a(trans_a, m, k, a, lda, packed_a.data());
  multiply(m, pairs, padded_columns(n), packed_a.data(), sa, b, {c, ldc, n, alpha, beta});
}
#else
// Without avx512_bf16 (AVX2 CPUs: Zen 3, Haswell) both operands are rounded to bf16 and kept
// in fp32, and sgemm multiplies them: a product of two bf16 values is exact in fp32, so this
// is the bf16 product with fp32 sums, in another order. On a Zen 3, one thread, 64 x 64 x 64
// tiles: sgemm reached 44-76 GFLOP/s where a register kernel on bf16 words (widened in
// registers) reached 28-34 with its packing.

// B as stored (k x n, or n x k for Trans::kYes), dense.
std::size_t packed_b_size(int k, int n) {
  return (std::size_t)k * n;
}

// rows x cols of x (leading dimension ld) rounded to bf16 values, dense.
void round_rows(const float* x, int rows, int cols, int ld, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* row = x + (long)r * ld;
    float* dst = out + (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) dst[c] = bf16_to_float(bf16_from_float(row[c]));
  }
}

void pack_b(Trans t, int k, int n, const float* b, int ldb, TileWord* out) {
  if (t == Trans::kNo) return round_rows(b, k, n, ldb, out);
  round_rows(b, n, k, ldb, out);
}

void bf16_product(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const TileWord* b, float beta, float* c, int ldc) {
  thread_local std::vector<float> rounded_a;
  rounded_a.resize((size_t)m * k);
  const bool a_rows = trans_a == Trans::kNo;
  round_rows(a, a_rows ? m : k, a_rows ? k : m, lda, rounded_a.data());
  gemm(trans_a, trans_b, m, n, k, alpha, rounded_a.data(), std::max(a_rows ? k : m, 1), b,
       std::max(trans_b == Trans::kNo ? n : k, 1), beta, c, ldc);
}
#endif

}  // namespace

void TileOperandCache::clear() {
  entries_.clear();
  words_.clear();
}

const TileWord* TileOperandCache::packed_b(Trans t, int k, int n, const float* b, int ldb) {
  for (const Entry& e : entries_)
    if (e.b == b && e.t == t && e.k == k && e.n == n && e.ldb == ldb)
      return words_.data() + e.offset;
  const std::size_t offset = words_.size();
  words_.resize(offset + packed_b_size(k, n));
  pack_b(t, k, n, b, ldb, words_.data() + offset);
  entries_.push_back({b, t, k, n, ldb, offset});
  return words_.data() + offset;
}

void tile_gemm(Precision precision, Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
               const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc,
               TileOperandCache* b_cache) {
  if (precision != Precision::kBf16) {
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (m == 0 || n == 0) return;
  thread_local std::vector<TileWord> packed_b;
  const TileWord* words;
  if (b_cache) {
    words = b_cache->packed_b(trans_b, k, n, b, ldb);
  } else {
    packed_b.resize(packed_b_size(k, n));
    pack_b(trans_b, k, n, b, ldb, packed_b.data());
    words = packed_b.data();
  }
  bf16_product(trans_a, trans_b, m, n, k, alpha, a, lda, words, beta, c, ldc);
}

}  // namespace trident::kernels
