#pragma once
// The GPT-2 model on one rank: embedding, transformer layers, final LayerNorm, output
// layer tied to the word embedding, vocabulary-parallel cross-entropy. Parameters,
// gradients and activations are planned and allocated once, at construction.
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "config/model_config.h"
#include "model/memory_plan.h"
#include "model/parameters.h"
#include "model/transformer_layer.h"
#include "tensor_parallel/cross_entropy.h"

namespace trident {

class GPTModel {
 public:
  // micro_batch x seq is the largest batch forward/backward will be called with.
  GPTModel(const ModelConfig& config, comm::Communicator& tp, int micro_batch, int seq);

  // tokens: [batch, seq + 1]; input ids are the first seq, targets the last seq.
  // Returns the sum of the per-token losses. Gradients of grad_scale * (that sum) are
  // accumulated into parameters().grads().
  double forward_backward(const int* tokens, int batch, int seq, float grad_scale);
  // Forward only. per_token_loss, when given, receives batch * seq losses.
  double forward(const int* tokens, int batch, int seq, float* per_token_loss = nullptr);

  Parameters& parameters() { return params_; }
  const ModelConfig& config() const { return config_; }
  const MemoryPlan& memory_plan() const { return plan_; }
  int padded_vocab() const { return padded_vocab_; }
  int max_seq() const { return seq_; }
  // Logits of row r (batch-major) from the last forward(); one rank's vocabulary shard.
  const float* logits_row(int r) const {
    return act_.logits + (long)r * (padded_vocab_ / tp_.size());
  }

 private:
  struct Activations {
    float* embedded;
    std::vector<LayerActivations> layers;
    float *final_ln_out, *final_ln_mean, *final_ln_rstd;
    float* logits;  // [tokens, vocab / t], turned into d(loss)/d(logits) in place
    float* losses;
    float* d_residual;
    LayerScratch scratch;
  };
  void plan_and_allocate();
  void split_tokens(const int* tokens, int batch, int seq);
  double run_forward(int batch, int seq, float grad_scale, float* per_token_loss);
  void run_backward(int batch, int seq);

  ModelConfig config_;
  comm::Communicator& tp_;
  int micro_batch_, seq_, padded_vocab_;
  Parameters params_;
  std::vector<TransformerLayer> layers_;
  tensor_parallel::VocabParallelEmbedding embedding_;
  tensor_parallel::ColumnParallelLinear output_layer_;  // weight = word embedding shard
  tensor_parallel::VocabParallelCrossEntropy cross_entropy_;
  ParamRef final_ln_weight_, final_ln_bias_;
  MemoryPlan plan_;
  std::unique_ptr<Arena> arena_;
  Activations act_{};
  std::vector<int> input_ids_, target_ids_;
};

}  // namespace trident
