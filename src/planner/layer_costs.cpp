#include "planner/layer_costs.h"

#include <algorithm>
#include <cmath>

#include "tensor_parallel/lm_head_loss.h"

namespace trident::planner {

namespace {

// The attention half of a layer and the LayerNorms and residual adds around both halves.
LayerWork attention_work(const ModelConfig& m, int tensor, int micro_batch, bool sequence_parallel,
                         int context) {
  const double t = tensor, s = m.seq_length, T = micro_batch * s / context, h = m.hidden_size;
  const double heads = m.num_attention_heads / t, d = m.head_dim();
  LayerWork w;
  // q, k, v (fewer key/value rows with grouped-query attention) and the projection.
  const double attn = (double)m.attention_width() / t;  // h / t unless --kv-channels
  w.gemms = {{T, (double)m.qkv_projection_local(tensor), h}, {T, h, attn}};
  // Each query against the keys it attends (fewer with a sliding window).
  w.attention_flops = 2 * (2 * micro_batch * heads * s * m.attention_keys(s) * d) / context;
  // Element accesses of trident's kernels, forward: LayerNorms read and write h (2 x 2h);
  // the QKV bias is read and written (6h/t); attention reads q, k, v and writes its output
  // (4h/t); the two bias + residual adds read two tensors and write one (2 x 3h).
  w.elementwise = T * (10 * h / (sequence_parallel ? t : 1) + 10 * attn);
  // --qk-layernorm reads and writes q and k once more, forward.
  if (m.qk_layernorm) w.elementwise += T * 2.0 * m.qkv_projection_local(tensor);
  return w;
}

void count_weights(LayerWork& w) {
  w.weight_elements = 0;
  for (const Gemm& g : w.gemms) w.weight_elements += g.n * g.k;
}

}  // namespace

LayerWork transformer_layer_work(const ModelConfig& m, int tensor, int micro_batch,
                                 bool sequence_parallel, int context) {
  const double t = tensor, T = (double)micro_batch * m.seq_length / context, h = m.hidden_size;
  const double ffn = m.ffn();
  LayerWork w = attention_work(m, tensor, micro_batch, sequence_parallel, context);
  // fc1 ([gate | up] with SwiGLU) and fc2; bias + GeLU reads the pre-activation and writes
  // it and the activation (3 ffn/t).
  w.gemms.push_back({T, m.fc1_rows() / t, h});
  w.gemms.push_back({T, h, ffn / t});
  w.elementwise += T * 3 * ffn / t;
  count_weights(w);
  return w;
}

LayerWork moe_layer_work(const ModelConfig& m, int tensor, int micro_batch, bool sequence_parallel,
                         int expert) {
  const double t = tensor, T = (double)micro_batch * m.seq_length, h = m.hidden_size;
  const double E = m.moe.num_experts, k = m.moe.router_topk, ep = expert;
  const double f = m.moe_ffn(), fc1 = m.swiglu ? 2 * f : f;
  LayerWork w = attention_work(m, tensor, micro_batch, sequence_parallel, 1);
  w.deferred_gemms = (int)w.gemms.size();  // the attention's (model/moe_layer.h: not the MoE MLP's)
  // The router on the micro-batch's tokens (fp32 logits [T, E]); then each of this rank's
  // E / EP experts on its share of the T k rows its expert group routes (balanced: every
  // expert gets T k / E rows of each of the EP ranks' micro-batches), column- and
  // row-parallel over t as the dense MLP.
  w.gemms.push_back({T, E, h});
  // With a capacity an expert gets at most `capacity` rows of each rank (exactly that when
  // padded: model/moe_layer.h MoeDims::expert_rows).
  double rows = T * k * ep / E;
  if (!m.moe.dropless()) {
    const double capped = ep * std::ceil(T * k / E * m.moe.expert_capacity_factor);
    rows = m.moe.pad_expert_input_to_capacity ? capped : std::min(rows, capped);
  }
  for (int e = 0; e < (int)(E / ep); ++e) {
    w.gemms.push_back({rows, fc1 / t, h});
    w.gemms.push_back({rows, h, f / t});
  }
  // The softmax and top-k over [T, E]; the permutation and the unpermutation read and write
  // T k rows of h (2 x 2 k h); the activation as the dense MLP's on the received rows, and
  // the routing weight applied to it (read and write).
  w.elementwise += T * (3 * E + 4 * k * h) + rows * E / ep * (3 * f / t + 2 * f / t);
  // Shared experts: a dense MLP of width S on every token, split over t, and its gate.
  if (const double s = m.moe.shared_expert_intermediate_size; s > 0) {
    w.gemms.push_back({T, (m.swiglu ? 2 * s : s) / t, h});
    w.gemms.push_back({T, h, s / t});
    if (m.moe.shared_expert_gate) w.gemms.push_back({T, 1, h});
    w.elementwise += T * 3 * s / t;
  }
  count_weights(w);
  return w;
}

HeadWork output_layer_work(const ModelConfig& m, int tensor, int micro_batch, int context) {
  const long T = (long)micro_batch * m.seq_length / context;
  const int vocab_local = m.padded_vocab_size(tensor) / tensor;
  const double rows = tensor_parallel::lm_head_chunk_rows(T, vocab_local, m.hidden_size);
  HeadWork w;
  w.logits = {rows, (double)vocab_local, (double)m.hidden_size};
  w.chunks = T / rows;
  w.logits_elements = (double)T * vocab_local;
  w.elementwise = 2.0 * T * m.hidden_size;
  w.weight_elements = (double)vocab_local * m.hidden_size;
  w.rows = rows;
  return w;
}

double gemm_seconds(const Cluster& c, const Gemm& g) {
  const double flops = g.flops();
  if (flops <= 0) return 0;
  return flops / (c.device.peak_tflops * 1e12 * c.gemm.at(g.m, g.n, g.k));
}

double attention_seconds(const Cluster& c, double flops) {
  if (flops <= 0) return 0;
  // Without a measured efficiency the core runs like the products of its size (on GPUs a
  // fused attention kernel is close to its GEMMs).
  const double efficiency =
      c.kernels.attention_efficiency > 0 ? c.kernels.attention_efficiency : c.gemm.at(flops / 2);
  return flops / (c.device.peak_tflops * 1e12 * efficiency);
}

double elementwise_seconds(const Cluster& c, double accesses) {
  return accesses * c.kernels.elementwise_ns(c.device) * 1e-9;
}

double cross_entropy_seconds(const Cluster& c, double logits) {
  return logits * c.kernels.cross_entropy_ns(c.device) * 1e-9;
}

double memory_traffic_seconds(const Cluster& c, double elements, double bytes_per_element) {
  if (c.device.memory_bandwidth_gbs <= 0) return 0;
  return elements * bytes_per_element / (c.device.memory_bandwidth_gbs * 1e9);
}

double layer_accumulate_seconds(const Cluster& c, const LayerWork& w, kernels::Precision p) {
  if (!c.kernels.separate_gradient_accumulation) return 0;
  return memory_traffic_seconds(c, w.weight_elements, p == kernels::Precision::kBf16 ? 16 : 8);
}

// Per micro-batch: each row chunk (the last may be short) adds its own weight gradient.
double head_accumulate_seconds(const Cluster& c, const HeadWork& w, kernels::Precision p,
                               int hidden) {
  if (!c.kernels.separate_gradient_accumulation) return 0;
  const bool fresh = p == kernels::Precision::kBf16 && w.rows >= hidden;
  return std::ceil(w.chunks - 1e-9) * memory_traffic_seconds(c, w.weight_elements, fresh ? 16 : 8);
}

PassSeconds layer_forward_seconds(const Cluster& c, const LayerWork& w) {
  PassSeconds p;
  for (const Gemm& g : w.gemms) p.gemm += gemm_seconds(c, g);
  p.other = attention_seconds(c, w.attention_flops) + elementwise_seconds(c, w.elementwise);
  return p;
}

PassSeconds layer_backward_seconds(const Cluster& c, const LayerWork& w) {
  PassSeconds f = layer_forward_seconds(c, w);
  return {2 * f.gemm, 2 * f.other};
}

// trident's fused output layer does all its work in the forward pass when training: per row
// chunk the logits, the cross-entropy and d(logits), then d(input) and the weight gradient
// (two more products of the same size); backward is only the final LayerNorm's.
PassSeconds head_forward_seconds(const Cluster& c, const HeadWork& w) {
  return {3 * w.chunks * gemm_seconds(c, w.logits),
          cross_entropy_seconds(c, w.logits_elements) + elementwise_seconds(c, w.elementwise)};
}

PassSeconds head_backward_seconds(const Cluster& c, const HeadWork& w) {
  return {0, elementwise_seconds(c, 2 * w.elementwise)};
}

}  // namespace trident::planner
