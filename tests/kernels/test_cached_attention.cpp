// Attention of new rows against the KV cache (fp32 and bf16 caches) against a
// double-precision softmax over each row's visible positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cached_attention.h"
#include "kernels/low_precision.h"
#include "test_util.h"

namespace trident {
namespace {

// Rows of several slots against the cache, after appending their own keys and values: the
// softmax-weighted sum in double over each row's visible positions (long enough to cross
// 16-key blocks, and head sizes that take the vector form and one that does not); with a
// sliding window of 7 too (a row at P reads positions P - 6 .. P only).
TEST(CachedAttention, MatchesADoubleReference) {
  for (int window : {0, 7})
    for (bool bf16 : {false, true})
      for (int hd : {8, 64, 128}) {
        const int heads = 2, positions = 48, slots = 3;
        const long cache = (long)slots * heads * positions * hd;
        std::vector<float> k = trident::testing::random_vector(cache, 11),
                           v = trident::testing::random_vector(cache, 12);
        std::vector<kernels::bf16_t> k16(cache), v16(cache);
        kernels::to_bf16(k.data(), k16.data(), cache);
        kernels::to_bf16(v.data(), v16.data(), cache);
        kernels::KvLayerView kv;
        kv.k16 = bf16 ? k16.data() : nullptr;
        kv.v16 = bf16 ? v16.data() : nullptr;
        kv.k = bf16 ? nullptr : k.data();
        kv.v = bf16 ? nullptr : v.data();
        kv.heads = heads, kv.head_dim = hd, kv.positions = positions;
        // slot, start, count, row: a prompt chunk, a decode row past two blocks, a first token
        const std::vector<kernels::CachedSegment> segs = {
            {0, 5, 3, 0}, {2, 37, 1, 3}, {1, 0, 1, 4}};
        const int rows = 5;
        std::vector<float> qkv = trident::testing::random_vector((long)rows * 3 * heads * hd, 13);
        std::vector<float> out((long)rows * heads * hd, NAN);
        kernels::kv_cache_append(qkv.data(), kv, segs.data(), (int)segs.size());
        kernels::cached_attention(qkv.data(), kernels::QkvLayout::packed(heads, hd), heads,
                                  out.data(), kv, segs.data(), (int)segs.size(), window);
        auto cached = [&](const std::vector<float>& f32, const std::vector<kernels::bf16_t>& b16,
                          long at) {
          if (!bf16) return (double)f32[at];
          float x;
          const std::uint32_t u = (std::uint32_t)b16[at] << 16;
          std::memcpy(&x, &u, sizeof x);
          return (double)x;
        };
        double worst = 0;
        for (const kernels::CachedSegment& sg : segs)
          for (int i = 0; i < sg.count; ++i)
            for (int h = 0; h < heads; ++h) {
              const float* q = qkv.data() + ((long)(sg.row + i) * 3 * heads + h) * hd;
              const long base = ((long)sg.slot * heads + h) * positions * hd;
              const int visible = sg.start + i + 1;
              const int first = window > 0 ? std::max(0, visible - window) : 0;
              std::vector<double> score(visible, -INFINITY);
              double max = -INFINITY, sum = 0;
              for (int j = first; j < visible; ++j) {
                score[j] = 0;
                for (int d = 0; d < hd; ++d) score[j] += q[d] * cached(k, k16, base + j * hd + d);
                score[j] /= std::sqrt((double)hd);
                max = std::max(max, score[j]);
              }
              for (double& x : score) sum += x = std::exp(x - max);
              for (int d = 0; d < hd; ++d) {
                double want = 0;
                for (int j = first; j < visible; ++j)
                  want += score[j] / sum * cached(v, v16, base + j * hd + d);
                const double err = std::fabs(out[((long)(sg.row + i) * heads + h) * hd + d] - want);
                if (!(err <= worst)) worst = err;  // NaN: an output never written
              }
            }
        EXPECT_LT(worst, 2e-6) << (bf16 ? "bf16" : "fp32") << " head_dim " << hd << " window "
                               << window;
      }
}

}  // namespace
}  // namespace trident
