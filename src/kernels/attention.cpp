#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/dropout.h"
#include "kernels/fast_math.h"
#include "kernels/tile_gemm.h"

namespace trident::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Strided views of one (batch, head) inside the packed qkv / out tensors.
struct HeadView {
  long token_stride;  // floats between consecutive tokens
  long offset;        // first element of this head at token 0
};

HeadView qkv_view(const AttentionShape& s, int b, int h, int which) {
  long stride = 3L * s.heads * s.head_dim;
  return {stride, b * s.seq * stride + (long)which * s.heads * s.head_dim + (long)h * s.head_dim};
}

HeadView out_view(const AttentionShape& s, int b, int h) {
  long stride = (long)s.heads * s.head_dim;
  return {stride, b * s.seq * stride + (long)h * s.head_dim};
}

void gather(const float* src, HeadView v, int seq, int hd, float* dst) {
  for (int t = 0; t < seq; ++t) std::copy_n(src + v.offset + t * v.token_stride, hd, dst + t * hd);
}

void scatter(const float* src, HeadView v, int seq, int hd, float* dst) {
  for (int t = 0; t < seq; ++t) std::copy_n(src + t * hd, hd, dst + v.offset + t * v.token_stride);
}

// Number of keys in block [ks, ks + nk) visible to query row q (causal).
inline int visible_keys(int q, int ks, int nk) {
  return std::clamp(q - ks + 1, 0, nk);
}

// The dropout stream of one (sample, head); probability 0 when dropout is off.
struct HeadDropout {
  DropoutStream stream{};
  std::uint64_t head = 0;  // global head index
  int seq = 0;
  bool on() const { return stream.probability > 0.f; }
  // Scales row[0, n) (keys ks.. of query q) by keep / (1 - p).
  void apply(float* row, int q, int ks, int n, std::uint8_t* keep) const {
    dropout_keep_mask(stream, ((head * seq) + q) * (std::uint64_t)seq + ks, n, keep);
    const float scale = 1.f / (1.f - stream.probability);
#pragma omp simd
    for (int j = 0; j < n; ++j) row[j] = keep[j] ? row[j] * scale : 0.f;
  }
};

HeadDropout head_dropout(const AttentionDropout& d, const AttentionShape& s, int b, int h) {
  if (!d.active()) return {};
  return {{d.seed, d.site, (std::uint32_t)(d.first_sample + b), d.probability},
          (std::uint64_t)(d.head_offset + h),
          s.seq};
}

void forward_one_head(const AttentionShape& s, const float* q, const float* k, const float* v,
                      float* o, float* lse, float* scores, const HeadDropout& drop,
                      Precision precision, TileOperandCache& cache) {
  std::uint8_t keep[kBlockK];
  const int hd = s.head_dim;
  const float scale = 1.f / std::sqrt((float)hd);
  float row_max[kBlockQ], row_sum[kBlockQ];
  for (int qs = 0; qs < s.seq; qs += kBlockQ) {
    int nq = std::min(kBlockQ, s.seq - qs);
    std::fill_n(row_max, nq, kNegInf);
    std::fill_n(row_sum, nq, 0.f);
    std::fill_n(o + (long)qs * hd, (long)nq * hd, 0.f);
    for (int ks = 0; ks < qs + nq; ks += kBlockK) {
      int nk = std::min(kBlockK, qs + nq - ks);
      tile_gemm(precision, Trans::kNo, Trans::kYes, nq, nk, hd, scale, q + (long)qs * hd, hd,
                k + (long)ks * hd, hd, 0.f, scores, kBlockK, &cache);
      for (int i = 0; i < nq; ++i) {
        float* row = scores + i * kBlockK;
        int valid = visible_keys(qs + i, ks, nk);
        float block_max = kNegInf;
#pragma omp simd reduction(max : block_max)
        for (int j = 0; j < valid; ++j) block_max = std::max(block_max, row[j]);
        float new_max = std::max(row_max[i], block_max);
        float rescale = row_max[i] == kNegInf ? 0.f : std::exp(row_max[i] - new_max);
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < valid; ++j) {
          row[j] = fast_exp(row[j] - new_max);
          sum += row[j];
        }
        std::fill(row + valid, row + nk, 0.f);
        // The normaliser is the undropped softmax's; dropout scales what reaches V.
        if (drop.on()) drop.apply(row, qs + i, ks, valid, keep);
        row_sum[i] = row_sum[i] * rescale + sum;
        row_max[i] = new_max;
        float* orow = o + (long)(qs + i) * hd;
        for (int d = 0; d < hd; ++d) orow[d] *= rescale;
      }
      tile_gemm(precision, Trans::kNo, Trans::kNo, nq, hd, nk, 1.f, scores, kBlockK,
                v + (long)ks * hd, hd, 1.f, o + (long)qs * hd, hd, &cache);
    }
    for (int i = 0; i < nq; ++i) {
      float inv = 1.f / row_sum[i];
      float* orow = o + (long)(qs + i) * hd;
      for (int d = 0; d < hd; ++d) orow[d] *= inv;
      lse[qs + i] = row_max[i] + std::log(row_sum[i]);
    }
  }
}

struct BackwardBuffers {
  const float *q, *k, *v, *o, *dout, *lse;
  float *dq, *dk, *dv, *delta, *p, *dp;
};

void backward_one_head(const AttentionShape& s, const BackwardBuffers& x, const HeadDropout& drop,
                       Precision precision, TileOperandCache& cache) {
  std::uint8_t keep[kBlockK];
  float scaled_p[kBlockK];
  const int hd = s.head_dim;
  const float scale = 1.f / std::sqrt((float)hd);
  for (int t = 0; t < s.seq; ++t) {
    float acc = 0.f;
    for (int d = 0; d < hd; ++d) acc += x.dout[(long)t * hd + d] * x.o[(long)t * hd + d];
    x.delta[t] = acc;
  }
  std::fill_n(x.dq, (long)s.seq * hd, 0.f);
  std::fill_n(x.dk, (long)s.seq * hd, 0.f);
  std::fill_n(x.dv, (long)s.seq * hd, 0.f);
  for (int ks = 0; ks < s.seq; ks += kBlockK) {
    int nk = std::min(kBlockK, s.seq - ks);
    for (int qs = (ks / kBlockQ) * kBlockQ; qs < s.seq; qs += kBlockQ) {
      int nq = std::min(kBlockQ, s.seq - qs);
      const float* qi = x.q + (long)qs * hd;
      const float* doi = x.dout + (long)qs * hd;
      tile_gemm(precision, Trans::kNo, Trans::kYes, nq, nk, hd, scale, qi, hd, x.k + (long)ks * hd,
                hd, 0.f, x.p, kBlockK, &cache);
      tile_gemm(precision, Trans::kNo, Trans::kYes, nq, nk, hd, 1.f, doi, hd, x.v + (long)ks * hd,
                hd, 0.f, x.dp, kBlockK, &cache);
      for (int i = 0; i < nq; ++i) {
        float* prow = x.p + i * kBlockK;
        float* dprow = x.dp + i * kBlockK;
        int valid = visible_keys(qs + i, ks, nk);
        float row_lse = x.lse[qs + i], row_delta = x.delta[qs + i];
        if (drop.on()) {
          // With mask Z: O = (P*Z) V, so dV uses P*Z, dP = Z * (dO V^T), and
          // dS = P * (dP - rowsum(dO * O)) as without dropout.
#pragma omp simd
          for (int j = 0; j < valid; ++j) prow[j] = fast_exp(prow[j] - row_lse);
          std::copy_n(prow, valid, scaled_p);
          drop.apply(scaled_p, qs + i, ks, valid, keep);
          const float scale = 1.f / (1.f - drop.stream.probability);
#pragma omp simd
          for (int j = 0; j < valid; ++j) {
            dprow[j] = prow[j] * ((keep[j] ? dprow[j] * scale : 0.f) - row_delta);
            prow[j] = scaled_p[j];
          }
        } else {
#pragma omp simd
          for (int j = 0; j < valid; ++j) {
            prow[j] = fast_exp(prow[j] - row_lse);
            dprow[j] = prow[j] * (dprow[j] - row_delta);  // dS
          }
        }
        std::fill(prow + valid, prow + nk, 0.f);
        std::fill(dprow + valid, dprow + nk, 0.f);
      }
      tile_gemm(precision, Trans::kYes, Trans::kNo, nk, hd, nq, 1.f, x.p, kBlockK, doi, hd, 1.f,
                x.dv + (long)ks * hd, hd, &cache);
      tile_gemm(precision, Trans::kNo, Trans::kNo, nq, hd, nk, scale, x.dp, kBlockK,
                x.k + (long)ks * hd, hd, 1.f, x.dq + (long)qs * hd, hd, &cache);
      tile_gemm(precision, Trans::kYes, Trans::kNo, nk, hd, nq, scale, x.dp, kBlockK, qi, hd, 1.f,
                x.dk + (long)ks * hd, hd, &cache);
    }
  }
}

}  // namespace

void flash_attention_forward(const float* qkv, float* out, float* lse, const AttentionShape& s,
                             const AttentionDropout& dropout, Precision precision) {
  const long head_elems = (long)s.seq * s.head_dim;
#pragma omp parallel
  {
    std::vector<float> local(4 * head_elems + kBlockQ * kBlockK);
    float *q = local.data(), *k = q + head_elems, *v = k + head_elems, *o = v + head_elems;
    float* scores = o + head_elems;
    TileOperandCache cache;
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < s.batch * s.heads; ++bh) {
      int b = bh / s.heads, h = bh % s.heads;
      cache.clear();  // q, k, v (and dout) are refilled for this head
      gather(qkv, qkv_view(s, b, h, 0), s.seq, s.head_dim, q);
      gather(qkv, qkv_view(s, b, h, 1), s.seq, s.head_dim, k);
      gather(qkv, qkv_view(s, b, h, 2), s.seq, s.head_dim, v);
      forward_one_head(s, q, k, v, o, lse + (long)bh * s.seq, scores,
                       head_dropout(dropout, s, b, h), precision, cache);
      scatter(o, out_view(s, b, h), s.seq, s.head_dim, out);
    }
  }
}

void flash_attention_backward(const float* qkv, const float* out, const float* dout,
                              const float* lse, float* dqkv, const AttentionShape& s,
                              const AttentionDropout& dropout, Precision precision) {
  const long head_elems = (long)s.seq * s.head_dim;
#pragma omp parallel
  {
    std::vector<float> local(8 * head_elems + s.seq + 2 * kBlockQ * kBlockK);
    float* base = local.data();
    float *q = base, *k = q + head_elems, *v = k + head_elems, *o = v + head_elems;
    float *dout_h = o + head_elems, *dq = dout_h + head_elems, *dk = dq + head_elems;
    float *dv = dk + head_elems, *delta = dv + head_elems, *p = delta + s.seq;
    float* dp = p + kBlockQ * kBlockK;
    TileOperandCache cache;
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < s.batch * s.heads; ++bh) {
      int b = bh / s.heads, h = bh % s.heads;
      cache.clear();  // q, k, v (and dout) are refilled for this head
      gather(qkv, qkv_view(s, b, h, 0), s.seq, s.head_dim, q);
      gather(qkv, qkv_view(s, b, h, 1), s.seq, s.head_dim, k);
      gather(qkv, qkv_view(s, b, h, 2), s.seq, s.head_dim, v);
      gather(out, out_view(s, b, h), s.seq, s.head_dim, o);
      gather(dout, out_view(s, b, h), s.seq, s.head_dim, dout_h);
      backward_one_head(s, {q, k, v, o, dout_h, lse + (long)bh * s.seq, dq, dk, dv, delta, p, dp},
                        head_dropout(dropout, s, b, h), precision, cache);
      scatter(dq, qkv_view(s, b, h, 0), s.seq, s.head_dim, dqkv);
      scatter(dk, qkv_view(s, b, h, 1), s.seq, s.head_dim, dqkv);
      scatter(dv, qkv_view(s, b, h, 2), s.seq, s.head_dim, dqkv);
    }
  }
}

}  // namespace trident::kernels
