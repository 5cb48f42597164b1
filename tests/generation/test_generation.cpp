// Generation against independent references: KV-cache decoding against recomputing the
// whole prefix with the training forward pass, and sampling against the truncated softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>

#include "distributed/process_groups.h"
#include "generation/generator.h"
#include "generation/inference_model.h"
#include "generation/sampling.h"
#include "io/hf_gpt2.h"
#include "kernels/cached_attention.h"
#include "kernels/skinny_linear.h"
#include "model/gpt_model.h"
#include "test_util.h"

using namespace trident;

namespace {

ModelConfig tiny_model() {
  ModelConfig c;
  c.num_layers = 2, c.hidden_size = 32, c.num_attention_heads = 4, c.vocab_size = 97;
  c.max_position_embeddings = 40, c.seq_length = 40;
  return c;
}

// The Llama block: RMSNorm, RoPE (cached keys are stored rotated at their positions),
// SwiGLU, 2 query groups for 4 heads, untied output layer, no biases.
ModelConfig tiny_llama() {
  ModelConfig c = tiny_model();
  c.normalization = "RMSNorm", c.position_embedding_type = "rope", c.swiglu = true;
  c.ffn_hidden_size = 48, c.group_query_attention = true, c.num_query_groups = 2;
  c.untie_embeddings_and_output_weights = true, c.disable_bias_linear = true;
  return c;
}

// A one-process model with seeded weights, written as a HF directory for InferenceModel.
struct Fixture {
  ModelConfig config;
  comm::SingleRankCommunicator tp{"tensor"};
  GPTModel reference;
  std::string dir;
  explicit Fixture(const ModelConfig& c = tiny_model())
      : config(c), reference(config, tp, 1, config.seq_length) {
    reference.parameters().initialize(11, 0.3f, config.num_layers);
    dir = (std::filesystem::temp_directory_path() /
           ("trident_gen_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name()))
              .string();
    io::save_hf_model(dir, config, reference.parameters());
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
  // Logits of the last token of `prefix` by the training forward pass over all of it.
  std::vector<float> full_logits(const std::vector<int>& prefix) {
    std::vector<int> input = prefix;
    input.push_back(0);  // a target is required; its loss is ignored
    reference.forward(input.data(), 1, (int)prefix.size());
    const float* row = reference.logits_row((int)prefix.size() - 1);
    return {row, row + config.vocab_size};
  }
};

// A one-process InferenceModel on the fixture's HF directory.
struct Engine {
  distributed::ProcessGrid grid{1, 1, 1};
  distributed::ProcessGroups groups = distributed::make_single_rank_groups();
  engine::RankContext rank{0, &grid, &groups, {"local"}};
  std::ostringstream log;
  generation::InferenceModel model;
  Engine(const std::string& dir, int max_batch, int prefill_chunk)
      : model(options(dir, max_batch, prefill_chunk), rank, log) {}
  static generation::InferenceOptions options(const std::string& dir, int batch, int chunk) {
    generation::InferenceOptions o;
    o.load_hf = dir, o.max_batch = batch, o.max_sequence_length = 40, o.prefill_chunk = chunk;
    return o;
  }
};

double max_abs(const float* x, int n) {
  double m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, (double)std::fabs(x[i]));
  return m;
}

std::vector<int> random_tokens(int n, int vocab, unsigned seed) {
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) t[i] = (int)((seed * 2654435761u + i * 40503u) % vocab);
  return t;
}

}  // namespace

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

TEST(Generation, KvCacheLogitsEqualFullRecomputationAtEveryStep) {
  check_kv_cache_logits(tiny_model());
}

TEST(Generation, LlamaKvCacheLogitsEqualFullRecomputationAtEveryStep) {
  check_kv_cache_logits(tiny_llama());
}

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

namespace {

// The distribution sampling must follow: softmax(logits / T), the k largest kept, then the
// smallest prefix (by descending probability) reaching top_p, renormalised.
std::vector<double> truncated_softmax(const std::vector<float>& logits, float T, int k, float p) {
  const int n = (int)logits.size();
  std::vector<double> prob(n);
  const double max = *std::max_element(logits.begin(), logits.end());
  for (int i = 0; i < n; ++i) prob[i] = std::exp((logits[i] - max) / T);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
  if (k > 0)
    for (int i = k; i < n; ++i) prob[order[i]] = 0;
  double sum = std::accumulate(prob.begin(), prob.end(), 0.0);
  for (double& x : prob) x /= sum;
  double mass = 0;
  int keep = 0;
  while (keep < n && mass < p) mass += prob[order[keep++]];
  for (int i = keep; i < n; ++i) prob[order[i]] = 0;
  sum = std::accumulate(prob.begin(), prob.end(), 0.0);
  for (double& x : prob) x /= sum;
  return prob;
}

}  // namespace

TEST(Sampling, FrequenciesMatchTheTruncatedSoftmax) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.9f, 2.2f};
  struct Case {
    float temperature;
    int top_k;
    float top_p;
  };
  // Chi-square critical values at p = 0.001 by degrees of freedom.
  const std::map<int, double> critical = {{1, 10.83}, {2, 13.82}, {3, 16.27}, {4, 18.47},
                                          {5, 20.52}, {6, 22.46}, {7, 24.32}};
  std::vector<float> scratch(2 * logits.size());
  for (Case c : {Case{1.f, 0, 1.f}, Case{0.7f, 4, 1.f}, Case{1.3f, 0, 0.8f}, Case{1.f, 5, 0.7f}}) {
    generation::SamplingParams p;
    p.temperature = c.temperature, p.top_k = c.top_k, p.top_p = c.top_p, p.seed = 99;
    const std::vector<double> want = truncated_softmax(logits, c.temperature, c.top_k, c.top_p);
    const int draws = 40000;
    std::vector<int> count(logits.size(), 0);
    for (int s = 0; s < draws; ++s)
      ++count[generation::sample_token(logits.data(), (int)logits.size(), p, s, scratch.data()).id];
    double chi2 = 0;
    int df = -1;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (want[i] == 0) {
        EXPECT_EQ(count[i], 0) << "token " << i << " lies outside the truncation";
        continue;
      }
      const double expected = want[i] * draws;
      chi2 += (count[i] - expected) * (count[i] - expected) / expected;
      ++df;
    }
    EXPECT_LT(chi2, critical.at(df))
        << "T " << c.temperature << " k " << c.top_k << " p " << c.top_p;
  }
}

TEST(Sampling, SeededDrawsRepeatAndGreedyIsArgmax) {
  const std::vector<float> logits = {0.1f, 0.4f, 0.35f, 0.2f};
  std::vector<float> scratch(8);
  generation::SamplingParams p;
  p.seed = 5;
  std::vector<int> a, b, c;
  for (int s = 0; s < 64; ++s) {
    a.push_back(generation::sample_token(logits.data(), 4, p, s, scratch.data()).id);
    b.push_back(generation::sample_token(logits.data(), 4, p, s, scratch.data()).id);
  }
  p.seed = 6;
  for (int s = 0; s < 64; ++s)
    c.push_back(generation::sample_token(logits.data(), 4, p, s, scratch.data()).id);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (generation::SamplingParams g : {generation::SamplingParams{true}, [] {
                                         generation::SamplingParams q;
                                         q.top_k = 1;
                                         return q;
                                       }()}) {
    const generation::SampledToken t =
        generation::sample_token(logits.data(), 4, g, 3, scratch.data());
    EXPECT_EQ(t.id, 1);
    EXPECT_NEAR(t.logprob, generation::token_logprob(logits.data(), 4, 1), 1e-6);
  }
  EXPECT_NE(generation::validate(generation::SamplingParams{false, 1.f, 0, 0.f}), "");
  EXPECT_NE(generation::validate(generation::SamplingParams{false, -1.f}), "");
}

// Both layouts: w as stored [out, in], and repacked into panels (odd `in` and an `out` that
// leaves a partial block exercise the padding).
TEST(SkinnyLinear, MatchesADoubleReferenceForEveryRowCount) {
  for (bool panels : {false, true})
    for (kernels::Precision p : {kernels::Precision::kFp32, kernels::Precision::kBf16})
      for (int in : {37, 64, 200})
        for (int rows = 1; rows <= kernels::kSkinnyMaxRows; ++rows) {
          if (!kernels::skinny_linear_available(p, rows)) GTEST_SKIP() << "no AVX-512 kernel";
          const int out = 29;
          std::vector<float> x = trident::testing::random_vector((long)rows * in, 3 + rows);
          std::vector<float> w = trident::testing::random_vector((long)out * in, 7);
          std::vector<kernels::bf16_t> x16(x.size()), w16(w.size());
          if (p == kernels::Precision::kBf16) {  // the reference sees the rounded operands
            kernels::to_bf16(x.data(), x16.data(), (long)x.size());
            kernels::to_bf16(w.data(), w16.data(), (long)w.size());
            kernels::from_bf16(x16.data(), x.data(), (long)x.size());
            kernels::from_bf16(w16.data(), w.data(), (long)w.size());
          }
          std::vector<float> y((long)rows * out, NAN);
          const long packed = kernels::panel_elements(p, out, in);
          std::vector<float> w_panels(packed);
          std::vector<kernels::bf16_t> w16_panels(packed);
          if (p == kernels::Precision::kFp32 && panels) {
            kernels::pack_panels(w.data(), out, in, w_panels.data());
            kernels::panel_linear_forward(x.data(), w_panels.data(), y.data(), rows, in, out);
          } else if (p == kernels::Precision::kFp32) {
            kernels::skinny_linear_forward(x.data(), w.data(), y.data(), rows, in, out);
          } else if (panels) {
            kernels::pack_panels_bf16(w16.data(), out, in, w16_panels.data());
            kernels::panel_linear_forward_bf16(x16.data(), w16_panels.data(), y.data(), rows, in,
                                               out);
          } else {
            kernels::skinny_linear_forward_bf16(x16.data(), w16.data(), y.data(), rows, in, out);
          }
          double worst = 0;
          for (int r = 0; r < rows; ++r)
            for (int o = 0; o < out; ++o) {
              double want = 0;
              for (int i = 0; i < in; ++i)
                want += (double)x[(long)r * in + i] * w[(long)o * in + i];
              const double err = std::fabs(y[(long)r * out + o] - want) / std::sqrt((double)in);
              if (!(err <= worst)) worst = err;  // a NaN (an output never written) sticks
            }
          EXPECT_LT(worst, 1e-5) << kernels::precision_name(p) << " rows " << rows << " in " << in
                                 << (panels ? " panels" : "");
        }
}

// Rows of several slots against the cache, after appending their own keys and values: the
// softmax-weighted sum in double over each row's visible positions (long enough to cross
// 16-key blocks, and head sizes that take the vector form and one that does not).
TEST(CachedAttention, MatchesADoubleReference) {
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
      const std::vector<kernels::CachedSegment> segs = {{0, 5, 3, 0}, {2, 37, 1, 3}, {1, 0, 1, 4}};
      const int rows = 5;
      std::vector<float> qkv = trident::testing::random_vector((long)rows * 3 * heads * hd, 13);
      std::vector<float> out((long)rows * heads * hd, NAN);
      kernels::kv_cache_append(qkv.data(), kv, segs.data(), (int)segs.size());
      kernels::cached_attention(qkv.data(), out.data(), kv, segs.data(), (int)segs.size());
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
            std::vector<double> score(visible);
            double max = -INFINITY, sum = 0;
            for (int j = 0; j < visible; ++j) {
              score[j] = 0;
              for (int d = 0; d < hd; ++d) score[j] += q[d] * cached(k, k16, base + j * hd + d);
              score[j] /= std::sqrt((double)hd);
              max = std::max(max, score[j]);
            }
            for (double& x : score) sum += x = std::exp(x - max);
            for (int d = 0; d < hd; ++d) {
              double want = 0;
              for (int j = 0; j < visible; ++j)
                want += score[j] / sum * cached(v, v16, base + j * hd + d);
              const double err = std::fabs(out[((long)(sg.row + i) * heads + h) * hd + d] - want);
              if (!(err <= worst)) worst = err;  // NaN: an output never written
            }
          }
      EXPECT_LT(worst, 2e-6) << (bf16 ? "bf16" : "fp32") << " head_dim " << hd;
    }
}

TEST(Sampling, TopLogprobsAreTheLikeliestInOrder) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.f, 2.0f, 0.7f};
  auto top = generation::top_logprobs(logits.data(), 5, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);  // ties: the lower id first
  EXPECT_EQ(top[1].first, 3);
  EXPECT_EQ(top[2].first, 4);
  for (const auto& [id, lp] : top)
    EXPECT_NEAR(lp, generation::token_logprob(logits.data(), 5, id), 1e-6);
}
