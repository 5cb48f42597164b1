#include "kernels/cached_attention.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/fast_math.h"

namespace trident::kernels {

namespace {

inline float dot(const float* q, const float* k, int n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += q[i] * k[i];
  return s;
}

inline float dot(const float* q, const bf16_t* k, int n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += q[i] * bf16_to_float(k[i]);
  return s;
}

inline void axpy(float a, const float* v, float* out, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) out[i] += a * v[i];
}

inline void axpy(float a, const bf16_t* v, float* out, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) out[i] += a * bf16_to_float(v[i]);
}

// One query row of one head against keys/values [0, visible) of its slot.
template <class T>
void attend(const float* q, const T* keys, const T* values, int visible, int hd, float scale,
            float* scores, float* out) {
  float max = -INFINITY;
  for (int j = 0; j < visible; ++j) {
    scores[j] = scale * dot(q, keys + (long)j * hd, hd);
    max = std::max(max, scores[j]);
  }
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < visible; ++j) sum += scores[j] = fast_exp(scores[j] - max);
  std::fill_n(out, hd, 0.f);
  for (int j = 0; j < visible; ++j) axpy(scores[j], values + (long)j * hd, out, hd);
  const float inv = 1.f / sum;
  for (int i = 0; i < hd; ++i) out[i] *= inv;
}

#ifdef __AVX512F__
constexpr int kVectorLanes = 16;

// Vector form for head_dim = 16 * C (GPT-2's 64 and its kin): keys are taken 16 at a time,
// their 16 dot products summed into one vector by a transpose-and-add tree (not 16
// horizontal sums), exp is vectorised, and the output stays in registers over the values.
inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 load16(const bf16_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

// Lane t of the result: the sum of a[t]'s 16 lanes.
inline __m512 sum_each(__m512 a[16]) {
  __m512 b[8], c[4], d[2];
  for (int k = 0; k < 8; ++k)  // per 128-bit lane: a[2k] in lanes 0, 2; a[2k+1] in 1, 3
    b[k] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * k], a[2 * k + 1]),
                         _mm512_unpackhi_ps(a[2 * k], a[2 * k + 1]));
  for (int k = 0; k < 4; ++k) {  // per 128-bit lane: a[4k .. 4k + 3], one each
    const __m512d x = _mm512_castps_pd(b[2 * k]), y = _mm512_castps_pd(b[2 * k + 1]);
    c[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  for (int k = 0; k < 2; ++k)  // fold the four 128-bit lanes pairwise
    d[k] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * k], c[2 * k + 1], 0x88),
                         _mm512_shuffle_f32x4(c[2 * k], c[2 * k + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x88),
                       _mm512_shuffle_f32x4(d[0], d[1], 0xDD));
}

// One pass (online softmax): each block of 16 keys is followed at once by its 16 values, so
// a thread reads its keys and values as two concurrent streams. bf16 caches read at 0.91 of
// the read bandwidth this way against 0.81 with a pass over the keys and then the values
// (bench_rooflines, gpt2-small, 2048 positions); fp32 at ~0.70 either way.
template <int C, class T>
void attend_vector(const float* q_in, const T* keys, const T* values, int visible, float scale,
                   float* out) {
  constexpr int hd = 16 * C;
  __m512 q[C], acc[C];
  for (int c = 0; c < C; ++c) {
    q[c] = _mm512_mul_ps(_mm512_loadu_ps(q_in + 16 * c), _mm512_set1_ps(scale));
    acc[c] = _mm512_setzero_ps();
  }
  float max = -INFINITY, sum = 0.f;
  alignas(64) float p[16];
  for (int j = 0; j < visible; j += 16) {
    const int n = std::min(16, visible - j);
    __m512 dots[16];
    for (int t = 0; t < 16; ++t) {
      dots[t] = _mm512_setzero_ps();
      if (t < n)
        for (int c = 0; c < C; ++c)
          dots[t] = _mm512_fmadd_ps(q[c], load16(keys + (long)(j + t) * hd + 16 * c), dots[t]);
    }
    const __mmask16 valid = (__mmask16)((1u << n) - 1);
    const __m512 block = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid, sum_each(dots));
    const float block_max = _mm512_reduce_max_ps(block);
    if (block_max > max) {  // rescale what the earlier blocks summed
      const float r = max == -INFINITY ? 0.f : fast_exp(max - block_max);
      for (int c = 0; c < C; ++c) acc[c] = _mm512_mul_ps(acc[c], _mm512_set1_ps(r));
      sum *= r;
      max = block_max;
    }
    _mm512_store_ps(p, _mm512_sub_ps(block, _mm512_set1_ps(max)));
    float block_sum = 0.f;
#pragma omp simd reduction(+ : block_sum)
    for (int t = 0; t < 16; ++t) block_sum += p[t] = t < n ? fast_exp(p[t]) : 0.f;
    sum += block_sum;
    for (int t = 0; t < n; ++t) {
      const __m512 w = _mm512_set1_ps(p[t]);
      for (int c = 0; c < C; ++c)
        acc[c] = _mm512_fmadd_ps(w, load16(values + (long)(j + t) * hd + 16 * c), acc[c]);
    }
  }
  const __m512 inv = _mm512_set1_ps(1.f / sum);
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(acc[c], inv));
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kVectorLanes = 8;

// The same one pass for AVX2, head_dim = 8 * C, keys 8 at a time. Sixteen registers hold
// neither q nor the running sum of values for head_dim 64, so both stay in L1 (a fraction of
// the cache's bytes). On a Zen 3 (gpt2-small's 12 layers x 12 heads, 2048 positions):
//   bf16 caches: 17.5-19.5 GB/s against 12.8-14.6 in the scalar form's passes
//     (bench_rooflines, the forms alternated three times);
//   fp32 caches: 19.1-20.7 GB/s against 17.4-18.4, medians of 20 calls of each form
//     alternated in one process, three runs. (Before the build's -fno-trapping-math, this
//     form's exp loop ran one float at a time and fp32 read no faster than the scalar form.)
inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 load8(const bf16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// Lane t = the sum of d[t]'s lanes.
inline __m256 sum_each(const __m256 d[8]) {
  const __m256 ab = _mm256_hadd_ps(_mm256_hadd_ps(d[0], d[1]), _mm256_hadd_ps(d[2], d[3]));
  const __m256 ce = _mm256_hadd_ps(_mm256_hadd_ps(d[4], d[5]), _mm256_hadd_ps(d[6], d[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(ab, ce, 0x20), _mm256_permute2f128_ps(ab, ce, 0x31));
}

inline float max_of(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

template <int C, class T>
void attend_vector(const float* q_in, const T* keys, const T* values, int visible, float scale,
                   float* out) {
  constexpr int hd = 8 * C;
  alignas(32) float q[hd], acc[hd], p[8];
  for (int i = 0; i < hd; ++i) q[i] = q_in[i] * scale, acc[i] = 0.f;
  float max = -INFINITY, sum = 0.f;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int j = 0; j < visible; j += 8) {
    const int n = std::min(8, visible - j);
    __m256 dots[8];
    for (int t = 0; t < 8; ++t) {
      dots[t] = _mm256_setzero_ps();
      if (t < n)
        for (int c = 0; c < C; ++c)
          dots[t] = _mm256_fmadd_ps(_mm256_load_ps(q + 8 * c),
                                    load8(keys + (long)(j + t) * hd + 8 * c), dots[t]);
    }
    const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
    const __m256 block = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), sum_each(dots), valid);
    const float block_max = max_of(block);
    if (block_max > max) {  // rescale what the earlier blocks summed
      const float r = max == -INFINITY ? 0.f : fast_exp(max - block_max);
      for (int i = 0; i < hd; ++i) acc[i] *= r;
      sum *= r;
      max = block_max;
    }
    _mm256_store_ps(p, _mm256_sub_ps(block, _mm256_set1_ps(max)));
    float block_sum = 0.f;
#pragma omp simd reduction(+ : block_sum)
    for (int t = 0; t < 8; ++t) block_sum += p[t] = t < n ? fast_exp(p[t]) : 0.f;
    sum += block_sum;
    for (int c = 0; c < C; ++c) {
      __m256 a = _mm256_load_ps(acc + 8 * c);
      for (int t = 0; t < n; ++t)
        a = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), load8(values + (long)(j + t) * hd + 8 * c), a);
      _mm256_store_ps(acc + 8 * c, a);
    }
  }
  const float inv = 1.f / sum;
  for (int i = 0; i < hd; ++i) out[i] = acc[i] * inv;
}
#endif

// One row of one head: the vector form where it applies.
template <class T>
void attend_row(const float* q, const T* keys, const T* values, int visible, int hd, float scale,
                float* scores, float* out) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  switch (hd) {  // attend_vector<C> takes head_dim = C vectors
    case 32:
      return attend_vector<32 / kVectorLanes>(q, keys, values, visible, scale, out);
    case 64:
      return attend_vector<64 / kVectorLanes>(q, keys, values, visible, scale, out);
    case 128:
      return attend_vector<128 / kVectorLanes>(q, keys, values, visible, scale, out);
  }
#endif
  attend(q, keys, values, visible, hd, scale, scores, out);
}

template <class T>
void attention_rows(const float* qkv, const QkvLayout& l, int heads, float* out,
                    const KvLayerView& kv, const T* kbase, const T* vbase,
                    const CachedSegment* segs, int n_segs, int window) {
  const int hd = kv.head_dim;
  const float scale = 1.f / std::sqrt((float)hd);
  std::vector<std::pair<int, int>> items;  // (segment, row within it) x heads below
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].count; ++i) items.emplace_back(s, i);
  const long n = (long)items.size() * heads;
#pragma omp parallel
  {
    std::vector<float> scores(kv.positions);  // the scalar form's
    // One (row, head) at a time: batch-1 decode has only `heads` items, and chunks of several
    // left one thread with twice the other's heads (12 heads, chunks of 4: 8 against 4).
#pragma omp for schedule(dynamic, 1)
    for (long w = 0; w < n; ++w) {
      const auto [s, i] = items[w / heads];
      const int h = (int)(w % heads);
      const CachedSegment& seg = segs[s];
      const long row = seg.row + i;
      const int visible = seg.start + i + 1, first = window > 0 ? std::max(0, visible - window) : 0;
      const long head =
          seg.slot * kv.slot_stride() + (h / l.heads_per_kv) * kv.head_stride() + (long)first * hd;
      attend_row(qkv + row * l.q_stride + (long)h * hd, kbase + head, vbase + head, visible - first,
                 hd, scale, scores.data(), out + (row * heads + h) * (long)hd);
    }
  }
}

}  // namespace

void kv_cache_append(const float* qkv, const QkvLayout& l, const KvLayerView& kv,
                     const CachedSegment* segs, int n_segs) {
  const int hd = kv.head_dim;
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].count; ++i) {
      const long row = segs[s].row + i, pos = segs[s].start + i;
      for (int j = 0; j < kv.heads; ++j) {
        const long from = row * l.kv_stride + (long)(l.first_kv + j) * hd;
        const float* k = qkv + l.k_offset + from;
        const float* v = qkv + l.v_offset + from;
        const long at = segs[s].slot * kv.slot_stride() + j * kv.head_stride() + pos * hd;
        if (kv.k16) {
          for (int d = 0; d < hd; ++d) kv.k16[at + d] = bf16_from_float(k[d]);
          for (int d = 0; d < hd; ++d) kv.v16[at + d] = bf16_from_float(v[d]);
        } else {
          std::copy_n(k, hd, kv.k + at);
          std::copy_n(v, hd, kv.v + at);
        }
      }
    }
}

void kv_cache_append(const float* qkv, const KvLayerView& kv, const CachedSegment* segs,
                     int n_segs) {
  kv_cache_append(qkv, QkvLayout::packed(kv.heads, kv.head_dim), kv, segs, n_segs);
}

void cached_attention(const float* qkv, const QkvLayout& l, int heads, float* out,
                      const KvLayerView& kv, const CachedSegment* segs, int n_segs, int window) {
  if (kv.k16)
    attention_rows<bf16_t>(qkv, l, heads, out, kv, kv.k16, kv.v16, segs, n_segs, window);
  else
    attention_rows<float>(qkv, l, heads, out, kv, kv.k, kv.v, segs, n_segs, window);
}

void cached_attention(const float* qkv, float* out, const KvLayerView& kv,
                      const CachedSegment* segs, int n_segs) {
  cached_attention(qkv, QkvLayout::packed(kv.heads, kv.head_dim), kv.heads, out, kv, segs, n_segs);
}

}  // namespace trident::kernels
