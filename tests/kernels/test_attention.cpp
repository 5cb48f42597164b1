// Flash attention: the forward against a double-precision causal softmax written here, the
// backward against central finite differences of it, dropout inside the tiles against the
// reference with the same masks, bf16 tiles; and the grouped-query path (compact key/value
// groups, RoPE at the tile loads) against the expanded, separately rotated one.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/grouped_qkv.h"
#include "kernels/kernels_test_util.h"
#include "kernels/low_precision.h"
#include "kernels/rope.h"
#include "test_util.h"

namespace trident {
namespace {

using kernels_test::rope_ref;
using testing::numeric_gradient;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;
using testing::weighted;

// Causal attention in double on [batch, seq, 3, heads, hd] input (within s.window keys when
// it is > 0); with dropout, the
// probabilities are masked element by element from the scalar generator.
std::vector<double> attention_ref(const std::vector<double>& qkv, const kernels::AttentionShape& s,
                                  const kernels::AttentionDropout& drop = {}) {
  const int hd = s.head_dim, H = s.heads;
  std::vector<double> out((size_t)s.batch * s.seq * H * hd);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < s.seq; ++i) {
        auto at = [&](int t, int which, int d) {
          return qkv[(((size_t)b * s.seq + t) * 3 + which) * H * hd + h * hd + d];
        };
        // Keys j <= i, and i - window < j with a sliding window, and in i's document.
        int first = s.window > 0 ? std::max(0, i - s.window + 1) : 0;
        if (s.doc_start) first = std::max(first, s.doc_start[(size_t)b * s.seq + i]);
        std::vector<double> p(i + 1);
        double mx = -1e300, sum = 0;
        for (int j = first; j <= i; ++j) {
          double acc = 0;
          for (int d = 0; d < hd; ++d) acc += at(i, 0, d) * at(j, 1, d);
          p[j] = acc / std::sqrt((double)hd);
          mx = std::max(mx, p[j]);
        }
        for (int j = first; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        if (drop.active()) {
          kernels::DropoutStream stream{drop.seed, drop.site,
                                        (std::uint32_t)(drop.first_sample + b), drop.probability};
          for (int j = first; j <= i; ++j) {
            std::uint64_t index = ((std::uint64_t)(drop.head_offset + h) * s.seq + i) * s.seq + j;
            p[j] = kernels::dropout_keeps(stream, index) ? p[j] / (1 - drop.probability) : 0.0;
          }
        }
        for (int d = 0; d < hd; ++d) {
          double acc = 0;
          for (int j = first; j <= i; ++j) acc += p[j] * at(j, 2, d);
          out[(((size_t)b * s.seq + i) * H + h) * hd + d] = acc / sum;
        }
      }
  return out;
}

class FlashAttention : public ::testing::TestWithParam<kernels::AttentionShape> {};

// Worst |central difference - dqkv| of sum(w * attention(qkv)) over ~samples evenly spread
// coordinates, relative to the largest derivative (at least 1).
double finite_difference_error(const std::vector<float>& qkv, const kernels::AttentionShape& s,
                               const kernels::AttentionDropout& drop, const std::vector<float>& w,
                               const std::vector<float>& dqkv, long samples) {
  const long stride = std::max<long>(1, (long)qkv.size() / samples);
  std::vector<double> x = to_double(qkv);
  double worst = 0, scale = 1;
  for (long i = 0; i < (long)qkv.size(); i += stride) {
    const double old = x[i], eps = 1e-6;
    x[i] = old + eps;
    const double up = weighted(attention_ref(x, s, drop), w);
    x[i] = old - eps;
    const double down = weighted(attention_ref(x, s, drop), w);
    x[i] = old;
    const double num = (up - down) / (2 * eps);
    worst = std::max(worst, std::abs(num - dqkv[i]));
    scale = std::max(scale, std::abs(num));
  }
  return worst / scale;
}

TEST_P(FlashAttention, ForwardMatchesFullSoftmax) {
  const kernels::AttentionShape s = GetParam();
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 12);
  std::vector<float> out((size_t)s.batch * s.seq * s.heads * s.head_dim),
      lse((size_t)s.batch * s.heads * s.seq);
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s);
  EXPECT_LT(relative_error(out, attention_ref(to_double(qkv), s)), 2e-5);
}

TEST_P(FlashAttention, BackwardMatchesFiniteDifferences) {
  const kernels::AttentionShape s = GetParam();
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 13);
  auto w = random_vector((long)s.batch * s.seq * s.heads * s.head_dim, 14);
  std::vector<float> out(w.size()), lse((size_t)s.batch * s.heads * s.seq), dqkv(qkv.size());
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s);
  kernels::flash_attention_backward(qkv.data(), out.data(), w.data(), lse.data(), dqkv.data(), s);
  // Every coordinate on small shapes; an evenly spread sample of ~600 on large ones.
  EXPECT_LT(finite_difference_error(qkv, s, {}, w, dqkv, 600), 1e-4);
}

// Attention dropout inside the tiles against the reference with the same masks, forward
// and (finite differences, masks fixed) backward.
TEST_P(FlashAttention, DropoutMatchesMaskedReference) {
  const kernels::AttentionShape s = GetParam();
  const kernels::AttentionDropout drop{0.3f, 99, 7, 5, 1};
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 15);
  auto w = random_vector((long)s.batch * s.seq * s.heads * s.head_dim, 16);
  std::vector<float> out(w.size()), lse((size_t)s.batch * s.heads * s.seq), dqkv(qkv.size());
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s, drop);
  std::vector<double> x = to_double(qkv);
  EXPECT_LT(relative_error(out, attention_ref(x, s, drop)), 2e-5);
  EXPECT_GT(relative_error(out, attention_ref(x, s)), 1e-2);  // the masks do something
  kernels::flash_attention_backward(qkv.data(), out.data(), w.data(), lse.data(), dqkv.data(), s,
                                    drop);
  EXPECT_LT(finite_difference_error(qkv, s, drop, w, dqkv, 300), 1e-4);
}

// bf16 tile products: the output against the double reference and the gradient against the
// fp32 kernel's (itself checked by finite differences above), within bf16's 8 significant
// bits; and not equal to fp32's, so the bf16 path did run.
TEST_P(FlashAttention, Bf16TilesTrackTheReference) {
  const kernels::AttentionShape s = GetParam();
  const auto bf16 = kernels::Precision::kBf16;
  const kernels::AttentionDropout drop{0.2f, 5, 3, 0, 0};
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 17);
  auto dout = random_vector((long)s.batch * s.seq * s.heads * s.head_dim, 18);
  std::vector<float> out(dout.size()), lse((size_t)s.batch * s.heads * s.seq), dqkv(qkv.size());
  std::vector<float> out32 = out, lse32 = lse, dqkv32 = dqkv;
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s, drop, bf16);
  const double err = relative_error(out, attention_ref(to_double(qkv), s, drop));
  EXPECT_LT(err, 1e-2);
  EXPECT_GT(err, 1e-5);
  kernels::flash_attention_forward(qkv.data(), out32.data(), lse32.data(), s, drop);
  kernels::flash_attention_backward(qkv.data(), out32.data(), dout.data(), lse32.data(),
                                    dqkv32.data(), s, drop);
  kernels::flash_attention_backward(qkv.data(), out.data(), dout.data(), lse.data(), dqkv.data(), s,
                                    drop, bf16);
  const double grad_err = relative_error(dqkv, to_double(dqkv32));
  EXPECT_LT(grad_err, 2e-2);
  EXPECT_GT(grad_err, 1e-5);
}

// Sequences shorter than, equal to and not a multiple of the 64-row tiles; sliding windows
// not aligned to the tiles (200 keys, window 20: whole key tiles skipped), of one key, and
// wider than the sequence.
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttention,
                         ::testing::Values(kernels::AttentionShape{1, 5, 2, 4},
                                           kernels::AttentionShape{2, 70, 2, 8},
                                           kernels::AttentionShape{1, 131, 3, 16},
                                           kernels::AttentionShape{2, 64, 1, 8},
                                           kernels::AttentionShape{1, 200, 2, 8, 20},
                                           kernels::AttentionShape{2, 131, 2, 8, 37},
                                           kernels::AttentionShape{1, 70, 1, 4, 1},
                                           kernels::AttentionShape{1, 5, 2, 4, 9}));

// Causal softmax attention of one sample by definition, q k v [seq, heads, d] each.
std::vector<double> attention_ref(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, int seq, int heads, int d) {
  std::vector<double> out((size_t)seq * heads * d, 0.0);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < seq; ++i) {
      std::vector<double> p(i + 1);
      double top = -1e300, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double dot = 0;
        for (int c = 0; c < d; ++c)
          dot += q[((size_t)i * heads + h) * d + c] * k[((size_t)j * heads + h) * d + c];
        p[j] = dot / std::sqrt((double)d);
        top = std::max(top, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - top));
      for (int j = 0; j <= i; ++j)
        for (int c = 0; c < d; ++c)
          out[((size_t)i * heads + h) * d + c] += p[j] / sum * v[((size_t)j * heads + h) * d + c];
    }
  return out;
}

// A grouped layout for the tests: rows of [q (heads) | k (groups) | v (groups)] (fused), or q
// of all rows then [k | v] of all rows (split, as linear_q and linear_kv with biases).
kernels::QkvLayout grouped_layout(int rows, int heads, int groups, int per_group, int first, int d,
                                  bool fused) {
  kernels::QkvLayout l;
  const long q = (long)heads * d, k = (long)groups * d;
  l.kv_heads = groups, l.heads_per_kv = per_group, l.first_kv = first;
  if (fused) {
    l.q_stride = l.kv_stride = q + 2 * k, l.k_offset = q, l.v_offset = q + k;
  } else {
    l.q_stride = q, l.kv_stride = 2 * k, l.k_offset = rows * q, l.v_offset = rows * q + k;
  }
  return l;
}

// The unfused path: k and v expanded to every head, RoPE applied in its own pass, packed
// attention; backward rotates the gradient back and sums the heads' into their groups.
struct Unfused {
  std::vector<float> out, lse, dqkv;
};

Unfused unfused_attention(const std::vector<float>& x, const kernels::QkvLayout& l,
                          const kernels::AttentionShape& s, const kernels::RopeConfig& rc,
                          const std::vector<float>& dout, kernels::Precision precision) {
  const long rows = (long)s.batch * s.seq, hd = (long)s.heads * s.head_dim;
  const kernels::QueryGroups g{s.heads, l.kv_heads, l.heads_per_kv, l.first_kv, s.head_dim};
  std::vector<float> qkv(rows * 3 * hd), dqkv(qkv.size());
  kernels::expand_grouped_qkv(x.data(), l.q_stride, x.data() + l.k_offset, l.kv_stride, qkv.data(),
                              rows, g);
  if (rc.rotary_dim > 0) kernels::rope_qkv(qkv.data(), s.batch, s.seq, s.heads, rc, false);
  Unfused u{std::vector<float>(rows * hd), std::vector<float>(rows * s.heads),
            std::vector<float>(x.size(), 0.f)};
  kernels::flash_attention_forward(qkv.data(), u.out.data(), u.lse.data(), s, {}, precision);
  kernels::flash_attention_backward(qkv.data(), u.out.data(), dout.data(), u.lse.data(),
                                    dqkv.data(), s, {}, precision);
  if (rc.rotary_dim > 0) kernels::rope_qkv(dqkv.data(), s.batch, s.seq, s.heads, rc, true);
  kernels::reduce_grouped_qkv_grad(dqkv.data(), u.dqkv.data(), l.q_stride,
                                   u.dqkv.data() + l.k_offset, l.kv_stride, rows, g);
  return u;
}

// Attention reading compact groups with RoPE at the tile loads against the unfused path,
// forward and backward, fp32 and bf16, over layouts: multi-head, grouped (fused and split
// projections), replicated groups with this rank's heads in group 1; RoPE full, partial
// (--rotary-percent 0.5) and off; threads 1 (a unit per group) and 3 (a unit per head, the
// groups' d k and d v summed afterwards).
TEST(FusedAttention, MatchesExpandedRotatedPath) {
  const int batch = 2, seq = 130, d = 16;  // seq spans three query and key blocks
  struct Case {
    const char* name;
    int heads, groups, per_group, first;
    bool fused;
  };
  const Case cases[] = {{"multi-head", 4, 4, 1, 0, true},
                        {"grouped fused", 4, 2, 2, 0, true},
                        {"grouped split", 6, 2, 3, 0, false},
                        {"replicated", 2, 2, 4, 1, true}};
  const int threads = omp_get_max_threads();
  for (const Case& c : cases)
    for (int rotary : {d, d / 2, 0})
      for (auto precision : {kernels::Precision::kFp32, kernels::Precision::kBf16})
        for (int nt : {1, 3}) {
          omp_set_num_threads(nt);
          const long rows = (long)batch * seq;
          const kernels::AttentionShape s{batch, seq, c.heads, d};
          kernels::QkvLayout l =
              c.heads == c.groups && c.per_group == 1
                  ? kernels::QkvLayout::packed(c.heads, d)
                  : grouped_layout((int)rows, c.heads, c.groups, c.per_group, c.first, d, c.fused);
          const long size = rows * (c.heads + 2L * c.groups) * d;
          auto x = random_vector(size, 41), dout = random_vector(rows * c.heads * d, 42);
          const kernels::RopeConfig rc{d, rotary, 10000.f};
          const Unfused ref = unfused_attention(x, l, s, rc, dout, precision);
          const kernels::RopeTable table(rc, seq);
          const kernels::RopeTable* rope = rotary > 0 ? &table : nullptr;
          std::vector<float> out(ref.out.size()), lse(ref.lse.size()), dqkv(size, 7.f);
          kernels::flash_attention_forward(x.data(), l, out.data(), lse.data(), s, {}, precision,
                                           rope);
          kernels::flash_attention_backward(x.data(), l, out.data(), dout.data(), lse.data(),
                                            dqkv.data(), s, {}, precision, rope);
          std::string what = std::string(c.name) + " rotary " + std::to_string(rotary) + " " +
                             kernels::precision_name(precision) + " threads " + std::to_string(nt);
          EXPECT_LT(relative_error(out, to_double(ref.out)), 1e-6) << what;
          EXPECT_LT(relative_error(lse, to_double(ref.lse)), 1e-6) << what;
          EXPECT_LT(relative_error(dqkv, to_double(ref.dqkv)), 1e-5) << what;
        }
  omp_set_num_threads(threads);
}

// The fused path against finite differences of attention(RoPE(q), RoPE(k), v) written by
// definition, k and v read from each head's group (--rotary-percent 0.5, two groups of two).
TEST(FusedAttention, BackwardMatchesFiniteDifferences) {
  const int seq = 5, heads = 4, groups = 2, d = 4, rotary = 2;
  const kernels::QkvLayout l = grouped_layout(seq, heads, groups, 2, 0, d, true);
  const kernels::AttentionShape s{1, seq, heads, d};
  const kernels::RopeConfig rc{d, rotary, 100.f};
  const long size = (long)seq * (heads + 2 * groups) * d;
  auto x = random_vector(size, 51), w = random_vector((long)seq * heads * d, 52);
  auto ref = [&](const std::vector<double>& v) {
    std::vector<double> q, k, vv;
    for (int t = 0; t < seq; ++t)
      for (int h = 0; h < heads; ++h)
        for (int c = 0; c < d; ++c) {
          const long row = (long)t * l.q_stride, g = h / 2;
          q.push_back(v[row + h * d + c]);
          k.push_back(v[row + l.k_offset + g * d + c]);
          vv.push_back(v[row + l.v_offset + g * d + c]);
        }
    q = rope_ref(q, seq, seq, heads, d, rotary, 100.0);
    k = rope_ref(k, seq, seq, heads, d, rotary, 100.0);
    return attention_ref(q, k, vv, seq, heads, d);
  };
  const kernels::RopeTable table(rc, seq);
  std::vector<float> out((size_t)seq * heads * d), lse((size_t)heads * seq), dx(size);
  kernels::flash_attention_forward(x.data(), l, out.data(), lse.data(), s, {},
                                   kernels::Precision::kFp32, &table);
  EXPECT_LT(relative_error(out, ref(to_double(x))), 1e-5);
  kernels::flash_attention_backward(x.data(), l, out.data(), w.data(), lse.data(), dx.data(), s, {},
                                    kernels::Precision::kFp32, &table);
  auto num = numeric_gradient([&](const std::vector<double>& v) { return weighted(ref(v), w); },
                              to_double(x));
  EXPECT_LT(relative_error(dx, num), 1e-4);
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

// doc_start [batch, seq] for samples cut into documents of the given lengths.
std::vector<int> doc_starts(const std::vector<std::vector<int>>& lengths) {
  std::vector<int> out;
  for (const auto& sample : lengths)
    for (int start = 0; int n : sample) {
      for (int i = 0; i < n; ++i) out.push_back(start);
      start += n;
    }
  return out;
}

// Packed documents (--reset-attention-mask): the forward against the double reference masked
// by document, the backward against its finite differences, and the tiles taken: a query
// block starts at its first document's first key block (counted here by hand), fewer than
// the causal pass's.
TEST(FlashAttentionDocuments, MatchTheReferenceAndSkipTiles) {
  const std::vector<int> starts = doc_starts({{40, 70, 40}, {150}, {1, 129, 20}});
  kernels::AttentionShape s{3, 150, 2, 8};
  s.doc_start = starts.data();
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 61);
  auto w = random_vector((long)s.batch * s.seq * s.heads * s.head_dim, 62);
  std::vector<float> out(w.size()), lse((size_t)s.batch * s.heads * s.seq), dqkv(qkv.size());
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s);
  EXPECT_LT(relative_error(out, attention_ref(to_double(qkv), s)), 2e-5);
  kernels::flash_attention_backward(qkv.data(), out.data(), w.data(), lse.data(), dqkv.data(), s);
  EXPECT_LT(finite_difference_error(qkv, s, {}, w, dqkv, 600), 1e-4);
  long want = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int qs = 0; qs < s.seq; qs += kernels::kBlockQ)
      want += (std::min(qs + kernels::kBlockQ, s.seq) - 1) / kernels::kBlockK -
              starts[(size_t)b * s.seq + qs] / kernels::kBlockK + 1;
  kernels::AttentionShape causal = s;
  causal.doc_start = nullptr;
  EXPECT_EQ(kernels::attention_tiles(s), want);
  // Sample 0's last query block [128, 150) starts in its 3rd document (keys from 110): key
  // block [0, 64) is skipped. Sample 2's starts in its 2nd (keys from 1): nothing skipped.
  EXPECT_EQ(want, 3 * 6 - 1);
  EXPECT_EQ(kernels::attention_tiles(causal), 3 * 6);
}

// Packed documents with RoPE positions restarting at each (--reset-position-ids) on the
// grouped path equal each document run alone from position 0: outputs and gradients.
TEST(FlashAttentionDocuments, EqualEachDocumentAlone) {
  const int seq = 140, heads = 4, groups = 2, d = 8;
  const std::vector<int> lengths = {30, 75, 35};
  std::vector<int> starts = doc_starts({lengths}), positions(seq);
  for (int t = 0; t < seq; ++t) positions[t] = t - starts[t];
  const kernels::RopeConfig rc{d, d, 10000.f};
  const kernels::RopeTable table(rc, seq);
  const kernels::QkvLayout l = grouped_layout(seq, heads, groups, 2, 0, d, true);
  const long width = (long)(heads + 2 * groups) * d;
  auto x = random_vector(seq * width, 71), dout = random_vector((long)seq * heads * d, 72);
  kernels::AttentionShape s{1, seq, heads, d};
  s.doc_start = starts.data(), s.positions = positions.data();
  std::vector<float> out((size_t)seq * heads * d), lse((size_t)heads * seq), dx(x.size());
  kernels::flash_attention_forward(x.data(), l, out.data(), lse.data(), s, {},
                                   kernels::Precision::kFp32, &table);
  kernels::flash_attention_backward(x.data(), l, out.data(), dout.data(), lse.data(), dx.data(), s,
                                    {}, kernels::Precision::kFp32, &table);
  std::vector<float> want_out(out.size()), want_dx(x.size());
  for (int start = 0; int n : lengths) {
    const kernels::QkvLayout ld = grouped_layout(n, heads, groups, 2, 0, d, true);
    const kernels::AttentionShape sd{1, n, heads, d};
    std::vector<float> o((size_t)n * heads * d), ls((size_t)heads * n), g((size_t)n * width);
    kernels::flash_attention_forward(x.data() + start * width, ld, o.data(), ls.data(), sd, {},
                                     kernels::Precision::kFp32, &table);
    kernels::flash_attention_backward(x.data() + start * width, ld, o.data(),
                                      dout.data() + (long)start * heads * d, ls.data(), g.data(),
                                      sd, {}, kernels::Precision::kFp32, &table);
    std::copy(o.begin(), o.end(), want_out.begin() + (long)start * heads * d);
    std::copy(g.begin(), g.end(), want_dx.begin() + start * width);
    start += n;
  }
  EXPECT_LT(relative_error(out, to_double(want_out)), 1e-6);
  EXPECT_LT(relative_error(dx, to_double(want_dx)), 1e-5);
}

}  // namespace
}  // namespace trident
