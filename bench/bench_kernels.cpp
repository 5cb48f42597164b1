// Per-kernel time at gpt2-small shapes (b=4, s=256, h=768), scaled by how often a
// training step calls each, to show where a step's time goes besides the GEMMs.
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "time_ms.h"

namespace {

using namespace trident::kernels;

using trident::bench::time_ms;

// Sliding-window attention (Mistral's) against full causal attention at s = 2048 with
// W = 512 (one sample, gpt2-small's 12 heads of 64): the key tiles outside the window are
// skipped, so the attended pairs, and the time, fall to about 44%.
void sliding_window_rows() {
  const int s = 2048, heads = 12, hd = 64, window = 512;
  std::vector<float> qkv((size_t)s * 3 * heads * hd, 0.1f), out((size_t)s * heads * hd),
      lse((size_t)heads * s), dqkv(qkv.size());
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = 0.01f * (float)(i % 97);
  std::printf("\nattention at s = %d, %d heads of %d, full vs sliding window W = %d:\n", s, heads,
              hd, window);
  for (int w : {0, window}) {
    const AttentionShape shape{1, s, heads, hd, w};
    const double fwd =
        time_ms([&] { flash_attention_forward(qkv.data(), out.data(), lse.data(), shape); });
    const double bwd = time_ms([&] {
      flash_attention_backward(qkv.data(), out.data(), out.data(), lse.data(), dqkv.data(), shape);
    });
    std::printf("  %-14s fwd %8.2f ms   bwd %8.2f ms\n", w ? "window 512" : "full causal", fwd,
                bwd);
  }
}

}  // namespace

int main() {
  const int b = 4, s = 256, h = 768, heads = 12, layers = 12, V = 50304, f = 4 * h;
  const int rows = b * s;
  std::vector<float> x((size_t)rows * f, 0.1f), y((size_t)rows * f), z((size_t)rows * f, 0.2f);
  std::vector<float> w((size_t)f * h, 0.01f), g(f, 1.f), bb(f, 0.f), mean(rows), rstd(rows);
  std::vector<float> qkv((size_t)rows * 3 * h, 0.1f), att((size_t)rows * h),
      lse((size_t)b * heads * s);
  std::vector<float> dqkv(qkv.size()), logits((size_t)rows * V, 0.01f), stats(2 * rows);
  std::vector<int> ids(rows, 17);
  long params = 124'000'000;
  std::vector<float> p(params, 0.1f), pg(params, 0.01f), m(params), v(params);
  struct Row {
    std::string name;
    double ms;
    int per_step;
  };
  std::vector<Row> rows_out = {
      {"gemm fc1 fwd (1024x3072x768)",
       time_ms([&] { linear_forward(x.data(), w.data(), y.data(), rows, h, f); }), 0},
      {"layernorm fwd", time_ms([&] {
         layernorm_forward(x.data(), g.data(), bb.data(), y.data(), mean.data(), rstd.data(), rows,
                           h, 1e-5f);
       }),
       2 * layers + 1},
      {"layernorm bwd", time_ms([&] {
         layernorm_backward(z.data(), x.data(), g.data(), mean.data(), rstd.data(), y.data(),
                            w.data(), bb.data(), rows, h, true);
       }),
       2 * layers + 1},
      {"bias+gelu fwd", time_ms([&] { bias_gelu_forward(z.data(), bb.data(), y.data(), rows, f); }),
       layers},
      {"gelu bwd", time_ms([&] { gelu_backward_inplace(x.data(), y.data(), (long)rows * f); }),
       layers},
      {"add bias (qkv)", time_ms([&] { add_bias(qkv.data(), bb.data(), rows, 3 * h); }), layers},
      {"bias+residual",
       time_ms([&] { bias_residual_add(x.data(), z.data(), bb.data(), y.data(), rows, h); }),
       2 * layers},
      {"bias bwd (fc1)", time_ms([&] { bias_backward(x.data(), bb.data(), rows, f); }), layers},
      {"attention fwd", time_ms([&] {
         flash_attention_forward(qkv.data(), att.data(), lse.data(), {b, s, heads, h / heads});
       }),
       layers},
      {"attention fwd, bf16 tiles", time_ms([&] {
         flash_attention_forward(qkv.data(), att.data(), lse.data(), {b, s, heads, h / heads}, {},
                                 Precision::kBf16);
       }),
       layers},
      {"attention bwd", time_ms([&] {
         flash_attention_backward(qkv.data(), att.data(), att.data(), lse.data(), dqkv.data(),
                                  {b, s, heads, h / heads});
       }),
       layers},
      {"attention bwd, bf16 tiles", time_ms([&] {
         flash_attention_backward(qkv.data(), att.data(), att.data(), lse.data(), dqkv.data(),
                                  {b, s, heads, h / heads}, {}, Precision::kBf16);
       }),
       layers},
      {"softmax stats + exp", time_ms([&] {
         softmax_exp_inplace(logits.data(), rows, V, V, stats.data(), stats.data() + rows);
       }),
       1},
      {"softmax+CE grad", time_ms([&] {
         softmax_cross_entropy_backward(
             {logits.data(), stats.data(), stats.data(), stats.data() + rows, rows, V, 0},
             ids.data(), 1e-3f, logits.data());
       }),
       1},
      {"embedding bwd",
       time_ms([&] { embedding_backward(ids.data(), rows, x.data(), 0, 64, h, w.data()); }), 1},
      {"adamw (124M)", time_ms([&] {
         adamw_update(p.data(), pg.data(), m.data(), v.data(), params,
                      {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.f}, true);
       }),
       1},
      {"grad norm (124M)", time_ms([&] { sum_of_squares(pg.data(), params); }), 1},
      {"zero grads (124M)", time_ms([&] { fill(pg.data(), 0.f, params); }), 1},
  };
  double total = 0;
  for (const Row& r : rows_out) {
    std::printf("%-32s %9.3f ms x %3d = %8.1f ms/step\n", r.name.c_str(), r.ms, r.per_step,
                r.ms * r.per_step);
    total += r.ms * r.per_step;
  }
  std::printf("%-32s %33.1f ms/step\n", "non-GEMM total", total);
  sliding_window_rows();
  return 0;
}
