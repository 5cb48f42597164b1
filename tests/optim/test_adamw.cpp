// AdamW against a scalar double-precision transcription of the published update
// (Loshchilov & Hutter, decoupled decay; PyTorch's AdamW semantics), clipping against the
// definition of the global norm, and the bf16 copy kept current by the fused update.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "comm/communicator.h"
#include "kernels/adamw.h"
#include "kernels/low_precision.h"
#include "optim/adamw.h"
#include "test_util.h"

namespace trident::optim {
namespace {

using kernels::Precision;
using testing::random_vector;

TEST(AdamW, MatchesReferenceOverSeveralSteps) {
  const long n = 1000;
  auto p = testing::random_vector(n, 1), g0 = testing::random_vector(n, 2);
  std::vector<float> m(n, 0.f), v(n, 0.f);
  std::vector<double> rp(p.begin(), p.end()), rm(n, 0), rv(n, 0);
  const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5;
  for (long step = 1; step <= 5; ++step) {
    kernels::adamw_update(p.data(), g0.data(), m.data(), v.data(), n,
                          {(float)lr, (float)b1, (float)b2, (float)eps, (float)wd, step, (float)gs},
                          true);
    for (long i = 0; i < n; ++i) {
      double g = g0[i] * gs;
      rp[i] *= 1 - lr * wd;
      rm[i] = b1 * rm[i] + (1 - b1) * g;
      rv[i] = b2 * rv[i] + (1 - b2) * g * g;
      double mhat = rm[i] / (1 - std::pow(b1, step)), vhat = rv[i] / (1 - std::pow(b2, step));
      rp[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  for (long i = 0; i < n; ++i) EXPECT_NEAR(p[i], rp[i], 1e-5 * (1 + std::abs(rp[i])));
}

TEST(AdamW, NoDecayLeavesZeroGradientParametersUnchanged) {
  std::vector<float> p = {1.f, -2.f}, g = {0.f, 0.f}, m(2, 0.f), v(2, 0.f);
  kernels::adamw_update(p.data(), g.data(), m.data(), v.data(), 2,
                        {0.1f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.f}, false);
  EXPECT_EQ(p[0], 1.f);
  EXPECT_EQ(p[1], -2.f);
}

TEST(AdamW, ClipsToTheGlobalNormAndDecaysOnlyMatrices) {
  ModelConfig c;
  c.num_layers = 1, c.hidden_size = 8, c.num_attention_heads = 2, c.seq_length = 4,
  c.vocab_size = 50;
  Parameters params(ParameterLayout(c, {0, 1}));
  params.initialize(3, 0.02f, 1);
  auto g = testing::random_vector(params.size(), 4);
  std::copy(g.begin(), g.end(), params.grads());
  double expect = 0;
  for (const ParamSpec& s : params.layout().specs())
    for (long i = 0; i < s.numel(); ++i) expect += (double)g[s.offset + i] * g[s.offset + i];
  comm::SingleRankCommunicator tp("tensor");
  comm::SingleRankCommunicator pp("pipeline");
  EXPECT_NEAR(global_grad_norm({&params}, tp, pp), std::sqrt(expect), 1e-9 * std::sqrt(expect));
  for (const ParamSpec& s : params.layout().specs())
    EXPECT_EQ(s.weight_decay, s.global_shape.size() == 2) << s.name;
}

TEST(AdamW, FusedUpdateKeepsTheBf16CopyCurrent) {
  ModelConfig c;
  c.num_layers = 1, c.hidden_size = 16, c.num_attention_heads = 2, c.seq_length = 8;
  c.vocab_size = 50;
  Parameters p(ParameterLayout(c, {0, 1}));
  p.set_low_precision(Precision::kBf16);
  p.initialize(3, 0.5f, 1);
  auto g = random_vector(p.size(), 4);
  std::copy(g.begin(), g.end(), p.grads());
  AdamW opt(AdamWConfig{}, p.size());
  opt.update(p, 1e-2f, 1.f);
  std::vector<kernels::bf16_t> expect(p.size());
  kernels::to_bf16(p.values(), expect.data(), p.size());
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), p.low_values()));
}

}  // namespace
}  // namespace trident::optim
