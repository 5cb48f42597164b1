#include "kernels/attention.h"

#include <omp.h>

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

// One head's rows: token t of the sample at src + t * stride, copied into dst [seq, hd];
// with RoPE, rotated to position t (positions[t] when given) on the way (the dims past the
// table's 2 * half pass).
void load_head(const float* src, long stride, int seq, int hd, float* dst, const RopeTable* rope,
               const int* positions = nullptr) {
  if (!rope) {
    for (int t = 0; t < seq; ++t) std::copy_n(src + t * stride, hd, dst + (long)t * hd);
    return;
  }
  const int half = rope->half;
  for (int t = 0; t < seq; ++t) {
    const float* x = src + t * stride;
    float* y = dst + (long)t * hd;
    const size_t at = (size_t)(positions ? positions[t] : t) * half;
    const float* c = rope->cos.data() + at;
    const float* sn = rope->sin.data() + at;
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      y[i] = x[i] * c[i] - x[half + i] * sn[i];
      y[half + i] = x[half + i] * c[i] + x[i] * sn[i];
    }
    std::copy(x + 2 * half, x + hd, y + 2 * half);
  }
}

// The transpose: rows [t0, t0 + count) of src ([count, hd]) to token t at dst + t * stride,
// rotated back from position t (the inverse rotation is RoPE's backward).
void store_rows(const float* src, int t0, int count, int hd, float* dst, long stride,
                const RopeTable* rope, const int* positions = nullptr) {
  if (!rope) {
    for (int i = 0; i < count; ++i)
      std::copy_n(src + (long)i * hd, hd, dst + (long)(t0 + i) * stride);
    return;
  }
  const int half = rope->half;
  for (int i = 0; i < count; ++i) {
    const int t = t0 + i;
    const float* x = src + (long)i * hd;
    float* y = dst + t * stride;
    const size_t at = (size_t)(positions ? positions[t] : t) * half;
    const float* c = rope->cos.data() + at;
    const float* sn = rope->sin.data() + at;
#pragma omp simd
    for (int j = 0; j < half; ++j) {
      y[j] = x[j] * c[j] + x[half + j] * sn[j];
      y[half + j] = x[half + j] * c[j] - x[j] * sn[j];
    }
    std::copy(x + 2 * half, x + hd, y + 2 * half);
  }
}

// The work of a call: units of (sample, key/value head), that head's query heads one after
// another (its k and v loaded, and in bf16 packed, once for them, and backward summing their
// d k and d v in place), or of (sample, query head) when there are too few groups to share
// among the threads evenly.
struct WorkUnits {
  bool by_group;
  int count, n_kv;
  int heads, heads_per_kv;
  // Sample and query heads [h0, h1) of unit u.
  void get(int u, int& b, int& h0, int& h1) const {
    if (by_group) {
      b = u / n_kv, h0 = (u % n_kv) * heads_per_kv, h1 = std::min(heads, h0 + heads_per_kv);
    } else {
      b = u / heads, h0 = u % heads, h1 = h0 + 1;
    }
  }
};

WorkUnits work_units(const QkvLayout& l, const AttentionShape& s) {
  const int n_kv = kv_heads_read(l, s.heads), groups = s.batch * n_kv;
  const int threads = omp_get_max_threads();
  const bool by_group = l.heads_per_kv == 1 || groups % threads == 0 || groups >= 4 * threads;
  return {by_group, by_group ? groups : s.batch * s.heads, n_kv, s.heads, l.heads_per_kv};
}

// One sample's mask on a run of query rows against a run of key rows, each run at consecutive
// global positions (q0 + i for query row i, k0 + j for key row j; both 0 on the whole sequence,
// context parallelism's chunks elsewhere): causal, within the last `window` positions when
// window > 0, and within the query's document when doc_start is given.
struct SampleMask {
  int q_rows, window;
  const int* doc_start;  // of this sample's query rows (global positions), or null
  int q0 = 0, k0 = 0;
  // The global position of the first key query row q sees.
  int first_key(int q) const {
    int first = window > 0 ? std::max(0, q0 + q - window + 1) : 0;
    return doc_start ? std::max(first, doc_start[q]) : first;
  }
};

SampleMask sample_mask(const AttentionShape& s, int b) {
  return {s.seq, s.window, s.doc_start ? s.doc_start + (long)b * s.seq : nullptr};
}

// The keys [lo, hi) of block [ks, ks + nk) (offsets in it) that query row q sees.
struct KeySpan {
  int lo, hi;
};
inline KeySpan visible_keys(const SampleMask& m, int q, int ks, int nk) {
  const int hi = std::clamp(m.q0 + q - m.k0 - ks + 1, 0, nk);
  const int lo = std::clamp(m.first_key(q) - m.k0 - ks, 0, hi);
  return {lo, hi};
}

// The first key block a query block starting at qs needs (a multiple of kBlockK, so the
// tiles are the ones a full causal pass would take): the block's first query sees the
// earliest key, as neither the window nor doc_start moves back.
inline int first_key_block(const SampleMask& m, int qs) {
  return std::max(0, m.first_key(qs) - m.k0) / kBlockK * kBlockK;
}

// One past the last key row (of k_rows) a query block [qs, qs + nq) sees.
inline int key_end(const SampleMask& m, int qs, int nq, int k_rows) {
  return std::clamp(m.q0 + qs + nq - m.k0, 0, k_rows);
}

// The first query row that sees key row ks: the one at its position or after.
inline int first_query(const SampleMask& m, int ks) {
  return std::clamp(m.k0 + ks - m.q0, 0, m.q_rows);
}

// One past the last query that sees a key of block [ks, ks + nk).
inline int query_end(const SampleMask& m, int ks, int nk) {
  const int last_key = m.k0 + ks + nk - 1;  // global
  int end = m.window > 0 ? std::clamp(last_key + m.window - m.q0, 0, m.q_rows) : m.q_rows;
  if (m.doc_start) {  // the queries whose document starts at or before the block's last key
    const int from = std::min(first_query(m, ks), end);
    end = (int)(std::upper_bound(m.doc_start + from, m.doc_start + end, last_key) - m.doc_start);
  }
  return end;
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

// seq: the whole sequence's length (masks are keyed by global query and key positions).
HeadDropout head_dropout(const AttentionDropout& d, int seq, int b, int h) {
  if (!d.active()) return {};
  return {{d.seed, d.site, (std::uint32_t)(d.first_sample + b), d.probability},
          (std::uint64_t)(d.head_offset + h),
          seq};
}

// A run of one key / value head's rows: k and v [rows, hd], row j at global position k0 + j.
struct KeyRun {
  const float *k, *v;
  int rows, k0;
};

// The online softmax's running max and sum of a query block's rows.
struct RowStats {
  float max[kBlockQ], sum[kBlockQ];
};

// The visible tiles of one key run against the query block [qs, qs + nq), merged into the
// block's unnormalised output o (its rows qs on) and statistics.
void forward_key_run(int hd, SampleMask mask, const KeyRun& run, const float* q, int qs, int nq,
                     float* o, RowStats& st, float* scores, const HeadDropout& drop,
                     Precision precision, TileOperandCache& cache) {
  std::uint8_t keep[kBlockK];
  const float scale = 1.f / std::sqrt((float)hd);
  mask.k0 = run.k0;
  const int end = key_end(mask, qs, nq, run.rows);
  for (int ks = first_key_block(mask, qs); ks < end; ks += kBlockK) {
    int nk = std::min(kBlockK, end - ks);
    tile_gemm(precision, Trans::kNo, Trans::kYes, nq, nk, hd, scale, q + (long)qs * hd, hd,
              run.k + (long)ks * hd, hd, 0.f, scores, kBlockK, &cache);
    for (int i = 0; i < nq; ++i) {
      float* row = scores + i * kBlockK;
      const auto [lo, hi] = visible_keys(mask, qs + i, ks, nk);
      float block_max = kNegInf;
      // (not std::max: under omp simd its reference arguments keep GCC from vectorising)
#pragma omp simd reduction(max : block_max)
      for (int j = lo; j < hi; ++j) block_max = row[j] > block_max ? row[j] : block_max;
      float new_max = std::max(st.max[i], block_max);
      if (new_max == kNegInf) {  // no key of this row in the block (an earlier document's)
        std::fill(row, row + nk, 0.f);
        continue;
      }
      float rescale = st.max[i] == kNegInf ? 0.f : std::exp(st.max[i] - new_max);
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int j = lo; j < hi; ++j) {
        row[j] = fast_exp(row[j] - new_max);
        sum += row[j];
      }
      std::fill(row, row + lo, 0.f);
      std::fill(row + hi, row + nk, 0.f);
      // The normaliser is the undropped softmax's; dropout scales what reaches V.
      if (drop.on()) drop.apply(row + lo, mask.q0 + qs + i, run.k0 + ks + lo, hi - lo, keep);
      st.sum[i] = st.sum[i] * rescale + sum;
      st.max[i] = new_max;
      float* orow = o + (long)(qs + i) * hd;
      for (int d = 0; d < hd; ++d) orow[d] *= rescale;
    }
    tile_gemm(precision, Trans::kNo, Trans::kNo, nq, hd, nk, 1.f, scores, kBlockK,
              run.v + (long)ks * hd, hd, 1.f, o + (long)qs * hd, hd, &cache);
  }
}

// One head's query rows (mask.q_rows of them) against the key runs: o [q_rows, hd] and lse
// overwritten. A row that sees no key (a context-parallel block wholly in its future) gets
// o = 0 and lse = -inf, which merge as "no keys here".
void forward_one_head(int hd, const SampleMask& mask, const float* q, const KeyRun* runs,
                      int n_runs, float* o, float* lse, float* scores, const HeadDropout& drop,
                      Precision precision, TileOperandCache& cache) {
  RowStats st;
  for (int qs = 0; qs < mask.q_rows; qs += kBlockQ) {
    int nq = std::min(kBlockQ, mask.q_rows - qs);
    std::fill_n(st.max, nq, kNegInf);
    std::fill_n(st.sum, nq, 0.f);
    std::fill_n(o + (long)qs * hd, (long)nq * hd, 0.f);
    for (int r = 0; r < n_runs; ++r)
      forward_key_run(hd, mask, runs[r], q, qs, nq, o, st, scores, drop, precision, cache);
    for (int i = 0; i < nq; ++i) {
      if (st.sum[i] == 0.f) {
        lse[qs + i] = kNegInf;
        continue;
      }
      float inv = 1.f / st.sum[i];
      float* orow = o + (long)(qs + i) * hd;
      for (int d = 0; d < hd; ++d) orow[d] *= inv;
      lse[qs + i] = st.max[i] + std::log(st.sum[i]);
    }
  }
}

struct BackwardBuffers {
  const float *q, *k, *v, *dout, *lse, *delta;
  float *dq, *dk, *dv, *p, *dp;
};

// delta[t] = rowsum(dout * o) of one head's rows (the softmax backward's correction term).
void row_delta(const float* dout, const float* o, int rows, int hd, float* delta) {
  for (int t = 0; t < rows; ++t) {
    float acc = 0.f;
    for (int d = 0; d < hd; ++d) acc += dout[(long)t * hd + d] * o[(long)t * hd + d];
    delta[t] = acc;
  }
}

// One head's query rows (mask.q_rows, from global position mask.q0) against one run of
// k_rows keys (from mask.k0), with the final lse and delta: dq, dk and dv accumulate (a
// group's heads sum into dk and dv). kv_cache packs k and v (kept across a group's heads),
// qo_cache this head's q and dout.
void backward_one_head(int hd, const SampleMask& mask, int k_rows, const BackwardBuffers& x,
                       const HeadDropout& drop, Precision precision, TileOperandCache& kv_cache,
                       TileOperandCache& qo_cache) {
  std::uint8_t keep[kBlockK];
  float scaled_p[kBlockK];
  const float scale = 1.f / std::sqrt((float)hd);
  for (int ks = 0; ks < k_rows; ks += kBlockK) {
    int nk = std::min(kBlockK, k_rows - ks);
    const int q_end = query_end(mask, ks, nk);
    for (int qs = first_query(mask, ks) / kBlockQ * kBlockQ; qs < q_end; qs += kBlockQ) {
      int nq = std::min(kBlockQ, mask.q_rows - qs);
      const float* qi = x.q + (long)qs * hd;
      const float* doi = x.dout + (long)qs * hd;
      tile_gemm(precision, Trans::kNo, Trans::kYes, nq, nk, hd, scale, qi, hd, x.k + (long)ks * hd,
                hd, 0.f, x.p, kBlockK, &kv_cache);
      tile_gemm(precision, Trans::kNo, Trans::kYes, nq, nk, hd, 1.f, doi, hd, x.v + (long)ks * hd,
                hd, 0.f, x.dp, kBlockK, &kv_cache);
      for (int i = 0; i < nq; ++i) {
        const auto [lo, hi] = visible_keys(mask, qs + i, ks, nk);
        std::fill(x.p + i * kBlockK, x.p + i * kBlockK + lo, 0.f);
        std::fill(x.dp + i * kBlockK, x.dp + i * kBlockK + lo, 0.f);
        // The row's visible keys from here on: [0, valid) of prow, dprow.
        float* prow = x.p + i * kBlockK + lo;
        float* dprow = x.dp + i * kBlockK + lo;
        const int valid = hi - lo, rest = nk - hi;
        float row_lse = x.lse[qs + i], row_delta = x.delta[qs + i];
        if (drop.on()) {
          // With mask Z: O = (P*Z) V, so dV uses P*Z, dP = Z * (dO V^T), and
          // dS = P * (dP - rowsum(dO * O)) as without dropout.
#pragma omp simd
          for (int j = 0; j < valid; ++j) prow[j] = fast_exp(prow[j] - row_lse);
          std::copy_n(prow, valid, scaled_p);
          drop.apply(scaled_p, mask.q0 + qs + i, mask.k0 + ks + lo, valid, keep);
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
        std::fill_n(prow + valid, rest, 0.f);
        std::fill_n(dprow + valid, rest, 0.f);
      }
      tile_gemm(precision, Trans::kYes, Trans::kNo, nk, hd, nq, 1.f, x.p, kBlockK, doi, hd, 1.f,
                x.dv + (long)ks * hd, hd, &qo_cache);
      tile_gemm(precision, Trans::kNo, Trans::kNo, nq, hd, nk, scale, x.dp, kBlockK,
                x.k + (long)ks * hd, hd, 1.f, x.dq + (long)qs * hd, hd, &kv_cache);
      tile_gemm(precision, Trans::kYes, Trans::kNo, nk, hd, nq, scale, x.dp, kBlockK, qi, hd, 1.f,
                x.dk + (long)ks * hd, hd, &qo_cache);
    }
  }
}

}  // namespace

long attention_tiles(const AttentionShape& s) {
  long tiles = 0;
  for (int b = 0; b < s.batch; ++b) {
    const SampleMask mask = sample_mask(s, b);
    for (int qs = 0; qs < s.seq; qs += kBlockQ) {
      const int nq = std::min(kBlockQ, s.seq - qs);
      for (int ks = first_key_block(mask, qs); ks < qs + nq; ks += kBlockK) ++tiles;
    }
  }
  return tiles;
}

QkvLayout QkvLayout::packed(int heads, int head_dim) {
  const long hd = (long)heads * head_dim;
  return {3 * hd, 3 * hd, hd, 2 * hd, heads, 1, 0};
}

int kv_heads_read(const QkvLayout& l, int heads) {
  return (heads - 1) / l.heads_per_kv + 1;
}

void zero_unread_kv_grads(float* dqkv, const QkvLayout& l, int heads, long rows, int hd) {
  const int kv_first = l.first_kv, kv_end = l.first_kv + kv_heads_read(l, heads);
  if (kv_first == 0 && kv_end >= l.kv_heads) return;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r)
    for (int j = 0; j < l.kv_heads; ++j)
      if (j < kv_first || j >= kv_end) {
        std::fill_n(dqkv + l.k_offset + r * l.kv_stride + (long)j * hd, hd, 0.f);
        std::fill_n(dqkv + l.v_offset + r * l.kv_stride + (long)j * hd, hd, 0.f);
      }
}

void flash_attention_forward(const float* qkv, float* out, float* lse, const AttentionShape& s,
                             const AttentionDropout& dropout, Precision precision) {
  flash_attention_forward(qkv, QkvLayout::packed(s.heads, s.head_dim), out, lse, s, dropout,
                          precision, nullptr);
}

void flash_attention_backward(const float* qkv, const float* out, const float* dout,
                              const float* lse, float* dqkv, const AttentionShape& s,
                              const AttentionDropout& dropout, Precision precision) {
  flash_attention_backward(qkv, QkvLayout::packed(s.heads, s.head_dim), out, dout, lse, dqkv, s,
                           dropout, precision, nullptr);
}

void flash_attention_forward(const float* qkv, const QkvLayout& l, float* out, float* lse,
                             const AttentionShape& s, const AttentionDropout& dropout,
                             Precision precision, const RopeTable* rope) {
  const int hd = s.head_dim;
  const long head_elems = (long)s.seq * hd, out_stride = (long)s.heads * hd;
  const WorkUnits units = work_units(l, s);
#pragma omp parallel
  {
    std::vector<float> local(4 * head_elems + kBlockQ * kBlockK);
    float *q = local.data(), *k = q + head_elems, *v = k + head_elems, *o = v + head_elems;
    float* scores = o + head_elems;
    TileOperandCache cache;  // k and v, packed once for the unit's heads
#pragma omp for schedule(dynamic)
    for (int u = 0; u < units.count; ++u) {
      int b, h0, h1;
      units.get(u, b, h0, h1);
      const long row0 = (long)b * s.seq;
      const long kv = row0 * l.kv_stride + (long)l.kv_of(h0) * hd;
      cache.clear();
      const int* positions = s.positions ? s.positions + row0 : nullptr;
      load_head(qkv + l.k_offset + kv, l.kv_stride, s.seq, hd, k, rope, positions);
      load_head(qkv + l.v_offset + kv, l.kv_stride, s.seq, hd, v, nullptr);
      for (int h = h0; h < h1; ++h) {
        load_head(qkv + row0 * l.q_stride + (long)h * hd, l.q_stride, s.seq, hd, q, rope,
                  positions);
        const KeyRun keys{k, v, s.seq, 0};
        forward_one_head(hd, sample_mask(s, b), q, &keys, 1, o,
                         lse + ((long)b * s.heads + h) * s.seq, scores,
                         head_dropout(dropout, s.seq, b, h), precision, cache);
        store_rows(o, 0, s.seq, hd, out + row0 * out_stride + (long)h * hd, out_stride, nullptr);
      }
    }
  }
}

void flash_attention_backward(const float* qkv, const QkvLayout& l, const float* out,
                              const float* dout, const float* lse, float* dqkv,
                              const AttentionShape& s, const AttentionDropout& dropout,
                              Precision precision, const RopeTable* rope) {
  const int hd = s.head_dim;
  const long head_elems = (long)s.seq * hd, out_stride = (long)s.heads * hd;
  const long rows = (long)s.batch * s.seq;
  const WorkUnits units = work_units(l, s);
  zero_unread_kv_grads(dqkv, l, s.heads, rows, hd);
  // Units of one query head of a group: each head's d k and d v go here, [sample, head, k|v],
  // and are summed into their group in head order below (the result does not depend on the
  // thread count).
  const bool spill = !units.by_group;
  std::vector<float> spilled(spill ? 2 * (size_t)s.batch * s.heads * head_elems : 0);
#pragma omp parallel
  {
    std::vector<float> local(8 * head_elems + s.seq + 2 * kBlockQ * kBlockK);
    float* base = local.data();
    float *q = base, *k = q + head_elems, *v = k + head_elems, *o = v + head_elems;
    float *dout_h = o + head_elems, *dq = dout_h + head_elems, *dk = dq + head_elems;
    float *dv = dk + head_elems, *delta = dv + head_elems, *p = delta + s.seq;
    float* dp = p + kBlockQ * kBlockK;
    TileOperandCache kv_cache, qo_cache;
#pragma omp for schedule(dynamic)
    for (int u = 0; u < units.count; ++u) {
      int b, h0, h1;
      units.get(u, b, h0, h1);
      const long row0 = (long)b * s.seq;
      const long kv = row0 * l.kv_stride + (long)l.kv_of(h0) * hd;
      kv_cache.clear();
      const int* positions = s.positions ? s.positions + row0 : nullptr;
      load_head(qkv + l.k_offset + kv, l.kv_stride, s.seq, hd, k, rope, positions);
      load_head(qkv + l.v_offset + kv, l.kv_stride, s.seq, hd, v, nullptr);
      std::fill_n(dk, head_elems, 0.f);
      std::fill_n(dv, head_elems, 0.f);
      for (int h = h0; h < h1; ++h) {
        const long qh = row0 * l.q_stride + (long)h * hd, oh = row0 * out_stride + (long)h * hd;
        qo_cache.clear();
        load_head(qkv + qh, l.q_stride, s.seq, hd, q, rope, positions);
        load_head(out + oh, out_stride, s.seq, hd, o, nullptr);
        load_head(dout + oh, out_stride, s.seq, hd, dout_h, nullptr);
        const float* lse_h = lse + ((long)b * s.heads + h) * s.seq;
        row_delta(dout_h, o, s.seq, hd, delta);
        std::fill_n(dq, head_elems, 0.f);
        backward_one_head(hd, sample_mask(s, b), s.seq,
                          {q, k, v, dout_h, lse_h, delta, dq, dk, dv, p, dp},
                          head_dropout(dropout, s.seq, b, h), precision, kv_cache, qo_cache);
        store_rows(dq, 0, s.seq, hd, dqkv + qh, l.q_stride, rope, positions);
      }
      if (spill) {
        float* slot = spilled.data() + 2 * ((size_t)b * s.heads + h0) * head_elems;
        std::copy_n(dk, head_elems, slot);
        std::copy_n(dv, head_elems, slot + head_elems);
      } else {
        store_rows(dk, 0, s.seq, hd, dqkv + l.k_offset + kv, l.kv_stride, rope, positions);
        store_rows(dv, 0, s.seq, hd, dqkv + l.v_offset + kv, l.kv_stride, nullptr);
      }
    }
  }
  if (!spill) return;
  // Each (sample, group, block of kBlockQ tokens): its heads' d k and d v summed in order.
  const int blocks = (s.seq + kBlockQ - 1) / kBlockQ;
#pragma omp parallel
  {
    std::vector<float> sum(2L * kBlockQ * hd);
#pragma omp for schedule(static)
    for (int w = 0; w < s.batch * units.n_kv * blocks; ++w) {
      const int b = w / (units.n_kv * blocks), j = w / blocks % units.n_kv;
      const int t0 = (w % blocks) * kBlockQ, n = std::min(kBlockQ, s.seq - t0);
      const int h0 = j * l.heads_per_kv, h1 = std::min(s.heads, h0 + l.heads_per_kv);
      for (int which = 0; which < 2; ++which) {
        float* acc = sum.data() + (long)which * kBlockQ * hd;
        std::fill_n(acc, (long)n * hd, 0.f);
        for (int h = h0; h < h1; ++h) {
          const float* src =
              spilled.data() + (2 * ((size_t)b * s.heads + h) + which) * head_elems + (long)t0 * hd;
#pragma omp simd
          for (long i = 0; i < (long)n * hd; ++i) acc[i] += src[i];
        }
        const long kv = (long)b * s.seq * l.kv_stride + (long)(l.first_kv + j) * hd;
        store_rows(acc, t0, n, hd, dqkv + (which ? l.v_offset : l.k_offset) + kv, l.kv_stride,
                   which ? nullptr : rope, s.positions ? s.positions + (long)b * s.seq : nullptr);
      }
    }
  }
}

// ---- Blocks of context parallelism ----

void gather_heads(const float* src, long stride, int batch, int seq, int heads, int hd, float* dst,
                  const RopeTable* rope, const int* positions) {
#pragma omp parallel for schedule(static)
  for (int u = 0; u < batch * heads; ++u) {
    const int b = u / heads, h = u % heads;
    load_head(src + (long)b * seq * stride + (long)h * hd, stride, seq, hd,
              dst + (long)u * seq * hd, rope, positions ? positions + (long)b * seq : nullptr);
  }
}

void scatter_heads(const float* src, int batch, int seq, int heads, int hd, float* dst, long stride,
                   const RopeTable* rope, const int* positions) {
#pragma omp parallel for schedule(static)
  for (int u = 0; u < batch * heads; ++u) {
    const int b = u / heads, h = u % heads;
    store_rows(src + (long)u * seq * hd, 0, seq, hd, dst + (long)b * seq * stride + (long)h * hd,
               stride, rope, positions ? positions + (long)b * seq : nullptr);
  }
}

namespace {

// The mask of sample b's query run qr against keys from global position k0.
SampleMask run_mask(const AttentionBlock& blk, int b, const PositionRun& qr, int k0) {
  const int* doc = blk.doc_start ? blk.doc_start + (long)b * blk.q_rows + qr.row : nullptr;
  return {qr.count, blk.window, doc, qr.pos, k0};
}

}  // namespace

void attention_block_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                             const AttentionBlock& blk, const AttentionDropout& dropout,
                             Precision precision) {
  const int hd = blk.head_dim, n_kv = (blk.heads - 1) / blk.heads_per_kv + 1;
  const long q_elems = (long)blk.q_rows * hd, kv_elems = (long)blk.kv_rows * hd;
#pragma omp parallel
  {
    std::vector<float> scores(kBlockQ * kBlockK);
    std::vector<KeyRun> runs(blk.kv_runs.size());
    TileOperandCache cache;  // the group's k and v, packed once for its heads
#pragma omp for schedule(dynamic)
    for (int u = 0; u < blk.batch * n_kv; ++u) {  // (sample, key / value head)
      const int b = u / n_kv;
      cache.clear();
      for (size_t r = 0; r < runs.size(); ++r) {
        const PositionRun& kr = blk.kv_runs[r];
        const long at = u * kv_elems + (long)kr.row * hd;
        runs[r] = {k + at, v + at, kr.count, kr.pos};
      }
      const int h0 = (u % n_kv) * blk.heads_per_kv, h1 = std::min(blk.heads, h0 + blk.heads_per_kv);
      for (int h = h0; h < h1; ++h) {
        const long qh = (long)b * blk.heads + h;
        const HeadDropout drop = head_dropout(dropout, blk.seq, b, h);
        for (const PositionRun& qr : blk.q_runs)
          forward_one_head(hd, run_mask(blk, b, qr, 0), q + qh * q_elems + (long)qr.row * hd,
                           runs.data(), (int)runs.size(), out + qh * q_elems + (long)qr.row * hd,
                           lse + qh * blk.q_rows + qr.row, scores.data(), drop, precision, cache);
      }
    }
  }
}

void attention_merge(float* out, float* lse, const float* part_out, const float* part_lse,
                     long rows, int hd) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    if (part_lse[r] == kNegInf) continue;  // the block held no key of this row
    float* o = out + r * hd;
    const float* po = part_out + r * hd;
    if (lse[r] == kNegInf) {
      std::copy_n(po, hd, o);
      lse[r] = part_lse[r];
      continue;
    }
    const float top = std::max(lse[r], part_lse[r]);
    const float wa = std::exp(lse[r] - top), wb = std::exp(part_lse[r] - top), sum = wa + wb;
    for (int d = 0; d < hd; ++d) o[d] = (o[d] * wa + po[d] * wb) / sum;
    lse[r] = top + std::log(sum);
  }
}

void attention_row_delta(const float* out, const float* dout, long rows, int hd, float* delta) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) row_delta(dout + r * hd, out + r * hd, 1, hd, delta + r);
}

void attention_block_backward(const float* q, const float* k, const float* v, const float* dout,
                              const float* lse, const float* delta, float* dq, float* dk, float* dv,
                              const AttentionBlock& blk, const AttentionDropout& dropout,
                              Precision precision) {
  const int hd = blk.head_dim, n_kv = (blk.heads - 1) / blk.heads_per_kv + 1;
  const long q_elems = (long)blk.q_rows * hd, kv_elems = (long)blk.kv_rows * hd;
#pragma omp parallel
  {
    std::vector<float> tiles(2 * kBlockQ * kBlockK);
    TileOperandCache kv_cache, qo_cache;
#pragma omp for schedule(dynamic)
    for (int u = 0; u < blk.batch * n_kv; ++u) {  // (sample, key / value head)
      const int b = u / n_kv;
      kv_cache.clear();
      const int h0 = (u % n_kv) * blk.heads_per_kv, h1 = std::min(blk.heads, h0 + blk.heads_per_kv);
      for (int h = h0; h < h1; ++h) {
        const long qh = (long)b * blk.heads + h;
        const HeadDropout drop = head_dropout(dropout, blk.seq, b, h);
        qo_cache.clear();
        for (const PositionRun& qr : blk.q_runs)
          for (const PositionRun& kr : blk.kv_runs) {
            const long qa = qh * q_elems + (long)qr.row * hd, ka = u * kv_elems + (long)kr.row * hd;
            const long row = qh * blk.q_rows + qr.row;
            const BackwardBuffers x{q + qa,
                                    k + ka,
                                    v + ka,
                                    dout + qa,
                                    lse + row,
                                    delta + row,
                                    dq + qa,
                                    dk + ka,
                                    dv + ka,
                                    tiles.data(),
                                    tiles.data() + kBlockQ * kBlockK};
            backward_one_head(hd, run_mask(blk, b, qr, kr.pos), kr.count, x, drop, precision,
                              kv_cache, qo_cache);
          }
      }
    }
  }
}

}  // namespace trident::kernels
