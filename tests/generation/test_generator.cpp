// The continuous-batching generator: greedy tokens and log-probabilities of more requests
// than slots against the argmax of the full recomputation.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "generation/generation_test_util.h"
#include "generation/generator.h"
#include "generation/sampling.h"

using namespace trident;
using namespace trident::generation_test;

TEST(Generation, GreedyGeneratorMatchesFullRecomputationArgmax) {
  Fixture f;
  Engine engine(f.dir, 2, 4);
  generation::Generator g(engine.model, nullptr);
  std::vector<generation::GenerationRequest> rs(3);
  for (int i = 0; i < 3; ++i) {
    rs[i].prompt = random_tokens(3 + 4 * i, f.config.vocab_size, 10 + i);
    rs[i].tokens_to_generate = 6;
    rs[i].sampling.greedy = true;
    rs[i].stop_on_eod = false;
    rs[i].logprobs = true;
  }
  std::vector<generation::GenerationResult> out = generate_all(g, rs);  // 3 requests, 2 slots
  for (int i = 0; i < 3; ++i) {
    std::vector<int> seq = rs[i].prompt;
    ASSERT_EQ(out[i].tokens.size(), 6u);
    ASSERT_EQ(out[i].prompt_logprobs.size(), rs[i].prompt.size() - 1);
    for (int k = 0; k < 6; ++k) {
      std::vector<float> want = f.full_logits(seq);
      const int argmax = (int)(std::max_element(want.begin(), want.end()) - want.begin());
      EXPECT_EQ(out[i].tokens[k], argmax) << "request " << i << " token " << k;
      EXPECT_NEAR(out[i].logprobs[k],
                  generation::token_logprob(want.data(), f.config.vocab_size, argmax), 1e-4);
      seq.push_back(argmax);
    }
    for (size_t k = 1; k < rs[i].prompt.size(); ++k) {
      std::vector<float> want = f.full_logits({rs[i].prompt.begin(), rs[i].prompt.begin() + k});
      EXPECT_NEAR(out[i].prompt_logprobs[k - 1],
                  generation::token_logprob(want.data(), f.config.vocab_size, rs[i].prompt[k]),
                  1e-4);
    }
    EXPECT_EQ(out[i].finish_reason, "length");
  }
}
