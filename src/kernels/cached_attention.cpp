#include "kernels/cached_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace trident::kernels {

namespace {

inline float widen(bf16_t x) {
  std::uint32_t u = (std::uint32_t)x << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float dot(const float* q, const float* k, int n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += q[i] * k[i];
  return s;
}

inline float dot(const float* q, const bf16_t* k, int n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += q[i] * widen(k[i]);
  return s;
}

inline void axpy(float a, const float* v, float* out, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) out[i] += a * v[i];
}

inline void axpy(float a, const bf16_t* v, float* out, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) out[i] += a * widen(v[i]);
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
  for (int j = 0; j < visible; ++j) sum += scores[j] = std::exp(scores[j] - max);
  std::fill_n(out, hd, 0.f);
  for (int j = 0; j < visible; ++j) axpy(scores[j], values + (long)j * hd, out, hd);
  const float inv = 1.f / sum;
  for (int i = 0; i < hd; ++i) out[i] *= inv;
}

template <class T>
void attention_rows(const float* qkv, float* out, const KvLayerView& kv, const T* kbase,
                    const T* vbase, const CachedSegment* segs, int n_segs) {
  const int heads = kv.heads, hd = kv.head_dim;
  const float scale = 1.f / std::sqrt((float)hd);
  std::vector<std::pair<int, int>> items;  // (segment, row within it) x heads below
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].count; ++i) items.emplace_back(s, i);
  const long n = (long)items.size() * heads;
#pragma omp parallel
  {
    std::vector<float> scores(kv.positions);
#pragma omp for schedule(dynamic, 4)
    for (long w = 0; w < n; ++w) {
      const auto [s, i] = items[w / heads];
      const int h = (int)(w % heads);
      const CachedSegment& seg = segs[s];
      const long row = seg.row + i;
      const long head = seg.slot * kv.slot_stride() + h * kv.head_stride();
      attend(qkv + row * 3 * heads * hd + (long)h * hd, kbase + head, vbase + head,
             seg.start + i + 1, hd, scale, scores.data(), out + row * heads * hd + (long)h * hd);
    }
  }
}

}  // namespace

void kv_cache_append(const float* qkv, const KvLayerView& kv, const CachedSegment* segs,
                     int n_segs) {
  const int heads = kv.heads, hd = kv.head_dim;
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].count; ++i) {
      const long row = segs[s].row + i, pos = segs[s].start + i;
      for (int h = 0; h < heads; ++h) {
        const float* k = qkv + (row * 3 + 1) * heads * hd + (long)h * hd;
        const float* v = qkv + (row * 3 + 2) * heads * hd + (long)h * hd;
        const long at = segs[s].slot * kv.slot_stride() + h * kv.head_stride() + pos * hd;
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

void cached_attention(const float* qkv, float* out, const KvLayerView& kv,
                      const CachedSegment* segs, int n_segs) {
  if (kv.k16)
    attention_rows<bf16_t>(qkv, out, kv, kv.k16, kv.v16, segs, n_segs);
  else
    attention_rows<float>(qkv, out, kv, kv.k, kv.v, segs, n_segs);
}

}  // namespace trident::kernels
