#include "model/chunk_memory.h"

#include <algorithm>
#include <string>
#include <vector>

#include "tensor_parallel/lm_head_loss.h"

namespace trident {

long ChunkShape::logits_chunk_floats() const {
  const int t = tensor_parallel_size;
  return (long)logits_chunk_rows * (config.padded_vocab_size(t) / t);
}

std::pair<long, long> ChunkShape::operand_sizes() const {
  const long h = config.hidden_size, t = tensor_parallel_size;
  const long widest =
      std::max({h, config.qkv_projection_local((int)t), (long)config.fc1_rows() / t});
  // In bf16 runs the only linear input stored in fp32 is the attention output, and the
  // cross-entropy writes the output layer's d(logits) in bf16 itself.
  const bool bf16 = options.precision == kernels::Precision::kBf16;
  const long head = options.placement.post_process && !bf16 ? logits_chunk_floats() : 0L;
  const long widest_in = bf16 ? h / t : std::max(h, (long)config.ffn() / t);
  // (SwiGLU's fc1 pre-activation gradient is an output operand, counted in widest.)
  return {std::max(tokens() * widest, head), tokens() * widest_in};
}

long ChunkShape::largest_layer_weight() const {
  const long h = config.hidden_size, t = tensor_parallel_size;
  return std::max(config.qkv_projection_local((int)t) * h, (long)config.fc1_rows() / t * h);
}

int ChunkShape::held_sets() const {
  const int n = options.slots;
  if (options.deferred_weight_grads <= 0) return n;
  return options.unfinished > 0 ? std::max(n, options.unfinished)
                                : n + options.deferred_weight_grads;
}

long ChunkShape::deferred_weight_grad_floats() const {
  const long h = config.hidden_size, t = tensor_parallel_size, n = tokens();
  const long attn = h / t, ffn = config.ffn() / t, fc1 = config.fc1_rows() / t;
  const bool bf16 = options.precision == kernels::Precision::kBf16;
  auto operand = [&](long width) { return bf16 ? (n * width + 1) / 2 : n * width; };
  // The attention input is one product (linear_qkv, or linear_q and linear_kv fused without
  // biases) or, with grouped-query attention and biases, linear_q's and linear_kv's.
  const bool split_qkv = config.group_query_attention && config.add_bias_linear();
  std::vector<long> qkv_dy = {operand(config.qkv_projection_local((int)t))};
  if (split_qkv) qkv_dy = {operand(attn), operand(config.kv_rows_local((int)t))};
  const long qkv_products = (long)qkv_dy.size();
  // A recomputed layer's activations are rebuilt in shared buffers during B: every product
  // keeps its x [n, in] and dy [n, out].
  long recomputed = operand(attn) + operand(h) +  // proj
                    operand(h) + operand(fc1) +   // fc1 ([gate | up] with SwiGLU)
                    operand(ffn) + operand(h);    // fc2
  for (long dy : qkv_dy) recomputed += operand(h) + dy;
  // A held layer: each output gradient goes to a buffer of the layer that B has passed
  // (WeightGradStore's donation, first come first served) where it fits: q|kv's to qkv,
  // fc1's to fc1 out (always fits), linear_proj's to the residual after attention and
  // linear_fc2's to the layer's output (not the chunk's last layer's: that is the chunk's
  // output). The residual and output hold this rank's rows only under sequence
  // parallelism, the gradients all rows.
  const long rows_h = local_tokens() * h;
  long held = 0, used = 0;
  for (long dy : qkv_dy) {
    if (used + dy <= n * config.qkv_projection_local((int)t))
      used += dy;
    else
      held += dy;
  }
  if (operand(h) > rows_h) held += operand(h);             // linear_proj
  if (options.recompute_attention) held += operand(attn);  // the shared attention output
  // Sequence parallelism keeps 1/t of the LayerNorm outputs; the column-parallel products
  // take them all-gathered, which exists only during B.
  if (sequence_parallel) held += (qkv_products + 1) * operand(h);
  const long fc2_copies = operand(h) > rows_h ? layers - recomputed_layers : 1;
  return recomputed_layers * recomputed + (layers - recomputed_layers) * held +
         (layers > recomputed_layers ? fc2_copies * operand(h) : 0);
}

LayoutSizes layout_sizes(const ModelConfig& config, TensorParallelRank tp,
                         const ChunkPlacement& placement) {
  ParameterLayout layout(config, tp, placement);
  LayoutSizes sizes{layout.total(), 0};
  for (const ParamSpec& spec : layout.specs())
    if (spec.local_shape.size() == 2)
      sizes.largest_weight = std::max(sizes.largest_weight, spec.numel());
  return sizes;
}

ChunkShape chunk_shape(const ModelConfig& config, TensorParallelRank tp, int micro_batch, int seq,
                       const ChunkOptions& options, const LayoutSizes& sizes) {
  ChunkShape s;
  s.config = config;
  s.tensor_parallel_size = tp.size;
  s.micro_batch = micro_batch, s.seq = seq;
  s.options = options;
  s.options.slots = std::max(1, options.slots);
  s.sequence_parallel = options.sequence_parallel && tp.size > 1 && !options.inference;
  const ChunkPlacement& p = options.placement;
  s.layers = p.num_layers < 0 ? config.num_layers - p.first_layer : p.num_layers;
  s.recomputed_layers = std::clamp(options.recompute_layers, 0, s.layers);
  s.recompute_group = std::clamp(options.recompute_group, 1, std::max(1, s.recomputed_layers));
  const long pad = options.pad_multiple;
  s.parameter_floats = (sizes.parameters + pad - 1) / pad * pad;
  // Grouped-query attention's fused q|kv product reads two adjacent tensors as one weight.
  s.largest_weight =
      std::max(sizes.largest_weight, s.layers > 0 && config.group_query_attention
                                         ? config.qkv_projection_local(tp.size) * config.hidden_size
                                         : 0L);
  const int vocab_local = config.padded_vocab_size(tp.size) / tp.size;
  s.logits_chunk_rows = options.logits_chunk_rows > 0
                            ? (int)std::min<long>(options.logits_chunk_rows, s.tokens())
                            : tensor_parallel::lm_head_chunk_rows(s.tokens(), vocab_local);
  return s;
}

ChunkShape chunk_shape(const ModelConfig& config, TensorParallelRank tp, int micro_batch, int seq,
                       const ChunkOptions& options) {
  return chunk_shape(config, tp, micro_batch, seq, options,
                     layout_sizes(config, tp, options.placement));
}

namespace {

// With sequence parallelism every [tokens, h] tensor outside the tensor-parallel region
// (LayerNorm outputs and statistics, residuals, layer outputs, boundary tensors) is planned
// at `local` = tokens / t rows; qkv, attention and MLP tensors are [tokens, * / t] anyway.
void plan_layer_activations(const ChunkShape& s, MemoryPlan& plan) {
  const long tokens = s.tokens(), h = s.config.hidden_size, t = s.tensor_parallel_size;
  const long local = s.local_tokens();
  const long attn_local = h / t, ffn_local = s.config.ffn() / t;
  const long heads_local = s.config.num_attention_heads / t;
  const long fc1_local = s.config.fc1_rows() / t;
  const bool swiglu = s.config.swiglu;
  const int n = s.options.slots, recomputed = s.recomputed_layers, group = s.recompute_group;
  const int per_layer = (s.layers - recomputed) * n;  // layers that keep their activations
  // Selective recomputation: the attention core's outputs exist once, rebuilt in backward.
  const bool selective = s.options.recompute_attention;
  const char* A = "activations";
  // Activations only matrix products read are bf16 in bf16 runs (two to a float).
  const bool bf16 = s.options.precision == kernels::Precision::kBf16;
  auto gemm_input_floats = [&](long n) { return bf16 ? (n + 1) / 2 : n; };
  const std::string gemm_only = bf16 ? " (bf16)" : "";
  // Zero-bubble schedules hold what W reads (see ChunkShape::held_sets) from F to W: those
  // buffers of the layers that are not recomputed have `held` copies instead of `copies`.
  const int held_sets = s.held_sets();
  const bool deferring = s.options.deferred_weight_grads > 0;
  const std::string to_w = deferring ? " (held to W)" : "";
  auto add_layer_buffers = [&](const std::string& prefix, int copies) {
    const bool kept = prefix.empty();
    const int held = kept ? (s.layers - recomputed) * held_sets : copies;
    const std::string w = kept ? to_w : "";
    plan.add(A, prefix + "ln1 out" + gemm_only + w, gemm_input_floats(local * h), held);
    plan.add(A, prefix + "ln1/ln2 mean+rstd", 4 * local, copies);
    // What the projections write (grouped-query attention: h / t + 2 G d / t, k and v
    // never expanded to every head).
    plan.add(A, prefix + "qkv" + w, tokens * s.config.qkv_projection_local((int)t), held);
    if (!kept || !selective) {
      plan.add(A, prefix + "attention out" + w, tokens * attn_local, held);
      plan.add(A, prefix + "attention log-sum-exp", s.micro_batch * heads_local * s.seq, copies);
    }
    plan.add(A, prefix + "residual after attention" + w, local * h, held);
    plan.add(A, prefix + "ln2 out" + gemm_only + w, gemm_input_floats(local * h), held);
    plan.add(A, prefix + (swiglu ? "fc1 out (gate | up)" : "fc1 out (pre-GeLU)") + w,
             tokens * fc1_local, held);
    plan.add(A, prefix + (swiglu ? "SwiGLU out" : "GeLU out") + gemm_only + w,
             gemm_input_floats(tokens * ffn_local), held);
  };
  plan.add(A, s.options.placement.pre_process ? "embedding output" : "received input", local * h,
           n);
  if (per_layer > 0) add_layer_buffers("", per_layer);
  // Kept per slot: the outputs of the layers that are not recomputed and of each group's
  // last layer (the next group's input; the last group's is the chunk's output).
  const int groups = (recomputed + group - 1) / group;
  // Zero-bubble schedules hold the outputs of the layers that are not recomputed (linear_fc2's
  // output gradient goes there in B) but the chunk's last, which is the chunk's output.
  const int held_outputs = deferring ? std::max(0, s.layers - recomputed - 1) : 0;
  if (held_outputs > 0) plan.add(A, "layer output" + to_w, local * h, held_outputs * held_sets);
  plan.add(A, "layer output", local * h, (s.layers - recomputed - held_outputs + groups) * n);
  if (recomputed > 0) {
    // Backward recomputes a whole group before the group's backward runs through it, so
    // all its layers' activations exist at once, with the outputs inside the group (the
    // next layer's input). The group's last output is rewritten into a spare buffer
    // instead (see GPTModel::recompute_group), so one group needs no more than this.
    add_layer_buffers("recompute: ", group);
    if (group > 1) plan.add(A, "recompute: outputs within a group", local * h, group - 1);
  }
  if (selective && per_layer > 0) {
    plan.add(A, "recompute: attention out", tokens * attn_local);
    plan.add(A, "recompute: attention log-sum-exp", s.micro_batch * heads_local * s.seq);
  }
  if (s.options.placement.post_process) {
    plan.add(A, "final ln out" + gemm_only, gemm_input_floats(local * h), n);
    plan.add(A, "final ln mean + rstd", 2 * local, n);
    plan.add(A, "d(final ln out) from the fused output layer + loss", local * h, n);
    plan.add(A, "per-token loss", tokens, n);
  } else {
    plan.add(A, "received output gradient", local * h, n);
  }
  if (s.options.deferred_weight_grads > 0 && s.layers > 0)
    plan.add(A, "zb-h1: weight-gradient operands copied from B to W",
             s.deferred_weight_grad_floats(), s.options.deferred_weight_grads);
}

void plan_scratch(const ChunkShape& s, MemoryPlan& plan) {
  const long tokens = s.tokens(), h = s.config.hidden_size, t = s.tensor_parallel_size;
  const long attn_local = h / t, ffn_local = s.config.ffn() / t;
  const bool bf16 = s.options.precision == kernels::Precision::kBf16;
  const char* S = "scratch";
  plan.add(S, "residual gradient", s.local_tokens() * h);
  if (s.sequence_parallel)  // the LayerNorm output all-gathered for qkv / fc1 and the head
    plan.add(S, std::string("all-gathered LayerNorm output") + (bf16 ? " (bf16)" : ""),
             bf16 ? (tokens * h + 1) / 2 : tokens * h);
  plan.add(S, "row-parallel out + d_hidden", 2 * tokens * h);
  plan.add(S, "d_ffn", tokens * ffn_local);
  const ModelConfig& c = s.config;
  plan.add(S, "d_attn + d_qkv", tokens * (attn_local + c.qkv_projection_local((int)t)));
  if (s.options.placement.post_process) {
    plan.add(S, "logits / dlogits of one row chunk", s.logits_chunk_floats());
    if (bf16) plan.add(S, "bf16 dlogits of one row chunk", (s.logits_chunk_floats() + 1) / 2);
  }
}

void plan_low_precision(const ChunkShape& s, MemoryPlan& plan) {
  const auto [act, in] = s.operand_sizes();
  const char* P = "parameters";
  const char* S = "scratch";
  switch (s.options.precision) {
    case kernels::Precision::kFp32:
      return;
    case kernels::Precision::kBf16:
      plan.add(P, "bf16 weight copy", (s.parameter_floats + 1) / 2);
      plan.add(S, "bf16 GEMM operands", (act + 1) / 2 + (in + 1) / 2);
      if (s.layers > 0 && !s.options.inference)
        plan.add(S, "bf16: one layer's fresh weight gradient", s.largest_layer_weight());
      return;
    case kernels::Precision::kFp16:
      plan.add(P, "fp16 weight copy", (s.parameter_floats + 1) / 2);
      plan.add(S, "fp16-rounded GEMM operands", act + in + s.largest_weight);
      return;
  }
}

}  // namespace

MemoryPlan plan_chunk_memory(const ChunkShape& s) {
  MemoryPlan plan;
  plan.add("parameters", "weights", s.parameter_floats);
  if (!s.options.inference) {
    plan.add("parameters", "gradients", s.parameter_floats);
    plan.add("optimizer", "adam exp_avg + exp_avg_sq", 2 * s.parameter_floats);
  }
  plan_layer_activations(s, plan);
  plan_scratch(s, plan);
  plan_low_precision(s, plan);
  return plan;
}

}  // namespace trident
