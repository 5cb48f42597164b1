// The inference model's KV-cache decoding against recomputing the whole prefix with the
// training forward pass, for GPT-2 and the Llama block, prompts prefilled in chunks beside
// decoding rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "generation/generation_test_util.h"
#include "generation/inference_model.h"

using namespace trident;
using namespace trident::generation_test;

namespace {

double max_abs(const float* x, int n) {
  double m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, (double)std::fabs(x[i]));
  return m;
}

// Three prompts of different lengths share the batch (one is prefilled in chunks of 5 over
// several steps), then decode together; every step's logits equal the full recomputation.
void check_kv_cache_logits(const ModelConfig& config) {
  Fixture f(config);
  Engine engine(f.dir, 3, 5);
  generation::InferenceModel& model = engine.model;
  // The cache holds a key and a value per group (grouped-query attention), not per head:
  // layers x {k, v} x 3 slots x 40 positions x groups x head_dim floats.
  const ModelConfig& c = f.config;
  long cache_floats = 0;
  for (const PlannedBuffer& b : model.memory_plan().buffers())
    if (b.group == "kv cache") cache_floats += b.floats;
  EXPECT_EQ(cache_floats, c.num_layers * 2L * 3 * 40 * c.query_groups() * c.head_dim());
  const int chunk = 5;
  const int V = f.config.vocab_size;
  std::vector<std::vector<int>> seqs = {random_tokens(7, V, 1), random_tokens(12, V, 2),
                                        random_tokens(1, V, 3)};
  std::vector<int> cached(3, 0);
  double worst = 0;
  for (int step = 0; step < 12; ++step) {
    std::vector<generation::Segment> segs;
    int budget = model.max_step_tokens();
    for (int s = 0; s < 3; ++s) {
      const int n = std::min<int>({(int)seqs[s].size() - cached[s], chunk, budget});
      if (n == 0) continue;
      segs.push_back(
          {s, cached[s],
           std::vector<int>(seqs[s].begin() + cached[s], seqs[s].begin() + cached[s] + n), 1});
      budget -= n;
    }
    const float* logits = model.step(segs);
    for (size_t k = 0; k < segs.size(); ++k) {
      const int s = segs[k].slot;
      cached[s] += (int)segs[k].tokens.size();
      std::vector<float> want = f.full_logits({seqs[s].begin(), seqs[s].begin() + cached[s]});
      const float* got = logits + (long)k * V;
      for (int i = 0; i < V; ++i)
        worst = std::max(worst, std::fabs(got[i] - want[i]) / max_abs(want.data(), V));
      if (cached[s] == (int)seqs[s].size())  // prompt done: feed a "generated" token
        seqs[s].push_back((int)(std::max_element(got, got + V) - got));
    }
  }
  EXPECT_LT(worst, 2e-5);
  // Every slot got past its prompt and decoded several tokens in the shared batch.
  EXPECT_GT(cached[0], 7 + 4);
  EXPECT_GT(cached[1], 12 + 4);
  EXPECT_GT(cached[2], 1 + 4);
}

}  // namespace

TEST(Generation, KvCacheLogitsEqualFullRecomputationAtEveryStep) {
  check_kv_cache_logits(tiny_model());
}

TEST(Generation, LlamaKvCacheLogitsEqualFullRecomputationAtEveryStep) {
  check_kv_cache_logits(tiny_llama());
}
