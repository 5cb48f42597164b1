#include "model/gpt_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/layernorm.h"

namespace trident {

namespace {
int chunk_layers(const ModelConfig& c, const ChunkPlacement& p) {
  return p.num_layers < 0 ? c.num_layers - p.first_layer : p.num_layers;
}
}  // namespace

GPTModel::GPTModel(const ModelConfig& config, comm::Communicator& tp, int micro_batch, int seq,
                   ChunkPlacement placement, int slots, int recompute_layers)
    : config_(config),
      tp_(tp),
      micro_batch_(micro_batch),
      seq_(seq),
      padded_vocab_(config.padded_vocab_size(tp.size())),
      placement_(placement),
      slots_(std::max(1, slots)),
      recompute_layers_(recompute_layers),
      params_(ParameterLayout(config, {tp.rank(), tp.size()}, placement)) {
  const int t = tp.size();
  LayerDims dims{config.hidden_size, config.num_attention_heads / t, config.head_dim(),
                 config.ffn() / t, config.layernorm_epsilon};
  const int first = placement.first_layer, count = chunk_layers(config, placement);
  for (int l = first; l < first + count; ++l) {
    layers_.emplace_back(dims, params_, l, tp);
    const auto& specs = params_.layout().specs();
    for (size_t k = 0; k < specs.size(); ++k)
      if (specs[k].name == layer_param(l, "input_layernorm.weight"))
        layer_first_spec_.push_back((int)k);
  }
  const int vocab_local = padded_vocab_ / t, vocab_start = tp.rank() * vocab_local;
  if (placement.pre_process || placement.post_process) {
    ParamRef word = params_.get("embedding.word_embeddings.weight");
    if (placement.pre_process)
      embedding_ = {word,
                    params_.get("embedding.position_embeddings.weight"),
                    vocab_start,
                    vocab_local,
                    config.hidden_size,
                    &tp};
    output_layer_ = {word, ParamRef{nullptr, nullptr, 0}, config.hidden_size, vocab_local, &tp};
  }
  int valid = std::clamp(config.vocab_size - vocab_start, 0, vocab_local);
  cross_entropy_ = {vocab_start, vocab_local, valid, &tp};
  if (placement.post_process) {
    final_ln_weight_ = params_.get("final_layernorm.weight");
    final_ln_bias_ = params_.get("final_layernorm.bias");
  }
  plan_and_allocate();
}

void GPTModel::plan_and_allocate() {
  const long tokens = (long)micro_batch_ * seq_, h = config_.hidden_size;
  const int t = tp_.size(), layers = (int)layers_.size(), n = slots_;
  const long attn_local = h / t, ffn_local = config_.ffn() / t;
  const long heads_local = config_.num_attention_heads / t;
  const bool post = placement_.post_process;
  plan_.add("parameters", "weights", params_.size());
  plan_.add("parameters", "gradients", params_.size());
  plan_.add("optimizer", "adam exp_avg + exp_avg_sq", 2 * params_.size());
  const char* A = "activations";
  const int recomputed = std::min(recompute_layers_, layers);
  const int per_layer = (layers - recomputed) * n;  // layers that keep their activations
  plan_.add(A, placement_.pre_process ? "embedding output" : "received input", tokens * h, n);
  auto add_layer_buffers = [&](const std::string& prefix, int copies) {
    plan_.add(A, prefix + "ln1 out", tokens * h, copies);
    plan_.add(A, prefix + "ln1/ln2 mean+rstd", 4 * tokens, copies);
    plan_.add(A, prefix + "qkv", tokens * 3 * attn_local, copies);
    plan_.add(A, prefix + "attention out", tokens * attn_local, copies);
    plan_.add(A, prefix + "attention log-sum-exp", micro_batch_ * heads_local * seq_, copies);
    plan_.add(A, prefix + "residual after attention", tokens * h, copies);
    plan_.add(A, prefix + "ln2 out", tokens * h, copies);
    plan_.add(A, prefix + "fc1 out (pre-GeLU)", tokens * ffn_local, copies);
    plan_.add(A, prefix + "GeLU out", tokens * ffn_local, copies);
  };
  if (per_layer > 0) add_layer_buffers("", per_layer);
  plan_.add(A, "layer output", tokens * h, layers * n);
  if (recomputed > 0) add_layer_buffers("recompute: ", 1);
  if (post) {
    plan_.add(A, "final ln out + stats", tokens * h + 2 * tokens, n);
    plan_.add(A, "logits / dlogits", tokens * (padded_vocab_ / t), n);
    plan_.add(A, "per-token loss", tokens, n);
  } else {
    plan_.add(A, "received output gradient", tokens * h, n);
  }
  const char* S = "scratch";
  plan_.add(S, "residual gradient", tokens * h);
  plan_.add(S, "row-parallel out + d_hidden", 2 * tokens * h);
  plan_.add(S, "d_ffn", tokens * ffn_local);
  plan_.add(S, "d_attn + d_qkv", tokens * 4 * attn_local);

  long arena_floats = 0;
  for (const PlannedBuffer& b : plan_.buffers())
    if (b.group == A || b.group == S) arena_floats += ((b.floats + 15) / 16 * 16 + 16) * b.copies;
  arena_ = std::make_unique<Arena>(arena_floats);
  Arena& ar = *arena_;
  act_.resize(n);
  auto take_layer = [&](LayerActivations& a) {
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
  };
  if (recomputed > 0) take_layer(recompute_act_);
  for (Activations& s : act_) {
    s.input = ar.take(tokens * h);
    s.layers.resize(layers);
    for (int l = 0; l < layers; ++l) {
      LayerActivations& a = s.layers[l];
      if (l < recomputed)
        a = recompute_act_;  // shared buffers; only the output is this layer's own
      else
        take_layer(a);
      a.output = ar.take(tokens * h);
    }
    if (post) {
      s.final_ln_out = ar.take(tokens * h);
      s.final_ln_mean = ar.take(tokens), s.final_ln_rstd = ar.take(tokens);
      s.logits = ar.take(tokens * (padded_vocab_ / t));
      s.losses = ar.take(tokens);
    } else {
      s.output_grad = ar.take(tokens * h);
    }
  }
  d_residual_ = ar.take(tokens * h);
  scratch_.row_out = ar.take(tokens * h);
  scratch_.d_hidden = ar.take(tokens * h);
  scratch_.d_ffn = ar.take(tokens * ffn_local);
  scratch_.d_attn = ar.take(tokens * attn_local);
  scratch_.d_qkv = ar.take(tokens * 3 * attn_local);
}

void GPTModel::split_tokens(Activations& a, const int* tokens, int batch, int seq) {
  if (batch > micro_batch_ || seq > seq_)
    throw std::invalid_argument("batch " + std::to_string(batch) + "x" + std::to_string(seq) +
                                " exceeds the planned " + std::to_string(micro_batch_) + "x" +
                                std::to_string(seq_));
  a.input_ids.resize((size_t)batch * seq);
  a.target_ids.resize((size_t)batch * seq);
  for (int b = 0; b < batch; ++b)
    for (int s = 0; s < seq; ++s) {
      int id = tokens[(long)b * (seq + 1) + s], next = tokens[(long)b * (seq + 1) + s + 1];
      if (id < 0 || id >= config_.vocab_size || next < 0 || next >= config_.vocab_size)
        throw std::invalid_argument("token id out of range [0, " +
                                    std::to_string(config_.vocab_size) + ")");
      a.input_ids[(size_t)b * seq + s] = id;
      a.target_ids[(size_t)b * seq + s] = next;
    }
}

const float* GPTModel::output_buffer(int slot) const {
  return layers_.empty() ? act_[slot].input : act_[slot].layers.back().output;
}

double GPTModel::forward_chunk(int slot, const int* tokens, int batch, int seq, float grad_scale,
                               float* per_token_loss) {
  Activations& a = act_[slot];
  split_tokens(a, tokens, batch, seq);
  const int rows = batch * seq, h = config_.hidden_size;
  if (placement_.pre_process) embedding_.forward(a.input_ids.data(), batch, seq, a.input);
  const float* x = a.input;
  for (size_t l = 0; l < layers_.size(); ++l) {
    layers_[l].forward(x, a.layers[l], scratch_, batch, seq);
    x = a.layers[l].output;
  }
  if (!placement_.post_process) return 0.0;
  kernels::layernorm_forward(x, final_ln_weight_.value, final_ln_bias_.value, a.final_ln_out,
                             a.final_ln_mean, a.final_ln_rstd, rows, h, config_.layernorm_epsilon);
  output_layer_.forward(a.final_ln_out, a.logits, rows);
  cross_entropy_.forward(a.logits, a.target_ids.data(), rows, a.losses, grad_scale);
  double total = 0;
  for (int r = 0; r < rows; ++r) total += a.losses[r];
  if (per_token_loss) std::copy_n(a.losses, rows, per_token_loss);
  return total;
}

void GPTModel::backward_chunk(int slot, int batch, int seq) {
  Activations& a = act_[slot];
  const int rows = batch * seq, h = config_.hidden_size;
  const int specs = (int)params_.layout().specs().size();
  auto ready = [&](int begin, int end) {
    if (grad_ready_ && begin < end) grad_ready_(begin, end);
  };
  const float* last = output_buffer(slot);
  if (placement_.post_process) {
    // The tied output layer: d(final_ln_out) and the word-embedding gradient.
    output_layer_.backward(a.logits, a.final_ln_out, scratch_.d_hidden, rows);
    kernels::layernorm_backward(scratch_.d_hidden, last, final_ln_weight_.value, a.final_ln_mean,
                                a.final_ln_rstd, d_residual_, final_ln_weight_.grad,
                                final_ln_bias_.grad, rows, h, false);
    ready(specs - 2, specs);                   // final LayerNorm
    if (!placement_.pre_process) ready(0, 1);  // the tied embedding copy
  } else {
    std::copy_n(a.output_grad, (long)rows * h, d_residual_);
  }
  for (int l = (int)layers_.size() - 1; l >= 0; --l) {
    const float* x = l == 0 ? a.input : a.layers[l - 1].output;
    // A recomputed layer rebuilds its activations from its input; the kernels are
    // deterministic, so the gradients are bit-identical to keeping them.
    if (l < recompute_layers_) layers_[l].forward(x, a.layers[l], scratch_, batch, seq);
    layers_[l].backward(x, a.layers[l], d_residual_, scratch_, batch, seq);
    ready(layer_first_spec_[l], layer_first_spec_[l] + kParamsPerLayer);
  }
  if (placement_.pre_process) {
    embedding_.backward(a.input_ids.data(), batch, seq, d_residual_);
    ready(0, 2);  // word and position embeddings
  }
}

double GPTModel::forward_backward(const int* tokens, int batch, int seq, float grad_scale) {
  double loss = forward_chunk(0, tokens, batch, seq, grad_scale);
  backward_chunk(0, batch, seq);
  return loss;
}

double GPTModel::forward(const int* tokens, int batch, int seq, float* per_token_loss) {
  return forward_chunk(0, tokens, batch, seq, 0.f, per_token_loss);
}

}  // namespace trident
