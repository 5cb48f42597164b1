#include "kernels/moe_permute.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trident::kernels {

namespace {
// Each expert's rows padded to pad_to: offsets moved, pad rows marked -1 after the kept.
void pad_experts(MoePermutation& p, long pad_to) {
  const int experts = p.experts;
  std::vector<int> source(pad_to * experts, -1), slot(pad_to * experts, -1);
  for (int e = 0; e < experts; ++e) {
    if (p.rows_of(e) > pad_to)
      throw std::logic_error("moe permutation: expert " + std::to_string(e) + " keeps " +
                             std::to_string(p.rows_of(e)) + " rows, more than its capacity " +
                             std::to_string(pad_to));
    for (long r = p.offsets[e]; r < p.offsets[e + 1]; ++r) {
      const long to = e * pad_to + (r - p.offsets[e]);
      source[to] = p.source[r], slot[to] = p.slot[r];
      p.row_of[(long)p.source[r] * p.topk + p.slot[r]] = to;
    }
  }
  for (int e = 0; e <= experts; ++e) p.offsets[e] = e * pad_to;
  p.source = std::move(source), p.slot = std::move(slot);
}
}  // namespace

MoePermutation make_moe_permutation(const int* idx, int tokens, int topk, int experts,
                                    const unsigned char* keep, long pad_to) {
  MoePermutation p;
  p.tokens = tokens, p.topk = topk, p.experts = experts;
  const long n = (long)tokens * topk;
  // A counting sort by expert; tokens are visited in order, so each expert's rows stay in
  // ascending token order.
  p.offsets.assign(experts + 1, 0);
  for (long i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= experts)
      throw std::invalid_argument("moe permutation: expert " + std::to_string(idx[i]) +
                                  " of token " + std::to_string(i / topk) + " is outside [0, " +
                                  std::to_string(experts) + ")");
    if (!keep || keep[i]) ++p.offsets[idx[i] + 1];
  }
  for (int e = 0; e < experts; ++e) p.offsets[e + 1] += p.offsets[e];
  std::vector<long> next(p.offsets.begin(), p.offsets.end() - 1);
  p.source.resize(p.offsets[experts]), p.slot.resize(p.offsets[experts]);
  p.row_of.assign(n, -1);
  for (int t = 0; t < tokens; ++t)
    for (int j = 0; j < topk; ++j) {
      if (keep && !keep[(long)t * topk + j]) continue;
      const long r = next[idx[(long)t * topk + j]]++;
      p.source[r] = t, p.slot[r] = j;
      p.row_of[(long)t * topk + j] = r;
    }
  if (pad_to > 0) pad_experts(p, pad_to);
  return p;
}

void moe_permute(const MoePermutation& p, const float* x, int h, float* out) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < p.rows(); ++r) {
    if (p.source[r] < 0)
      std::fill(out + r * h, out + (r + 1) * h, 0.f);
    else
      std::copy(x + (long)p.source[r] * h, x + (long)(p.source[r] + 1) * h, out + r * h);
  }
}

void moe_permute_backward(const MoePermutation& p, const float* d_out, int h, float* dx) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < p.tokens; ++t) {
    float* d = dx + (long)t * h;
    std::fill(d, d + h, 0.f);
    for (int j = 0; j < p.topk; ++j) {
      const long r = p.row_of[(long)t * p.topk + j];
      if (r < 0) continue;  // dropped
      const float* src = d_out + r * h;
      for (int c = 0; c < h; ++c) d[c] += src[c];
    }
  }
}

void moe_permute_weights(const MoePermutation& p, const float* weights, float* out) {
  for (long r = 0; r < p.rows(); ++r)
    out[r] = p.source[r] < 0 ? 0.f : weights[(long)p.source[r] * p.topk + p.slot[r]];
}

void moe_permute_weights_backward(const MoePermutation& p, const float* d_out, float* d_weights) {
  for (long i = 0; i < (long)p.row_of.size(); ++i)
    d_weights[i] = p.row_of[i] < 0 ? 0.f : d_out[p.row_of[i]];
}

void moe_unpermute(const MoePermutation& p, const float* rows, const float* weights, int h,
                   float* y) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < p.tokens; ++t) {
    float* out = y + (long)t * h;
    std::fill(out, out + h, 0.f);
    for (int j = 0; j < p.topk; ++j) {
      const long i = (long)t * p.topk + j;
      if (p.row_of[i] < 0) continue;  // dropped
      const float w = weights ? weights[i] : 1.f;
      const float* src = rows + p.row_of[i] * h;
      for (int c = 0; c < h; ++c) out[c] += w * src[c];
    }
  }
}

void moe_unpermute_backward(const MoePermutation& p, const float* rows, const float* weights,
                            const float* dy, int h, float* d_rows, float* d_weights) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < p.tokens; ++t) {
    const float* g = dy + (long)t * h;
    for (int j = 0; j < p.topk; ++j) {
      const long i = (long)t * p.topk + j, r = p.row_of[i];
      if (r < 0) {  // dropped: no row, and its weight had no effect
        if (d_weights) d_weights[i] = 0.f;
        continue;
      }
      const float w = weights ? weights[i] : 1.f;
      for (int c = 0; c < h; ++c) d_rows[r * h + c] = w * g[c];
      if (!d_weights) continue;
      double dot = 0;
      for (int c = 0; c < h; ++c) dot += (double)rows[r * h + c] * g[c];
      d_weights[i] = (float)dot;
    }
  }
}

namespace {
// Copies every chunk from its place in [s][e] order to its place in [e][s] order
// (source_major_to_expert_major) or back.
void move_chunks(const float* in, const long* counts, int sources, int experts, int h, float* out,
                 bool to_expert_major) {
  const long chunks = (long)sources * experts;
  std::vector<long> source_major(chunks + 1, 0), expert_major(chunks, 0);
  for (long c = 0; c < chunks; ++c) source_major[c + 1] = source_major[c] + counts[c];
  long start = 0;
  for (int e = 0; e < experts; ++e)
    for (int s = 0; s < sources; ++s) {
      expert_major[(long)s * experts + e] = start;
      start += counts[(long)s * experts + e];
    }
#pragma omp parallel for schedule(static)
  for (long c = 0; c < chunks; ++c) {
    const long from = to_expert_major ? source_major[c] : expert_major[c];
    const long to = to_expert_major ? expert_major[c] : source_major[c];
    std::copy(in + from * h, in + (from + counts[c]) * h, out + to * h);
  }
}
}  // namespace

void sort_chunks_by_expert(const float* in, const long* counts, int sources, int experts, int h,
                           float* out) {
  move_chunks(in, counts, sources, experts, h, out, true);
}

void unsort_chunks_by_expert(const float* in, const long* counts, int sources, int experts, int h,
                             float* out) {
  move_chunks(in, counts, sources, experts, h, out, false);
}

}  // namespace trident::kernels
