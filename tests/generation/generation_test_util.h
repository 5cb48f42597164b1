#pragma once
// Helpers of the tests of src/generation/: tiny GPT-2 and Llama models, a one-process model
// with seeded weights saved as a HF directory (the reference: the training forward pass over
// the whole prefix) and a one-process InferenceModel loading it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "distributed/process_groups.h"
#include "generation/inference_model.h"
#include "io/hf_gpt2.h"
#include "model/gpt_model.h"

namespace trident::generation_test {

inline ModelConfig tiny_model() {
  ModelConfig c;
  c.num_layers = 2, c.hidden_size = 32, c.num_attention_heads = 4, c.vocab_size = 97;
  c.max_position_embeddings = 40, c.seq_length = 40;
  return c;
}

// The Llama block: RMSNorm, RoPE (cached keys are stored rotated at their positions),
// SwiGLU, 2 query groups for 4 heads, untied output layer, no biases.
inline ModelConfig tiny_llama() {
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

inline std::vector<int> random_tokens(int n, int vocab, unsigned seed) {
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) t[i] = (int)((seed * 2654435761u + i * 40503u) % vocab);
  return t;
}

}  // namespace trident::generation_test
