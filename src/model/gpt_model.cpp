#include "model/gpt_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/layernorm.h"

namespace trident {

GPTModel::GPTModel(const ModelConfig& config, comm::Communicator& tp, int micro_batch, int seq)
    : config_(config),
      tp_(tp),
      micro_batch_(micro_batch),
      seq_(seq),
      padded_vocab_(config.padded_vocab_size(tp.size())),
      params_(ParameterLayout(config, {tp.rank(), tp.size()})) {
  const int t = tp.size();
  LayerDims dims{config.hidden_size, config.num_attention_heads / t, config.head_dim(),
                 config.ffn() / t, config.layernorm_epsilon};
  for (int l = 0; l < config.num_layers; ++l) layers_.emplace_back(dims, params_, l, tp);
  const int vocab_local = padded_vocab_ / t, vocab_start = tp.rank() * vocab_local;
  ParamRef word = params_.get("embedding.word_embeddings.weight");
  embedding_ = {word,
                params_.get("embedding.position_embeddings.weight"),
                vocab_start,
                vocab_local,
                config.hidden_size,
                &tp};
  output_layer_ = {word, ParamRef{nullptr, nullptr, 0}, config.hidden_size, vocab_local, &tp};
  int valid = std::clamp(config.vocab_size - vocab_start, 0, vocab_local);
  cross_entropy_ = {vocab_start, vocab_local, valid, &tp};
  final_ln_weight_ = params_.get("final_layernorm.weight");
  final_ln_bias_ = params_.get("final_layernorm.bias");
  plan_and_allocate();
}

void GPTModel::plan_and_allocate() {
  const long tokens = (long)micro_batch_ * seq_, h = config_.hidden_size;
  const int t = tp_.size(), layers = config_.num_layers;
  const long attn_local = h / t, ffn_local = config_.ffn() / t;
  const long heads_local = config_.num_attention_heads / t;
  plan_.add("parameters", "weights", params_.size());
  plan_.add("parameters", "gradients", params_.size());
  plan_.add("optimizer", "adam exp_avg + exp_avg_sq", 2 * params_.size());
  const char* A = "activations";
  plan_.add(A, "embedding output", tokens * h);
  plan_.add(A, "ln1 out", tokens * h, layers);
  plan_.add(A, "ln1/ln2 mean+rstd", 4 * tokens, layers);
  plan_.add(A, "qkv", tokens * 3 * attn_local, layers);
  plan_.add(A, "attention out", tokens * attn_local, layers);
  plan_.add(A, "attention log-sum-exp", micro_batch_ * heads_local * seq_, layers);
  plan_.add(A, "residual after attention", tokens * h, layers);
  plan_.add(A, "ln2 out", tokens * h, layers);
  plan_.add(A, "fc1 out (pre-GeLU)", tokens * ffn_local, layers);
  plan_.add(A, "GeLU out", tokens * ffn_local, layers);
  plan_.add(A, "layer output", tokens * h, layers);
  plan_.add(A, "final ln out + stats", tokens * h + 2 * tokens);
  plan_.add(A, "logits / dlogits", tokens * (padded_vocab_ / t));
  plan_.add(A, "per-token loss", tokens);
  const char* S = "scratch";
  plan_.add(S, "residual gradient", tokens * h);
  plan_.add(S, "row-parallel out + d_hidden", 2 * tokens * h);
  plan_.add(S, "d_ffn", tokens * ffn_local);
  plan_.add(S, "d_attn + d_qkv", tokens * 4 * attn_local);

  long arena_floats = 0;
  for (const PlannedBuffer& b : plan_.buffers())
    if (b.group == A || b.group == S) arena_floats += (b.floats + 15) / 16 * 16 * b.copies + 64;
  arena_ = std::make_unique<Arena>(arena_floats);
  Arena& ar = *arena_;
  act_.embedded = ar.take(tokens * h);
  act_.layers.resize(layers);
  for (LayerActivations& a : act_.layers) {
    a.ln1_out = ar.take(tokens * h);
    a.ln1_mean = ar.take(tokens), a.ln1_rstd = ar.take(tokens);
    a.ln2_mean = ar.take(tokens), a.ln2_rstd = ar.take(tokens);
    a.qkv = ar.take(tokens * 3 * attn_local);
    a.attn_out = ar.take(tokens * attn_local);
    a.attn_lse = ar.take(micro_batch_ * heads_local * seq_);
    a.residual1 = ar.take(tokens * h);
    a.ln2_out = ar.take(tokens * h);
    a.fc1_pre = ar.take(tokens * ffn_local);
    a.fc1_act = ar.take(tokens * ffn_local);
    a.output = ar.take(tokens * h);
  }
  act_.final_ln_out = ar.take(tokens * h);
  act_.final_ln_mean = ar.take(tokens), act_.final_ln_rstd = ar.take(tokens);
  act_.logits = ar.take(tokens * (padded_vocab_ / t));
  act_.losses = ar.take(tokens);
  act_.d_residual = ar.take(tokens * h);
  act_.scratch.row_out = ar.take(tokens * h);
  act_.scratch.d_hidden = ar.take(tokens * h);
  act_.scratch.d_ffn = ar.take(tokens * ffn_local);
  act_.scratch.d_attn = ar.take(tokens * attn_local);
  act_.scratch.d_qkv = ar.take(tokens * 3 * attn_local);
}

void GPTModel::split_tokens(const int* tokens, int batch, int seq) {
  if (batch > micro_batch_ || seq > seq_)
    throw std::invalid_argument("batch " + std::to_string(batch) + "x" + std::to_string(seq) +
                                " exceeds the planned " + std::to_string(micro_batch_) + "x" +
                                std::to_string(seq_));
  input_ids_.resize((size_t)batch * seq);
  target_ids_.resize((size_t)batch * seq);
  for (int b = 0; b < batch; ++b)
    for (int s = 0; s < seq; ++s) {
      int id = tokens[(long)b * (seq + 1) + s], next = tokens[(long)b * (seq + 1) + s + 1];
      if (id < 0 || id >= config_.vocab_size || next < 0 || next >= config_.vocab_size)
        throw std::invalid_argument("token id out of range [0, " +
                                    std::to_string(config_.vocab_size) + ")");
      input_ids_[(size_t)b * seq + s] = id;
      target_ids_[(size_t)b * seq + s] = next;
    }
}

double GPTModel::run_forward(int batch, int seq, float grad_scale, float* per_token_loss) {
  const int rows = batch * seq, h = config_.hidden_size;
  embedding_.forward(input_ids_.data(), batch, seq, act_.embedded);
  const float* x = act_.embedded;
  for (size_t l = 0; l < layers_.size(); ++l) {
    layers_[l].forward(x, act_.layers[l], act_.scratch, batch, seq);
    x = act_.layers[l].output;
  }
  kernels::layernorm_forward(x, final_ln_weight_.value, final_ln_bias_.value, act_.final_ln_out,
                             act_.final_ln_mean, act_.final_ln_rstd, rows, h,
                             config_.layernorm_epsilon);
  output_layer_.forward(act_.final_ln_out, act_.logits, rows);
  cross_entropy_.forward(act_.logits, target_ids_.data(), rows, act_.losses, grad_scale);
  double total = 0;
  for (int r = 0; r < rows; ++r) total += act_.losses[r];
  if (per_token_loss) std::copy_n(act_.losses, rows, per_token_loss);
  return total;
}

void GPTModel::run_backward(int batch, int seq) {
  const int rows = batch * seq, h = config_.hidden_size;
  const float* last = layers_.empty() ? act_.embedded : act_.layers.back().output;
  // The tied output layer: d(final_ln_out) and the word-embedding gradient.
  output_layer_.backward(act_.logits, act_.final_ln_out, act_.scratch.d_hidden, rows);
  kernels::layernorm_backward(act_.scratch.d_hidden, last, final_ln_weight_.value,
                              act_.final_ln_mean, act_.final_ln_rstd, act_.d_residual,
                              final_ln_weight_.grad, final_ln_bias_.grad, rows, h, false);
  for (int l = (int)layers_.size() - 1; l >= 0; --l) {
    const float* x = l == 0 ? act_.embedded : act_.layers[l - 1].output;
    layers_[l].backward(x, act_.layers[l], act_.d_residual, act_.scratch, batch, seq);
  }
  embedding_.backward(input_ids_.data(), batch, seq, act_.d_residual);
}

double GPTModel::forward_backward(const int* tokens, int batch, int seq, float grad_scale) {
  split_tokens(tokens, batch, seq);
  double loss = run_forward(batch, seq, grad_scale, nullptr);
  run_backward(batch, seq);
  return loss;
}

double GPTModel::forward(const int* tokens, int batch, int seq, float* per_token_loss) {
  split_tokens(tokens, batch, seq);
  return run_forward(batch, seq, 0.f, per_token_loss);
}

}  // namespace trident
