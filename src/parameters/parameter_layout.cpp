#include "parameters/parameter_layout.h"

#include <iomanip>
#include <ostream>
#include <stdexcept>

namespace trident {

namespace {
// Parameters are aligned to 16 floats (64 bytes) so every tensor starts on a cache line.
constexpr long kAlign = 16;

std::string shape_string(const std::vector<long>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
}  // namespace

long ParamSpec::numel() const {
  long n = 1;
  for (long d : local_shape) n *= d;
  return n;
}

long ParamSpec::global_index(long i) const {
  if (shard.dim < 0) return i;
  long local_cols = local_shape.size() == 2 ? local_shape[1] : 1;
  long global_cols = global_shape.size() == 2 ? global_shape[1] : 1;
  long row = i / local_cols, col = i % local_cols;
  auto map = [&](long local, long local_extent) {
    long piece = local_extent / shard.stride;  // rows of one block held locally
    long block = local / piece, within = local % piece;
    long global_block = global_shape[shard.dim] / shard.stride;
    return block * global_block + shard.rank * piece + within;
  };
  if (shard.dim == 0) row = map(row, local_shape[0]);
  if (shard.dim == 1) col = map(col, local_shape[1]);
  return row * global_cols + col;
}

long ParamSpec::contiguous_run(long i) const {
  if (shard.dim < 0) return numel() - i;
  const long local_cols = local_shape.size() == 2 ? local_shape[1] : 1;
  const long row = i / local_cols, col = i % local_cols;
  if (shard.dim == 0) {  // whole rows; a block's rows are consecutive in the global tensor
    const long piece = local_shape[0] / shard.stride;
    return (piece - row % piece) * local_cols - col;
  }
  const long piece = local_shape[1] / shard.stride;  // within one row: a block of columns
  return piece - col % piece;
}

std::string layer_param(int layer, const std::string& leaf) {
  return "layers." + std::to_string(layer) + "." + leaf;
}

namespace {
// "embedding", "layers.N" or "" (the final norm and output layer): a tensor's unit.
std::string unit_of(const std::string& name) {
  if (name.rfind("embedding.", 0) == 0) return "embedding";
  if (name.rfind("layers.", 0) != 0) return "";
  return name.substr(0, name.find('.', 7));
}
}  // namespace

std::vector<std::pair<int, int>> weight_units(const ParameterLayout& layout) {
  const std::vector<ParamSpec>& specs = layout.specs();
  std::vector<std::pair<int, int>> units;
  for (int k = 0; k < (int)specs.size(); ++k)
    if (k == 0 || unit_of(specs[k].name) != unit_of(specs[k - 1].name))
      units.emplace_back(k, k + 1);
    else
      units.back().second = k + 1;
  return units;
}

// Megatron's names for every variant. The Llama options drop tensors (biases, RMSNorm's
// bias, the position embedding) or add them (the untied output layer); grouped-query
// attention splits the fused q|k|v into linear_q and linear_kv ([k of G groups | v of G
// groups]), whose key/value rows are split over t when G divides by t and replicated
// (each rank computing every group, gradients summed over the group) when t > G.
ParameterLayout::ParameterLayout(const ModelConfig& c, TensorParallelRank tp, ChunkPlacement chunk,
                                 ExpertSlice experts) {
  const int end = chunk.num_layers < 0 ? c.num_layers : chunk.first_layer + chunk.num_layers;
  if (experts.kind == ExpertSlice::Kind::kOnly) {  // an expert buffer: the experts alone
    for (int l = chunk.first_layer; l < end; ++l)
      if (c.is_moe_layer(l)) add_experts(c, l, tp, experts.first, experts.count);
    return;
  }
  const long h = c.hidden_size, f = c.fc1_rows(), v = c.padded_vocab_size(tp.size);
  const ShardSpec replicated{};
  const ShardSpec rows{0, 1, tp.size, tp.rank}, cols{1, 1, tp.size, tp.rank};
  const ShardSpec qkv_rows{0, 3, tp.size, tp.rank};
  // SwiGLU's fc1 is [gate | up]: each rank holds its slice of both halves.
  const ShardSpec fc1_rows{0, c.swiglu ? 2 : 1, tp.size, tp.rank};
  const bool bias = c.add_bias_linear(), layernorm = !c.rms_norm();
  auto norm = [&](const std::string& prefix) {
    add(prefix + ".weight", {h}, replicated, false, InitKind::kOnes);
    if (layernorm) add(prefix + ".bias", {h}, replicated, false, InitKind::kZeros);
  };
  auto linear = [&](const std::string& prefix, std::vector<long> shape, ShardSpec shard,
                    ShardSpec bias_shard, InitKind init, bool has_bias) {
    const long out = shape[0];
    add(prefix + ".weight", std::move(shape), shard, true, init);
    if (has_bias) add(prefix + ".bias", {out}, bias_shard, false, InitKind::kZeros);
  };
  // --kv-channels: q (and the attention output) are heads x head_dim wide, not h.
  const long attn = c.attention_width();
  const bool qkv_bias = c.qkv_bias();
  if (chunk.pre_process || (chunk.post_process && c.tied_output())) {
    add("embedding.word_embeddings.weight", {v, h}, rows, true, InitKind::kNormal);
    specs_.back().owned = chunk.pre_process;
  }
  if (chunk.pre_process && c.learned_positions())
    add("embedding.position_embeddings.weight", {c.max_positions(), h}, replicated, true,
        InitKind::kNormal);
  for (int l = chunk.first_layer; l < end; ++l) {
    norm(layer_param(l, "input_layernorm"));
    if (c.group_query_attention) {
      const long kv = 2L * c.query_groups() * c.head_dim();
      const ShardSpec kv_shard =
          c.query_groups() % tp.size == 0 ? ShardSpec{0, 2, tp.size, tp.rank} : replicated;
      linear(layer_param(l, "self_attention.linear_q"), {attn, h}, rows, rows, InitKind::kNormal,
             qkv_bias);
      linear(layer_param(l, "self_attention.linear_kv"), {kv, h}, kv_shard, kv_shard,
             InitKind::kNormal, qkv_bias);
    } else {
      linear(layer_param(l, "self_attention.linear_qkv"), {3 * attn, h}, qkv_rows, qkv_rows,
             InitKind::kNormal, qkv_bias);
    }
    add_qk_norms(c, l);
    linear(layer_param(l, "self_attention.linear_proj"), {h, attn}, cols, replicated,
           InitKind::kScaledNormal, bias);
    norm(layer_param(l, "post_attention_layernorm"));
    if (c.is_moe_layer(l)) {
      add_moe_mlp(c, l, tp, experts);
      continue;
    }
    linear(layer_param(l, "mlp.linear_fc1"), {f, h}, fc1_rows, fc1_rows, InitKind::kNormal, bias);
    linear(layer_param(l, "mlp.linear_fc2"), {h, c.ffn()}, cols, replicated,
           InitKind::kScaledNormal, bias);
  }
  if (chunk.post_process) {
    norm("final_layernorm");
    if (!c.tied_output()) add("output_layer.weight", {v, h}, rows, true, InitKind::kNormal);
  }
}

// An MoE layer's MLP (issue 32): the router [E, h], replicated over t (every tensor rank
// routes all of the micro-batch's rows, so its gradient is complete on each: not summed over
// the tensor group like the LayerNorms'), then, inline, one fc1 and fc2 per expert. Under
// expert parallelism the experts live in the expert buffer instead (ExpertSlice).
void ParameterLayout::add_moe_mlp(const ModelConfig& c, int layer, TensorParallelRank tp,
                                  const ExpertSlice& experts) {
  const long h = c.hidden_size, e = c.moe.num_experts;
  add(layer_param(layer, "mlp.router.weight"), {e, h}, ShardSpec{}, true, InitKind::kNormal);
  if (experts.kind == ExpertSlice::Kind::kInline) add_experts(c, layer, tp, 0, (int)e);
  // --moe-shared-expert-intermediate-size S: a dense MLP beside the experts (Megatron's
  // mlp.shared_experts), sharded over t as the dense fc1 / fc2, no biases (as the experts);
  // with --moe-shared-expert-gate its gate_weight [1, h], replicated like the router (every
  // tensor rank gates all rows: complete gradients). In the dense buffer under any EP.
  const long s = c.moe.shared_expert_intermediate_size;
  if (s <= 0) return;
  const ShardSpec fc1_rows{0, c.swiglu ? 2 : 1, tp.size, tp.rank};
  const ShardSpec cols{1, 1, tp.size, tp.rank};
  add(layer_param(layer, "mlp.shared_experts.linear_fc1.weight"), {c.swiglu ? 2 * s : s, h},
      fc1_rows, true, InitKind::kNormal);
  add(layer_param(layer, "mlp.shared_experts.linear_fc2.weight"), {h, s}, cols, true,
      InitKind::kScaledNormal);
  if (c.moe.shared_expert_gate)
    add(layer_param(layer, "mlp.shared_experts.gate_weight"), {1, h}, ShardSpec{}, true,
        InitKind::kNormal);
}

// Experts [first, first + count) of an MoE layer, named by their global index so that every
// layout draws the same initial values (the stream is the name). Experts shard over t as the
// dense fc1 / fc2 do and have no biases (Mixtral's and Qwen3-MoE's experts have none).
void ParameterLayout::add_experts(const ModelConfig& c, int layer, TensorParallelRank tp, int first,
                                  int count) {
  const long h = c.hidden_size, f = c.moe_ffn();
  const ShardSpec fc1_rows{0, c.swiglu ? 2 : 1, tp.size, tp.rank};
  const ShardSpec cols{1, 1, tp.size, tp.rank};
  for (int x = first; x < first + count; ++x) {
    add(moe_expert_param(layer, x, "linear_fc1.weight"), {c.swiglu ? 2 * f : f, h}, fc1_rows, true,
        InitKind::kNormal);
    add(moe_expert_param(layer, x, "linear_fc2.weight"), {h, f}, cols, true,
        InitKind::kScaledNormal);
  }
}

ParameterLayout ParameterLayout::lora_adapters(const ModelConfig& c, TensorParallelRank tp,
                                               ChunkPlacement chunk) {
  ParameterLayout layout;
  layout.lora_ = true;
  const int end = chunk.num_layers < 0 ? c.num_layers : chunk.first_layer + chunk.num_layers;
  if (c.lora.enabled())
    for (int l = chunk.first_layer; l < end; ++l) layout.add_lora(c, l, tp);
  return layout;
}

ParameterLayout ParameterLayout::like(const ModelConfig& c, TensorParallelRank tp,
                                      ChunkPlacement chunk) const {
  return lora_ ? lora_adapters(c, tp, chunk) : ParameterLayout(c, tp, chunk);
}

std::string lora_param(int layer, const std::string& linear, const char* which) {
  return layer_param(layer, linear + ".lora_" + which + ".weight");
}

// One layer's adapters; the shards mirror the base layout's (see the constructor).
void ParameterLayout::add_lora(const ModelConfig& c, int l, TensorParallelRank tp) {
  const long r = c.lora.rank, h = c.hidden_size, attn = c.attention_width();
  const ShardSpec replicated{}, cols{1, 1, tp.size, tp.rank};
  auto a = [&](const std::string& linear, long in, ShardSpec shard) {
    add(lora_param(l, linear, "A"), {r, in}, shard, true, InitKind::kNormal);
  };
  auto b = [&](const std::string& linear, long out, ShardSpec shard) {
    add(lora_param(l, linear, "B"), {out, r}, shard, true, InitKind::kZeros);
  };
  if (c.lora.targets("linear_qkv")) {
    a("self_attention.linear_qkv", h, replicated);
    if (c.group_query_attention) {
      b("self_attention.linear_q", attn, {0, 1, tp.size, tp.rank});
      b("self_attention.linear_kv", 2L * c.query_groups() * c.head_dim(), {0, 2, tp.size, tp.rank});
    } else {
      b("self_attention.linear_qkv", 3 * attn, {0, 3, tp.size, tp.rank});
    }
  }
  if (c.lora.targets("linear_proj")) {
    a("self_attention.linear_proj", attn, cols);
    b("self_attention.linear_proj", h, replicated);
  }
  if (c.is_moe_layer(l)) return;  // refused with LoRA (train's rules); nothing to adapt
  if (c.lora.targets("linear_fc1")) {
    a("mlp.linear_fc1", h, replicated);
    b("mlp.linear_fc1", c.fc1_rows(), {0, c.swiglu ? 2 : 1, tp.size, tp.rank});
  }
  if (c.lora.targets("linear_fc2")) {
    a("mlp.linear_fc2", c.ffn(), cols);
    b("mlp.linear_fc2", h, replicated);
  }
}

bool splits_experts(const ModelConfig& c, int expert_parallel) {
  return c.moe.enabled() && expert_parallel > 1;
}

ExpertSlice dense_expert_slice(const ModelConfig& c, int expert_parallel) {
  if (!splits_experts(c, expert_parallel)) return {};
  return {ExpertSlice::Kind::kNone, 0, 0};
}

ExpertSlice expert_buffer_slice(const ModelConfig& c, int expert_parallel, int expert_rank) {
  const int local = c.moe.num_experts / expert_parallel;
  return {ExpertSlice::Kind::kOnly, expert_rank * local, local};
}

TensorParallelRank expert_tensor_rank(TensorParallelRank tp, int expert_tensor_parallel) {
  const int etp = expert_tensor_parallel > 0 ? expert_tensor_parallel : tp.size;
  return {tp.rank % etp, etp};
}

std::string moe_expert_param(int layer, int expert, const std::string& leaf) {
  return layer_param(layer, "mlp.experts." + std::to_string(expert) + "." + leaf);
}

// --qk-layernorm: one RMSNorm weight of head_dim for q's heads and one for k's, the same
// on every tensor-parallel rank (each rank's heads give a partial gradient, summed over the
// tensor group: see tensor_parallel/sequence_parallel_grads.h).
void ParameterLayout::add_qk_norms(const ModelConfig& c, int layer) {
  if (!c.qk_layernorm) return;
  for (const char* name :
       {"self_attention.q_layernorm.weight", "self_attention.k_layernorm.weight"})
    add(layer_param(layer, name), {c.head_dim()}, ShardSpec{}, false, InitKind::kOnes);
}

bool ParameterLayout::contains(const std::string& name) const {
  for (const ParamSpec& s : specs_)
    if (s.name == name) return true;
  return false;
}

void ParameterLayout::add(std::string name, std::vector<long> shape, ShardSpec shard, bool decay,
                          InitKind init) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.global_shape = shape;
  spec.local_shape = shape;
  spec.shard = shard;
  if (shard.dim >= 0) {
    if (shape[shard.dim] % ((long)shard.stride * shard.parts))
      throw std::invalid_argument(spec.name + ": dimension " + std::to_string(shard.dim) +
                                  " does not split into " + std::to_string(shard.parts));
    spec.local_shape[shard.dim] /= shard.parts;
  }
  spec.weight_decay = decay;
  spec.init = init;
  spec.offset = total_;
  total_ += (spec.numel() + kAlign - 1) / kAlign * kAlign;
  specs_.push_back(std::move(spec));
}

const ParamSpec& ParameterLayout::find(const std::string& name) const {
  for (const ParamSpec& s : specs_)
    if (s.name == name) return s;
  throw std::out_of_range("no parameter named " + name);
}

void ParameterLayout::print(std::ostream& os) const {
  os << std::left << std::setw(48) << "parameter" << std::setw(16) << "global" << std::setw(16)
     << "local"
     << "offset\n";
  for (const ParamSpec& s : specs_)
    os << std::setw(48) << s.name << std::setw(16) << shape_string(s.global_shape) << std::setw(16)
       << shape_string(s.local_shape) << s.offset << "\n";
}

}  // namespace trident
