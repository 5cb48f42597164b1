// The whole model's gradient against finite differences of its own forward pass, along
// random directions restricted to one parameter tensor at a time: this checks every
// layer's backward (embedding, LayerNorm, attention, MLP, tied output, cross-entropy).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "data/mock_dataset.h"
#include "model/gpt_model.h"
#include "test_util.h"

namespace trident {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.num_layers = 2, c.hidden_size = 16, c.num_attention_heads = 2, c.seq_length = 9;
  c.vocab_size = 37;  // padded to 128: the padding must not change anything
  c.make_vocab_size_divisible_by = 128;
  return c;
}

TEST(GPTModel, GradientMatchesFiniteDifferencesPerTensor) {
  ModelConfig c = tiny_config();
  comm::SingleRankCommunicator tp("tensor");
  const int batch = 2, seq = c.seq_length;
  ChunkOptions options;
  options.logits_chunk_rows = 5;  // the fused output layer + loss over 4 uneven row chunks
  GPTModel model(c, tp, batch, seq, options);
  Parameters& p = model.parameters();
  p.initialize(5, 0.3f, c.num_layers);  // large std: far from the trivial uniform softmax
  std::vector<int> tokens(batch * (seq + 1));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (int)((i * 7 + 3) % c.vocab_size);
  const float scale = 1.f / (batch * seq);
  p.zero_grads();
  model.forward_backward(tokens.data(), batch, seq, scale);
  std::vector<float> grad(p.grads(), p.grads() + p.size());
  std::vector<float> base(p.values(), p.values() + p.size());
  auto mean_loss = [&] { return model.forward(tokens.data(), batch, seq) / (batch * seq); };

  for (const ParamSpec& s : p.layout().specs()) {
    auto dir = testing::random_vector(s.numel(), hash_string(s.name));
    if (s.name == "embedding.word_embeddings.weight")  // rows beyond the vocabulary get no gradient
      for (long i = (long)c.vocab_size * c.hidden_size; i < s.numel(); ++i) dir[i] = 0.f;
    double analytic = 0;
    for (long i = 0; i < s.numel(); ++i) analytic += (double)grad[s.offset + i] * dir[i];
    const double eps = 2e-3;
    auto shifted = [&](double e) {
      for (long i = 0; i < s.numel(); ++i)
        p.values()[s.offset + i] = base[s.offset + i] + (float)(e * dir[i]);
      return mean_loss();
    };
    double numeric = (shifted(eps) - shifted(-eps)) / (2 * eps);
    for (long i = 0; i < s.numel(); ++i) p.values()[s.offset + i] = base[s.offset + i];
    EXPECT_NEAR(analytic, numeric, 2e-3 * std::max(1.0, std::abs(numeric))) << s.name;
  }
  if (c.padded_vocab_size(1) > c.vocab_size) {
    const ParamSpec& w = p.layout().find("embedding.word_embeddings.weight");
    for (long i = (long)c.vocab_size * c.hidden_size; i < w.numel(); ++i)
      ASSERT_EQ(grad[w.offset + i], 0.f) << "padded vocabulary row received gradient";
  }
}

// Two tiny models that differ only in their chunk options, with the same initial weights,
// after forward + backward of the same batch (their losses compared).
struct TwinModels {
  ModelConfig config = tiny_config();
  comm::SingleRankCommunicator tp{"tensor"};
  int batch = 2, seq = config.seq_length, rows = batch * seq;
  std::vector<int> tokens;
  std::unique_ptr<GPTModel> a, b;

  TwinModels(const ChunkOptions& options_a, const ChunkOptions& options_b, int token_step) {
    a = std::make_unique<GPTModel>(config, tp, batch, seq, options_a);
    b = std::make_unique<GPTModel>(config, tp, batch, seq, options_b);
    a->parameters().initialize(7, 0.3f, config.num_layers);
    b->parameters().initialize(7, 0.3f, config.num_layers);
    tokens.resize(batch * (seq + 1));
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = (int)((i * token_step + 2) % config.vocab_size);
    a->parameters().zero_grads();
    b->parameters().zero_grads();
    const float scale = 1.f / rows;
    EXPECT_NEAR(a->forward_backward(tokens.data(), batch, seq, scale),
                b->forward_backward(tokens.data(), batch, seq, scale), 1e-5);
  }
  float grad_a(long i) const { return a->parameters().grads()[i]; }
  float grad_b(long i) const { return b->parameters().grads()[i]; }
};

// Row chunks of the fused output layer + cross-entropy against one chunk holding the whole
// micro-batch (the un-fused order: all logits, then the loss, then the output layer's
// backward), and the on-demand logits against the losses they must produce.
TEST(GPTModel, ChunkedOutputLossMatchesUnfused) {
  ChunkOptions chunked, whole;
  chunked.logits_chunk_rows = 4;
  whole.logits_chunk_rows = 2 * tiny_config().seq_length;
  TwinModels m(chunked, whole, 11);
  for (long i = 0; i < m.a->parameters().size(); ++i)
    ASSERT_NEAR(m.grad_a(i), m.grad_b(i), 1e-6) << i;

  const ModelConfig& c = m.config;
  const int rows = m.rows, seq = m.seq;
  GPTModel& a = *m.a;
  const std::vector<int>& tokens = m.tokens;
  std::vector<float> losses(rows);
  a.forward(tokens.data(), m.batch, seq, losses.data());
  for (int r = 0; r < rows; ++r) {
    const float* logits = a.logits_row(r);
    double mx = *std::max_element(logits, logits + c.vocab_size), sum = 0;
    for (int v = 0; v < c.vocab_size; ++v) sum += std::exp(logits[v] - mx);
    const int target = tokens[(r / seq) * (seq + 1) + r % seq + 1];
    EXPECT_NEAR(std::log(sum) + mx - logits[target], losses[r], 1e-5) << "row " << r;
  }
}

// bf16: 4-row chunks are too short to hold the output layer's weight gradient in the freed
// logits buffer (it accumulates in place), the whole micro-batch is not (inner-product
// kernel, then an add): the two orders of the same bf16 products must agree.
TEST(GPTModel, Bf16OutputLayerGradientThroughEitherPath) {
  ChunkOptions chunked, whole;
  chunked.precision = whole.precision = kernels::Precision::kBf16;
  chunked.logits_chunk_rows = 4;                           // 4 < hidden 16
  whole.logits_chunk_rows = 2 * tiny_config().seq_length;  // 18 >= hidden 16
  TwinModels m(chunked, whole, 13);
  double worst = 0, largest = 0;
  for (long i = 0; i < m.a->parameters().size(); ++i) {
    worst = std::max(worst, (double)std::abs(m.grad_a(i) - m.grad_b(i)));
    largest = std::max(largest, (double)std::abs(m.grad_b(i)));
  }
  EXPECT_LT(worst, 1e-5 * largest);
  const ParamSpec& word = m.b->parameters().layout().find("embedding.word_embeddings.weight");
  double word_norm = 0;
  for (long i = 0; i < word.numel(); ++i) word_norm += std::abs(m.grad_b(word.offset + i));
  EXPECT_GT(word_norm, 0.0);
}

TEST(GPTModel, PaddingDoesNotChangeTheLoss) {
  ModelConfig a = tiny_config(), b = tiny_config();
  b.make_vocab_size_divisible_by = 8;  // 40 instead of 128 rows
  comm::SingleRankCommunicator tp("tensor");
  GPTModel ma(a, tp, 1, a.seq_length), mb(b, tp, 1, b.seq_length);
  ma.parameters().initialize(9, 0.2f, a.num_layers);
  mb.parameters().initialize(9, 0.2f, b.num_layers);
  std::vector<int> tokens(a.seq_length + 1);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (int)(i * 5 % a.vocab_size);
  // Same seed and names: the real rows are identical, only the padding differs.
  EXPECT_NEAR(ma.forward(tokens.data(), 1, a.seq_length),
              mb.forward(tokens.data(), 1, b.seq_length), 1e-4);
}

TEST(GPTModel, GradientAccumulationEqualsOneBigBatch) {
  ModelConfig c = tiny_config();
  comm::SingleRankCommunicator tp("tensor");
  GPTModel big(c, tp, 4, c.seq_length), small(c, tp, 2, c.seq_length);
  big.parameters().initialize(3, 0.1f, c.num_layers);
  small.parameters().initialize(3, 0.1f, c.num_layers);
  data::MockGPTDataset data(c.vocab_size, c.seq_length, 1);
  std::vector<int> tokens(4 * (c.seq_length + 1));
  for (int i = 0; i < 4; ++i) data.sample(i, tokens.data() + i * (c.seq_length + 1));
  const float scale = 1.f / (4 * c.seq_length);
  big.parameters().zero_grads();
  small.parameters().zero_grads();
  double l1 = big.forward_backward(tokens.data(), 4, c.seq_length, scale);
  double l2 =
      small.forward_backward(tokens.data(), 2, c.seq_length, scale) +
      small.forward_backward(tokens.data() + 2 * (c.seq_length + 1), 2, c.seq_length, scale);
  EXPECT_NEAR(l1, l2, 1e-4 * std::abs(l1));
  for (long i = 0; i < big.parameters().size(); ++i)
    ASSERT_NEAR(big.parameters().grads()[i], small.parameters().grads()[i], 1e-6);
}

// The Llama block (RMSNorm, RoPE, SwiGLU, 2 query groups for 4 heads, untied output);
// `biases` keeps the linears' biases, which splits q|kv into two products.
ModelConfig tiny_llama(bool biases) {
  ModelConfig c = tiny_config();
  c.hidden_size = 16, c.num_attention_heads = 4;
  c.normalization = "RMSNorm", c.position_embedding_type = "rope", c.swiglu = true;
  c.ffn_hidden_size = 24, c.group_query_attention = true, c.num_query_groups = 2;
  c.untie_embeddings_and_output_weights = true, c.disable_bias_linear = !biases;
  return c;
}

struct DeferCase {
  const char* model;
  ModelConfig config;
  kernels::Precision precision;
  int recompute;  // 0 none, 1 full (one layer), 2 selective
};

std::vector<DeferCase> defer_cases() {
  std::vector<DeferCase> cases;
  const std::pair<const char*, ModelConfig> models[] = {
      {"gpt", tiny_config()}, {"llama", tiny_llama(false)}, {"llama+bias", tiny_llama(true)}};
  for (const auto& [name, config] : models)
    for (kernels::Precision precision :
         {kernels::Precision::kFp32, kernels::Precision::kBf16, kernels::Precision::kFp16})
      for (int recompute : {0, 1, 2}) cases.push_back({name, config, precision, recompute});
  return cases;
}

ChunkOptions defer_options(const DeferCase& k) {
  ChunkOptions o;
  o.precision = k.precision;
  o.recompute_layers = k.recompute == 1 ? 1 : 0;
  o.recompute_attention = k.recompute == 2;
  return o;
}

std::string describe(const DeferCase& k) {
  return std::string(k.model) + " precision " + kernels::precision_name(k.precision) +
         " recompute " + std::to_string(k.recompute);
}

// Zero-bubble schedules: B (input gradients, weight-gradient operands kept) of two
// micro-batches, then W of each, gives exactly the gradients of the plain backward — the
// same products in the same order — in fp32, bf16 and fp16, for GPT-2 and Llama blocks,
// with full and selective recomputation (whose buffers B overwrites before W); B reports
// no tensor final, each W reports every tensor once. The operands W reads in place (the
// held activations) are not copied: the store's copies fill its planned buffer exactly.
TEST(GPTModel, DeferredWeightGradientsEqualThePlainBackward) {
  comm::SingleRankCommunicator tp("tensor");
  for (const DeferCase& k : defer_cases()) {
    const ModelConfig& c = k.config;
    const int batch = 2, seq = c.seq_length;
    data::MockGPTDataset data(c.vocab_size, seq, 1);
    std::vector<int> tokens(2 * batch * (seq + 1));
    for (int i = 0; i < 2 * batch; ++i) data.sample(i, tokens.data() + i * (seq + 1));
    const int* micro[2] = {tokens.data(), tokens.data() + batch * (seq + 1)};
    const float scale = 1.f / (2 * batch * seq);
    ChunkOptions plain = defer_options(k), split = plain;
    plain.slots = split.slots = 2;
    split.deferred_weight_grads = 2;
    GPTModel a(c, tp, batch, seq, plain), b(c, tp, batch, seq, split);
    a.parameters().initialize(7, 0.1f, c.num_layers);
    b.parameters().initialize(7, 0.1f, c.num_layers);
    a.parameters().zero_grads();
    b.parameters().zero_grads();
    std::vector<int> reported(b.parameters().layout().specs().size(), 0);
    b.set_grad_ready_hook([&](int begin, int end) {
      for (int j = begin; j < end; ++j) ++reported[j];
    });
    for (int i = 0; i < 2; ++i) {
      a.forward_chunk(i, micro[i], batch, seq, scale);
      b.forward_chunk(i, micro[i], batch, seq, scale);
    }
    for (int i = 0; i < 2; ++i) {
      a.backward_chunk(i, batch, seq);
      b.backward_input_chunk(i, batch, seq, /*key=*/10 + i);
      EXPECT_EQ(b.weight_grad_store().last_entry_floats(), b.shape().deferred_weight_grad_floats())
          << describe(k);
    }
    for (int r : reported) ASSERT_EQ(r, 0);
    b.weight_chunk(10);
    b.weight_chunk(11);
    for (int r : reported) ASSERT_EQ(r, 2);
    for (long j = 0; j < a.parameters().size(); ++j)
      ASSERT_EQ(a.parameters().grads()[j], b.parameters().grads()[j])
          << "float " << j << " " << describe(k);
    EXPECT_THROW(b.weight_chunk(10), std::logic_error);  // its W ran already
  }
}

// zero_grads leaves the layers' linear weight gradients to their first product: whatever the
// buffer held (NaN here, standing for the last step's gradients), the step's gradients equal
// bit for bit those accumulated on a buffer filled with zeros, over two micro-batches, in
// every precision and block (the fused q|kv product included), with W deferred or not; and
// every deferred span was written by a product, none filled.
TEST(GPTModel, GradientsLeftUnzeroedEqualAFilledBuffer) {
  comm::SingleRankCommunicator tp("tensor");
  for (const DeferCase& k : defer_cases()) {
    for (bool deferred_w : {false, true}) {
      const ModelConfig& c = k.config;
      const int batch = 2, seq = c.seq_length;
      data::MockGPTDataset data(c.vocab_size, seq, 1);
      std::vector<int> tokens(2 * batch * (seq + 1));
      for (int i = 0; i < 2 * batch; ++i) data.sample(i, tokens.data() + i * (seq + 1));
      const float scale = 1.f / (2 * batch * seq);
      ChunkOptions options = defer_options(k);
      options.slots = 2, options.deferred_weight_grads = deferred_w ? 2 : 0;
      GPTModel lazy(c, tp, batch, seq, options), filled(c, tp, batch, seq, options);
      for (GPTModel* m : {&lazy, &filled}) m->parameters().initialize(7, 0.1f, c.num_layers);
      Parameters &p = lazy.parameters(), &q = filled.parameters();
      std::fill(p.grads(), p.grads() + p.size(), NAN);
      p.zero_grads();
      ASSERT_TRUE(p.deferred_zero()->any_pending()) << describe(k);
      q.zero_grads();
      q.grads();  // reading fills the deferred spans: the eager zeroing
      for (GPTModel* m : {&lazy, &filled}) {
        for (int i = 0; i < 2; ++i)
          m->forward_chunk(i, tokens.data() + i * batch * (seq + 1), batch, seq, scale);
        for (int i = 0; i < 2; ++i)
          deferred_w ? m->backward_input_chunk(i, batch, seq, 10 + i)
                     : m->backward_chunk(i, batch, seq);
        if (deferred_w) m->weight_chunk(10), m->weight_chunk(11);
      }
      EXPECT_FALSE(p.deferred_zero()->any_pending()) << describe(k);
      for (long j = 0; j < p.size(); ++j)
        ASSERT_EQ(std::memcmp(p.grads() + j, q.grads() + j, sizeof(float)), 0)
            << "float " << j << " " << describe(k) << " deferred W " << deferred_w;
    }
  }
}

// ZB-H1's pattern on one slot: the activations W reads stay with the micro-batch from its
// B to its W while the slot's next F writes a fresh set (F0 B0 F1 B1 W0 W1 with one slot,
// two micro-batches between F and W); bit-identical to F0 B0 F1 B1 of the plain backward.
// A third F before a W finds no held set left (the plan's `unfinished`).
TEST(GPTModel, HeldActivationsOutliveTheSlotUntilW) {
  comm::SingleRankCommunicator tp("tensor");
  for (const DeferCase& k : defer_cases()) {
    const ModelConfig& c = k.config;
    const int batch = 2, seq = c.seq_length;
    data::MockGPTDataset data(c.vocab_size, seq, 3);
    std::vector<int> tokens(3 * batch * (seq + 1));
    for (int i = 0; i < 3 * batch; ++i) data.sample(i, tokens.data() + i * (seq + 1));
    const float scale = 1.f / (2 * batch * seq);
    ChunkOptions plain = defer_options(k), split = plain;
    split.deferred_weight_grads = 2, split.unfinished = 2;
    GPTModel a(c, tp, batch, seq, plain), b(c, tp, batch, seq, split);
    a.parameters().initialize(9, 0.1f, c.num_layers);
    b.parameters().initialize(9, 0.1f, c.num_layers);
    a.parameters().zero_grads();
    b.parameters().zero_grads();
    for (int i = 0; i < 2; ++i) {
      const int* micro = tokens.data() + i * batch * (seq + 1);
      a.forward_chunk(0, micro, batch, seq, scale, nullptr, i * batch);
      a.backward_chunk(0, batch, seq);
      b.forward_chunk(0, micro, batch, seq, scale, nullptr, i * batch);
      b.backward_input_chunk(0, batch, seq, i);
    }
    EXPECT_THROW(b.forward_chunk(0, tokens.data() + 2 * batch * (seq + 1), batch, seq, scale),
                 std::logic_error)
        << describe(k);
    b.weight_chunk(0);
    b.weight_chunk(1);
    for (long j = 0; j < a.parameters().size(); ++j)
      ASSERT_EQ(a.parameters().grads()[j], b.parameters().grads()[j])
          << "float " << j << " " << describe(k);
  }
}

}  // namespace
}  // namespace trident
