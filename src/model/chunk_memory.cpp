#include "model/chunk_memory.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "context_parallel/buffers.h"
#include "model/expert_rows.h"
#include "tensor_parallel/lm_head_loss.h"

namespace trident {

long ChunkShape::logits_chunk_floats() const {
  const int t = tensor_parallel_size;
  return (long)logits_chunk_rows * (config.padded_vocab_size(t) / t);
}

std::pair<long, long> ChunkShape::operand_sizes() const {
  const long h = config.hidden_size, t = tensor_parallel_size, attn = config.attention_width() / t;
  const long widest =
      std::max({h, attn, config.qkv_projection_local((int)t), (long)config.fc1_rows() / t});
  // In bf16 runs the only linear input stored in fp32 is the attention output, and the
  // cross-entropy writes the output layer's d(logits) in bf16 itself.
  const bool bf16 = options.precision == kernels::Precision::kBf16;
  const long head = options.placement.post_process && !bf16 ? logits_chunk_floats() : 0L;
  const long widest_in = bf16 ? attn : std::max({h, attn, (long)config.ffn() / t});
  // (SwiGLU's fc1 pre-activation gradient is an output operand, counted in widest.)
  return {std::max(tokens() * widest, head), tokens() * widest_in};
}

long ChunkShape::largest_layer_weight() const {
  const long h = config.hidden_size, t = tensor_parallel_size;
  return std::max({config.qkv_projection_local((int)t) * h, (long)config.fc1_rows() / t * h,
                   config.attention_width() / t * h});
}

int ChunkShape::held_sets() const {
  const int n = options.slots;
  if (options.deferred_weight_grads <= 0) return n;
  return options.unfinished > 0 ? std::max(n, options.unfinished)
                                : n + options.deferred_weight_grads;
}

long ChunkShape::deferred_weight_grad_floats() const {
  const long h = config.hidden_size, t = tensor_parallel_size, n = tokens();
  const long attn = config.attention_width() / t, ffn = config.ffn() / t,
             fc1 = config.fc1_rows() / t;
  const bool bf16 = options.precision == kernels::Precision::kBf16;
  auto operand = [&](long width) { return bf16 ? (n * width + 1) / 2 : n * width; };
  // The attention input is one product (linear_qkv, or linear_q and linear_kv fused without
  // biases) or, with grouped-query attention and biases, linear_q's and linear_kv's.
  const bool split_qkv = config.group_query_attention && config.qkv_bias();
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

namespace {

LayoutSizes sizes_of_layout(const ModelConfig& config, TensorParallelRank tp,
                            const ChunkPlacement& placement, int expert_parallel,
                            int expert_tensor_parallel) {
  ParameterLayout layout(config, tp, placement, dense_expert_slice(config, expert_parallel));
  LayoutSizes sizes{layout.total(), 0, 0, {}};
  if (splits_experts(config, expert_parallel))
    sizes.experts = ParameterLayout(config, expert_tensor_rank(tp, expert_tensor_parallel),
                                    placement, expert_buffer_slice(config, expert_parallel, 0))
                        .total();
  for (const ParamSpec& spec : layout.specs()) {
    if (spec.local_shape.size() == 2)
      sizes.largest_weight = std::max(sizes.largest_weight, spec.numel());
    sizes.tensors.emplace_back(spec.offset, spec.numel());
  }
  const std::vector<ParamSpec>& specs = layout.specs();
  for (auto [begin, end] : weight_units(layout)) {
    const long stop = end < (int)specs.size() ? specs[end].offset : layout.total();
    sizes.units.emplace_back(specs[begin].offset, stop - specs[begin].offset);
  }
  return sizes;
}

}  // namespace

LayoutSizes layout_sizes(const ModelConfig& config, TensorParallelRank tp,
                         const ChunkPlacement& placement, int expert_parallel,
                         int expert_tensor_parallel) {
  const int layers =
      placement.num_layers < 0 ? config.num_layers - placement.first_layer : placement.num_layers;
  if (layers <= kLayersSizedWhole)
    return sizes_of_layout(config, tp, placement, expert_parallel, expert_tensor_parallel);
  // Every layer has the same tensors, each padded on its own (parameters/parameter_layout.h):
  // a chunk of L layers is one of 1 layer and L - 1 times the second layer's share. Built
  // whole, the layout of 10^8 layers named 10^9 tensors before anything could refuse it.
  // (No tensor list then: gradient buckets are not cut, and planned as one.)
  ChunkPlacement one = placement, two = placement;
  one.num_layers = 1, two.num_layers = 2;
  const LayoutSizes a = sizes_of_layout(config, tp, one, expert_parallel, expert_tensor_parallel),
                    b = sizes_of_layout(config, tp, two, expert_parallel, expert_tensor_parallel);
  return {a.parameters + (long)(layers - 1) * (b.parameters - a.parameters),
          a.experts + (long)(layers - 1) * (b.experts - a.experts),
          std::max(a.largest_weight, b.largest_weight)};
}

long lora_adapter_floats(const ModelConfig& config, TensorParallelRank tp,
                         const ChunkPlacement& placement, long pad_multiple) {
  if (!config.lora.enabled()) return 0;
  const int layers =
      placement.num_layers < 0 ? config.num_layers - placement.first_layer : placement.num_layers;
  ChunkPlacement one = placement;
  one.num_layers = 1;
  const long floats =
      layers > 0 ? layers * ParameterLayout::lora_adapters(config, tp, one).total() : 0;
  return (floats + pad_multiple - 1) / pad_multiple * pad_multiple;
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
  const long expert_pad = options.expert_pad_multiple;
  s.expert_floats = (sizes.experts + expert_pad - 1) / expert_pad * expert_pad;
  if (sizes.experts > 0) s.local_experts = config.moe.num_experts / options.expert_parallel;
  s.lora_floats = lora_adapter_floats(config, tp, p, pad);
  // Grouped-query attention's fused q|kv product reads two adjacent tensors as one weight.
  s.largest_weight =
      std::max(sizes.largest_weight, s.layers > 0 && config.group_query_attention
                                         ? config.qkv_projection_local(tp.size) * config.hidden_size
                                         : 0L);
  s.logits_chunk_rows = logits_chunk_rows(config, tp.size, s.tokens(), options);
  return s;
}

int logits_chunk_rows(const ModelConfig& config, int t, long tokens, const ChunkOptions& options) {
  const int vocab_local = config.padded_vocab_size(t) / t;
  return options.logits_chunk_rows > 0
             ? (int)std::min<long>(options.logits_chunk_rows, tokens)
             : tensor_parallel::lm_head_chunk_rows(tokens, vocab_local, config.hidden_size);
}

ChunkShape chunk_shape(const ModelConfig& config, TensorParallelRank tp, int micro_batch, int seq,
                       const ChunkOptions& options) {
  return chunk_shape(config, tp, micro_batch, seq, options,
                     layout_sizes(config, tp, options.placement, options.expert_parallel,
                                  options.expert_tensor_parallel));
}

bool ChunkShape::output_held(int l) const {
  return deferring() && l >= recomputed_layers && l + 1 < layers;
}

bool ChunkShape::output_in_slot(int l) const {
  if (l >= recomputed_layers) return !output_held(l);
  return l + 1 == recomputed_layers || (l + 1) % recompute_group == 0;  // its group's last
}

std::string context_parallel_row(context_parallel::CpCommType type) {
  switch (type) {
    case context_parallel::CpCommType::kP2p:
      return "context-parallel attention: q, out and key/value blocks (ring, double-buffered)";
    case context_parallel::CpCommType::kA2a:
      return "context-parallel attention: all-to-all buffers and head-split sequence";
    case context_parallel::CpCommType::kAllGather:
      return "context-parallel attention: the gathered whole sequence";
  }
  return "context-parallel attention";
}

long ChunkBuffer::floats() const {
  return std::accumulate(parts.begin(), parts.end(), 0L);
}

namespace {

using Home = BufferHome;
using Field = BufferField;

// Appends rows of one group ("activations", "scratch", ...) to the table.
class Rows {
 public:
  Rows(std::vector<ChunkBuffer>& table, const char* group) : table_(table), group_(group) {}
  void add(std::string name, Home home, Field field, int copies, std::vector<long> parts) {
    table_.push_back({group_, std::move(name), std::move(parts), copies, home, field});
  }

 private:
  std::vector<ChunkBuffer>& table_;
  const char* group_;
};

// --qk-layernorm: the q heads and key / value heads one rank normalises per token.
long qk_norm_heads(const ModelConfig& c, int t) {
  if (!c.qk_layernorm) return 0;
  return c.num_attention_heads / t + c.kv_rows_local(t) / 2 / c.head_dim();
}

// One copy of each activation, in floats. With sequence parallelism every [tokens, h]
// tensor outside the tensor-parallel region (LayerNorm outputs and statistics, residuals,
// layer outputs, boundary tensors) has `local` = tokens / t rows; qkv, attention and MLP
// tensors are [tokens, * / t] anyway.
struct ActivationSizes {
  long tokens, local, h, attn, ffn, fc1, qkv, lse;
  long qk_heads;  // --qk-layernorm: q and k heads a rank normalises (0 without)
  bool bf16;
  std::string bf16_note;  // the names of buffers kept in bf16 say so

  explicit ActivationSizes(const ChunkShape& s)
      : tokens(s.tokens()),
        local(s.local_tokens()),
        h(s.config.hidden_size),
        attn(s.config.attention_width() / s.tensor_parallel_size),
        ffn(s.config.ffn() / s.tensor_parallel_size),
        fc1(s.config.fc1_rows() / s.tensor_parallel_size),
        qkv(s.config.qkv_projection_local(s.tensor_parallel_size)),
        lse((long)s.micro_batch * (s.config.num_attention_heads / s.tensor_parallel_size) * s.seq),
        qk_heads(qk_norm_heads(s.config, s.tensor_parallel_size)),
        bf16(s.options.precision == kernels::Precision::kBf16),
        bf16_note(bf16 ? " (bf16)" : "") {}
  // Activations only matrix products read are bf16 in bf16 runs (two to a float).
  long gemm_input(long n) const { return bf16 ? (n + 1) / 2 : n; }
};

// One layer's activations, as either the kept layers or the recompute group have them:
// `held` copies of those W reads (see ChunkShape::held_sets), `copies` of the others.
struct LayerRows {
  std::string prefix, held_suffix;
  Home held_home, other_home;
  int held, copies;
  bool own_attention_core;  // false: selective recomputation shares one (see add_layers)
  // The dense MLP's fc1 out and activation: the kept layers that are not MoE have them (an
  // MoE layer's experts keep their own rows), the recompute group in every layer.
  Home mlp_home;
  int mlp_held;
};

// An MoE layer's MLP activations: the rows its experts receive, dropless at most
// EP x tokens x min(k, E/EP) (MoeDims::expert_rows; tokens x k, the exact size, at EP = 1),
// with a capacity at most E x capacity (exactly that when padded), each F / ETP wide in fc1
// and its activation; the shared experts' fc1 out and activation on every token. `tokens` counts
// every row of the micro-batch at ETP = t: with sequence parallelism the layer routes the
// all-gathered rows; at ETP = 1 < t this rank's tokens / t rows (MoeDims::routed_tokens). The kept
// MoE layers have them; the recompute group has them in every layer when any recomputed layer is
// MoE (a group's layers change from group to group). A kept MoE layer has no dense fc1 buffers
// (LayerRows::mlp_held).
MoeDims planned_moe_dims(const ChunkShape& s) {
  MoeDims d = moe_dims(s.config, 0.0, 0.0, s.tensor_parallel_size, s.options.expert_tensor_parallel,
                       s.sequence_parallel);
  d.expert_parallel = s.options.expert_parallel;
  d.bf16 = s.options.precision == kernels::Precision::kBf16;
  d.fp16 = s.options.precision == kernels::Precision::kFp16;
  return d;
}

std::vector<long> moe_parts(const ChunkShape& s) {
  if (!s.config.moe.enabled()) return {};
  const MoeDims d = planned_moe_dims(s);
  return moe_activation_parts(d, d.routed_tokens(s.tokens()));
}
const char* const kMoeRow =
    "MoE router (probs, lse, top-k) + expert rows (input, fc1 out, act) + shared experts";

void add_layer_buffers(const ActivationSizes& z, const LayerRows& r, bool swiglu,
                       const std::vector<long>& moe, Rows& rows) {
  auto held = [&](const std::string& name, Field field, long floats) {
    rows.add(r.prefix + name + r.held_suffix, r.held_home, field, r.held, {floats});
  };
  auto other = [&](const std::string& name, Field field, std::vector<long> parts) {
    rows.add(r.prefix + name, r.other_home, field, r.copies, std::move(parts));
  };
  held("ln1 out" + z.bf16_note, Field::kLn1Out, z.gemm_input(z.local * z.h));
  other("ln1/ln2 mean+rstd", Field::kLnStats, {z.local, z.local, z.local, z.local});
  // What the projections write (grouped-query attention: h / t + 2 G d / t, k and v never
  // expanded to every head).
  held("qkv", Field::kQkv, z.tokens * z.qkv);
  if (z.qk_heads > 0)  // the norm's input and statistics, for its backward (read by B only)
    other("qkv before qk-norm + its rstd", Field::kQkNorm,
          {z.tokens * z.qkv, z.tokens * z.qk_heads});
  if (r.own_attention_core) {
    held("attention out", Field::kAttentionOut, z.tokens * z.attn);
    other("attention log-sum-exp", Field::kAttentionLse, {z.lse});
  }
  held("residual after attention", Field::kResidual, z.local * z.h);
  held("ln2 out" + z.bf16_note, Field::kLn2Out, z.gemm_input(z.local * z.h));
  if (r.mlp_held > 0) {
    auto mlp = [&](const std::string& name, Field field, long floats) {
      rows.add(r.prefix + name + r.held_suffix, r.mlp_home, field, r.mlp_held, {floats});
    };
    mlp(swiglu ? "fc1 out (gate | up)" : "fc1 out (pre-GeLU)", Field::kFc1Out, z.tokens * z.fc1);
    mlp((swiglu ? "SwiGLU out" : "GeLU out") + z.bf16_note, Field::kFc1Act,
        z.gemm_input(z.tokens * z.ffn));
  }
  if (!moe.empty()) other(kMoeRow, Field::kMoe, moe);  // read by B only
}

int count_layers(const ChunkShape& s, bool (ChunkShape::*where)(int) const) {
  int n = 0;
  for (int l = 0; l < s.layers; ++l) n += (s.*where)(l);
  return n;
}

// The layers' activations: the kept layers' (a zero-bubble schedule holds what W reads
// from F to W: those have held_sets copies instead of slots), their outputs, and one
// recompute group's.
void add_layers(const ChunkShape& s, const ActivationSizes& z, Rows& rows) {
  const int n = s.options.slots, kept = s.kept_layers(), group = s.recompute_group;
  const int sets = s.held_sets();
  const bool swiglu = s.config.swiglu;
  // Selective recomputation: the attention core's outputs exist once, rebuilt in backward.
  const bool selective = s.options.recompute_attention;
  const std::string to_w = s.deferring() ? " (held to W)" : "";
  const int dense_kept = count_layers(s, &ChunkShape::kept_dense_layer);
  if (kept > 0)
    add_layer_buffers(z,
                      {"", to_w, Home::kHeldLayers, Home::kSlotLayers, kept * sets, kept * n,
                       !selective, Home::kHeldDenseLayers, dense_kept * sets},
                      swiglu, {}, rows);
  if (const int moe = count_layers(s, &ChunkShape::kept_moe_layer); moe > 0)
    rows.add(kMoeRow, Home::kSlotMoeLayers, Field::kMoe, moe * n, moe_parts(s));
  if (const int held = count_layers(s, &ChunkShape::output_held); held > 0)
    rows.add("layer output" + to_w, Home::kHeldOutputs, Field::kLayerOutput, held * sets,
             {z.local * z.h});
  rows.add("layer output", Home::kSlotOutputs, Field::kLayerOutput,
           count_layers(s, &ChunkShape::output_in_slot) * n, {z.local * z.h});
  if (s.recomputed_layers > 0) {
    // Backward recomputes a whole group before the group's backward runs through it, so
    // all its layers' activations exist at once, with the outputs inside the group (the
    // next layer's input). The group's last output is rewritten into a spare buffer
    // instead (see GPTModel::recompute_group), so one group needs no more than this.
    const Home home = Home::kRecomputeGroup;
    bool moe = false;
    for (int l = 0; l < s.recomputed_layers; ++l) moe = moe || s.moe_layer(l);
    add_layer_buffers(z, {"recompute: ", "", home, home, group, group, true, home, group}, swiglu,
                      moe ? moe_parts(s) : std::vector<long>{}, rows);
    if (group > 1)
      rows.add("recompute: outputs within a group", Home::kRecomputeGroupInner, Field::kLayerOutput,
               group - 1, {z.local * z.h});
  }
  if (selective && kept > 0) {
    rows.add("recompute: attention out", Home::kChunk, Field::kAttentionOut, 1,
             {z.tokens * z.attn});
    rows.add("recompute: attention log-sum-exp", Home::kChunk, Field::kAttentionLse, 1, {z.lse});
  }
}

// The activations, with each slot's buffers at the chunk's edges: what comes in, what goes
// out or the loss.
void add_activations(const ChunkShape& s, std::vector<ChunkBuffer>& table) {
  const ActivationSizes z(s);
  Rows rows(table, "activations");
  const int n = s.options.slots;
  const ChunkPlacement& p = s.options.placement;
  rows.add(p.pre_process ? "embedding output" : "received input", Home::kSlots, Field::kChunkInput,
           n, {z.local * z.h});
  add_layers(s, z, rows);
  auto slot_row = [&](const std::string& name, Field field, std::vector<long> parts) {
    rows.add(name, Home::kSlots, field, n, std::move(parts));
  };
  if (p.post_process) {
    slot_row("final ln out" + z.bf16_note, Field::kFinalLnOut, {z.gemm_input(z.local * z.h)});
    slot_row("final ln mean + rstd", Field::kFinalLnStats, {z.local, z.local});
    slot_row("d(final ln out) from the fused output layer + loss", Field::kFinalLnGrad,
             {z.local * z.h});
    slot_row("per-token loss", Field::kLosses, {z.tokens});
  } else {
    slot_row("received output gradient", Field::kOutputGrad, {z.local * z.h});
  }
  if (s.deferring() && s.layers > 0)
    rows.add("zb-h1: weight-gradient operands copied from B to W", Home::kDeferredEntries,
             Field::kDeferredOperands, s.options.deferred_weight_grads,
             {s.deferred_weight_grad_floats()});
}

// The LoRA branches' (tensor_parallel/lora.h LoraScratch), of every row of the micro-batch
// (column-parallel inputs are all-gathered under sequence parallelism): u = x A^T and du;
// with --lora-dropout or in bf16 runs the fp32 input, as wide as the widest adapted input
// (h, or a row-parallel linear's h / t or f / t); in bf16 runs s u and s B rounded to bf16, B
// as tall as the widest output (qkv, fc1 or h).
void add_lora_scratch(const ChunkShape& s, const ActivationSizes& z, Rows& rows) {
  const long r = s.config.lora.rank;
  auto add = [&](const std::string& name, Field field, std::vector<long> parts) {
    rows.add(name, Home::kChunk, field, 1, std::move(parts));
  };
  add(kLoraBranchRow, Field::kLoraScratch, {z.tokens * r, z.tokens * r});
  if (s.config.lora.dropout > 0.f || z.bf16)
    add(kLoraInputRow, Field::kLoraInput, {z.tokens * std::max({z.h, z.attn, z.ffn})});
  if (z.bf16)
    add(kLoraLowRow, Field::kLoraLow, {(z.tokens * r + std::max({z.qkv, z.fc1, z.h}) * r + 1) / 2});
}

void add_scratch(const ChunkShape& s, std::vector<ChunkBuffer>& table) {
  const ActivationSizes z(s);
  Rows rows(table, "scratch");
  auto add = [&](const std::string& name, Field field, std::vector<long> parts) {
    rows.add(name, Home::kChunk, field, 1, std::move(parts));
  };
  add("residual gradient", Field::kResidualGrad, {z.local * z.h});
  if (s.sequence_parallel)  // the LayerNorm output all-gathered for qkv / fc1 and the head
    add("all-gathered LayerNorm output" + z.bf16_note, Field::kGatheredInput,
        {z.gemm_input(z.tokens * z.h)});
  add("row-parallel out + d_hidden", Field::kRowOutAndDHidden, {z.tokens * z.h, z.tokens * z.h});
  add("d_ffn", Field::kDFfn, {z.tokens * z.ffn});
  add("d_attn + d_qkv", Field::kDAttnAndDQkv, {z.tokens * z.attn, z.tokens * z.qkv});
  if (s.config.moe.enabled() && s.layers > 0)
    add("MoE router + expert rows scratch", Field::kMoeScratch,
        moe_scratch_parts(planned_moe_dims(s), planned_moe_dims(s).routed_tokens(s.tokens())));
  if (s.lora_floats > 0 && s.layers > 0 && !s.options.inference) add_lora_scratch(s, z, rows);
  if (s.options.placement.post_process) {
    add("logits / dlogits of one row chunk", Field::kLogits, {s.logits_chunk_floats()});
    if (z.bf16)
      add("bf16 dlogits of one row chunk", Field::kDLogits16, {(s.logits_chunk_floats() + 1) / 2});
  }
}

// Context parallelism: the buffers one attention call allocates while it runs (the ring's
// key/value blocks, double-buffered, and their gradients; all-to-all's and all-gather's
// whole-sequence copies), sized by context_parallel/buffers.h as the kernels size them. Taken
// from the heap during the call, not carved from the arena: planned as communication.
void add_context_parallel(const ChunkShape& s, std::vector<ChunkBuffer>& table) {
  const context_parallel::ContextParallel& cp = s.options.context_parallel;
  if (!cp.active() || s.layers == 0) return;
  const ModelConfig& m = s.config;
  const int heads = m.num_attention_heads / s.tensor_parallel_size;
  const int heads_per_kv = m.num_attention_heads / m.query_groups();
  const context_parallel::CpAttentionShape shape{
      s.micro_batch, s.seq, heads, (heads - 1) / heads_per_kv + 1, m.head_dim(), cp.size};
  Rows(table, "communication")
      .add(context_parallel_row(cp.type), Home::kOutsideArena, Field::kNone, 1,
           {context_parallel::attention_buffer_floats(cp.type, shape)});
}

// The 16-bit weight copy (Parameters' own) and the rounded GEMM operands.
void add_low_precision(const ChunkShape& s, std::vector<ChunkBuffer>& table) {
  const auto [act, in] = s.operand_sizes();
  Rows parameters(table, "parameters"), scratch(table, "scratch");
  auto weights = [&](const char* name) {
    parameters.add(name, Home::kOutsideArena, Field::kNone, 1, {(s.parameter_floats + 1) / 2});
  };
  switch (s.options.precision) {
    case kernels::Precision::kFp32:
      return;
    case kernels::Precision::kBf16:
      weights("bf16 weight copy");
      if (s.expert_floats > 0)  // expert parallelism: the expert buffer's own copy
        parameters.add(expert_weight_copy_row(s.options.precision), Home::kOutsideArena,
                       Field::kNone, 1, {(s.expert_floats + 1) / 2});
      scratch.add("bf16 GEMM operands", Home::kChunk, Field::kGemmOperands16, 1,
                  {(act + 1) / 2, (in + 1) / 2});
      if (s.layers > 0 && !s.options.inference && s.lora_floats == 0)  // LoRA: no dW at all
        scratch.add("bf16: one layer's fresh weight gradient", Home::kChunk, Field::kWeightGrad32,
                    1, {s.largest_layer_weight()});
      return;
    case kernels::Precision::kFp16:
      weights("fp16 weight copy");
      if (s.expert_floats > 0)  // as bf16's
        parameters.add(expert_weight_copy_row(s.options.precision), Home::kOutsideArena,
                       Field::kNone, 1, {(s.expert_floats + 1) / 2});
      scratch.add("fp16-rounded GEMM operands", Home::kChunk, Field::kGemmOperands32, 1,
                  {act, in, s.largest_weight});
      return;
  }
}

}  // namespace

std::vector<ChunkBuffer> chunk_buffers(const ChunkShape& s) {
  std::vector<ChunkBuffer> table;
  Rows parameters(table, "parameters"), optimizer(table, "optimizer");
  const Home owned = Home::kOutsideArena;
  parameters.add("weights", owned, Field::kNone, 1, {s.parameter_floats});
  if (s.lora_floats > 0) {  // LoRA: a frozen base; the adapters alone learn
    parameters.add(kLoraWeightsRow, owned, Field::kNone, 1, {s.lora_floats});
    if (!s.options.inference) {
      parameters.add(kLoraGradientsRow, owned, Field::kNone, 1, {s.lora_floats});
      optimizer.add(kLoraMomentsRow, owned, Field::kNone, 1, {2 * s.lora_floats});
    }
  } else if (!s.options.inference) {
    parameters.add("gradients", owned, Field::kNone, 1, {s.parameter_floats});
    optimizer.add("adam exp_avg + exp_avg_sq", owned, Field::kNone, 1, {2 * s.parameter_floats});
  }
  if (s.expert_floats > 0) {  // expert parallelism: this rank's experts, apart (training only)
    parameters.add(expert_weights_row(s.config, s.options.placement, s.options.expert_parallel),
                   owned, Field::kNone, 1, {s.expert_floats});
    parameters.add(kExpertGradientsRow, owned, Field::kNone, 1, {s.expert_floats});
    optimizer.add(kExpertMomentsRow, owned, Field::kNone, 1, {2 * s.expert_floats});
  }
  add_activations(s, table);
  add_scratch(s, table);
  add_context_parallel(s, table);
  add_low_precision(s, table);
  return table;
}

MemoryPlan memory_plan(const std::vector<ChunkBuffer>& buffers) {
  MemoryPlan plan;
  for (const ChunkBuffer& b : buffers) plan.add(b.group, b.name, b.floats(), b.copies);
  return plan;
}

// The planner sizes thousands of chunks: the names move from the table to the plan.
MemoryPlan plan_chunk_memory(const ChunkShape& s) {
  MemoryPlan plan;
  for (ChunkBuffer& b : chunk_buffers(s))
    plan.add(std::move(b.group), std::move(b.name), b.floats(), b.copies);
  return plan;
}

}  // namespace trident
