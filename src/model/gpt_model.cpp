#include "model/gpt_model.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include "config/token_flags.h"
#include "kernels/layernorm.h"
#include "tensor_parallel/mappings.h"

namespace trident {

namespace {
int chunk_layers(const ModelConfig& c, const ChunkPlacement& p) {
  return p.num_layers < 0 ? c.num_layers - p.first_layer : p.num_layers;
}

// The weights a chunk multiplies by: its layers' and, on the last stage, the output
// layer's (the word embedding unless untied).
std::vector<std::string> linear_weights(const ModelConfig& c, const ChunkPlacement& p) {
  std::vector<std::string> names;
  std::vector<std::string> attention = {"self_attention.linear_qkv.weight"};
  // Grouped-query attention: without biases the layers run q and kv as one GEMM on the
  // adjacent shards, which reads no panel copies (they would only cost memory).
  if (c.group_query_attention)
    attention = c.qkv_bias() ? std::vector<std::string>{"self_attention.linear_q.weight",
                                                        "self_attention.linear_kv.weight"}
                             : std::vector<std::string>{};
  for (int l = p.first_layer; l < p.first_layer + chunk_layers(c, p); ++l) {
    for (const std::string& w : attention) names.push_back(layer_param(l, w));
    names.push_back(layer_param(l, "self_attention.linear_proj.weight"));
    if (c.is_moe_layer(l)) continue;  // experts run grouped products: no panels
    for (const char* w : {"mlp.linear_fc1.weight", "mlp.linear_fc2.weight"})
      names.push_back(layer_param(l, w));
  }
  if (p.post_process)
    names.push_back(c.tied_output() ? "embedding.word_embeddings.weight" : "output_layer.weight");
  return names;
}
// The chunk's expert buffer under expert parallelism: this rank's E/EP experts of its MoE
// layers (none otherwise, the experts being inline in the dense buffer), split over ETP of
// the tensor ranks (whole at ETP = 1).
ParameterLayout expert_layout(const ModelConfig& config, TensorParallelRank tp,
                              const ChunkOptions& options, const comm::Communicator* expert) {
  tp = expert_tensor_rank(tp, options.expert_tensor_parallel);
  if (!splits_experts(config, options.expert_parallel))
    return ParameterLayout(config, tp, options.placement, {ExpertSlice::Kind::kOnly, 0, 0});
  if (!expert || expert->size() != options.expert_parallel)
    throw std::invalid_argument("expert parallelism: the chunk needs its expert group of " +
                                std::to_string(options.expert_parallel) + " ranks");
  return ParameterLayout(config, tp, options.placement,
                         expert_buffer_slice(config, options.expert_parallel, expert->rank()));
}
}  // namespace

GPTModel::GPTModel(const ModelConfig& config, comm::Communicator& tp, int micro_batch, int seq,
                   const ChunkOptions& options, comm::Communicator* expert)
    : config_(config),
      tp_(tp),
      expert_(expert),
      micro_batch_(micro_batch),
      seq_(seq),
      padded_vocab_(config.padded_vocab_size(tp.size())),
      options_(options),
      shape_(chunk_shape(config, {tp.rank(), tp.size()}, micro_batch, seq, options)),
      params_(ParameterLayout(config, {tp.rank(), tp.size()}, options.placement,
                              dense_expert_slice(config, options.expert_parallel)),
              options.pad_multiple,
              options.inference || config.lora.enabled() ? GradientMemory::kNone  // LoRA: frozen
              : options.shard_gradients                  ? GradientMemory::kOnFirstWrite
                                                         : GradientMemory::kTouched,
              options.shard_parameters && !options.inference ? ValueMemory::kSharded
                                                             : ValueMemory::kTouched),
      // Sharded over the expert-data group as the dense buffer over the data-parallel group
      // (engine/rank_model.h): the same strategy, whatever that group's size.
      expert_params_(expert_layout(config, {tp.rank(), tp.size()}, options, expert),
                     options.expert_pad_multiple,
                     options.shard_gradients && !options.inference ? GradientMemory::kOnFirstWrite
                                                                   : GradientMemory::kTouched,
                     options.shard_parameters && !options.inference ? ValueMemory::kSharded
                                                                    : ValueMemory::kTouched),
      lora_params_(
          ParameterLayout::lora_adapters(config, {tp.rank(), tp.size()}, options.placement),
          options.pad_multiple,
          options.inference ? GradientMemory::kNone : GradientMemory::kTouched) {
  options_.slots = std::max(1, options.slots);
  sequence_parallel_ = shape_.sequence_parallel;  // t > 1 and training
  place_context_parallel_tokens();
  check_sequence_split(micro_batch, seq);
  precision_.precision = options.precision;
  params_.set_low_precision(options.precision);  // before any ParamRef is handed out
  expert_params_.set_low_precision(options.precision);
  if (options.decode_panels) params_.set_decode_panels(linear_weights(config, options.placement));
  build_layers(config);
  build_embedding_and_head(config);
  defer_weight_grad_zeroing();
  recompute_ = {shape_.recomputed_layers, shape_.recompute_group};
  plan_and_allocate();
}

void GPTModel::place_context_parallel_tokens() {
  cp_ = options_.context_parallel;
  if (!cp_.active()) return;
  if (!cp_.group || cp_.group->size() != cp_.size || cp_.group->rank() != cp_.rank)
    throw std::invalid_argument("context parallelism: the chunk needs its cp group of " +
                                std::to_string(cp_.size) + " ranks");
  if (seq_ % 2)
    throw std::invalid_argument("context parallelism: a rank's tokens per sample (" +
                                std::to_string(seq_) + ") must be two equal chunks");
  token_position_.resize(seq_);
  for (int t = 0; t < seq_; ++t)
    token_position_[t] = context_parallel::global_position(t, seq_ * cp_.size, cp_.rank, cp_.size);
}

void GPTModel::check_sequence_split(int micro_batch, int seq) const {
  const int t = tp_.size();
  if (sequence_parallel_ && (long)micro_batch * seq % t != 0)
    throw std::invalid_argument("--sequence-parallel: --micro-batch-size x --seq-length (" +
                                std::to_string(micro_batch) + " x " + std::to_string(seq) +
                                ") must be divisible by --tensor-model-parallel-size (" +
                                std::to_string(t) + ")");
}

// The chunk's layers and the spec ranges of the embedding, each layer and the post-process
// part (final norm and an untied output layer), for the gradient-ready and
// parameters-needed hooks.
void GPTModel::build_layers(const ModelConfig& config) {
  LayerDims dims = layer_dims(config, tp_.rank(), tp_.size());
  if (config.moe.enabled())
    dims.moe =
        moe_dims(config, 0.0, 0.0, tp_.size(), options_.expert_tensor_parallel, sequence_parallel_);
  dims.moe.aux_loss_coeff = options_.moe_aux_loss_coeff;
  dims.moe.z_loss_coeff = options_.moe_z_loss_coeff;
  dims.moe.expert_parallel = options_.expert_parallel;
  dims.moe.bf16 = options_.precision == kernels::Precision::kBf16;
  dims.moe.fp16 = options_.precision == kernels::Precision::kFp16;
  const int first = options_.placement.first_layer, count = shape_.layers;
  const auto& specs = params_.layout().specs();
  auto spec_index = [&](const std::string& name) {
    for (size_t k = 0; k < specs.size(); ++k)
      if (specs[k].name == name) return (int)k;
    return (int)specs.size();
  };
  for (int l = first; l < first + count; ++l) {
    layers_.emplace_back(dims, params_, l, tp_, &precision_, sequence_parallel_, expert_,
                         splits_experts() ? &expert_params_ : nullptr, &lora_params_);
    layer_first_spec_.push_back(spec_index(layer_param(l, "input_layernorm.weight")));
  }
  post_first_spec_ = spec_index("final_layernorm.weight");
  embedding_specs_ = 0;
  while (embedding_specs_ < (int)specs.size() &&
         specs[embedding_specs_].name.rfind("embedding.", 0) == 0)
    ++embedding_specs_;
  for (int l = 0; l < count; ++l)
    layer_end_spec_.push_back(l + 1 < count ? layer_first_spec_[l + 1] : post_first_spec_);
}

GPTModel::PassScope::PassScope(const GPTModel& m, bool backward) : model(m) {
  if (model.pass_begin_) model.pass_begin_(backward);
}

GPTModel::PassScope::~PassScope() {
  if (model.pass_end_) model.pass_end_();
}

std::pair<int, int> GPTModel::backward_specs(int l) const {
  if (l >= recompute_.layers) return {layer_first_spec_[l], layer_end_spec_[l]};
  if (!recompute_.last(l)) return {0, 0};
  return {layer_first_spec_[recompute_.first(l)], layer_end_spec_[l]};
}

void GPTModel::build_embedding_and_head(const ModelConfig& config) {
  const int t = tp_.size(), vocab_local = padded_vocab_ / t, vocab_start = tp_.rank() * vocab_local;
  const ChunkPlacement& placement = options_.placement;
  if (placement.pre_process) {
    ParamRef word = params_.get("embedding.word_embeddings.weight");
    const ParamRef none{nullptr, nullptr, 0};  // RoPE: no learned positions
    embedding_ = {
        word,
        config.learned_positions() ? params_.get("embedding.position_embeddings.weight") : none,
        vocab_start,
        vocab_local,
        config.hidden_size,
        &tp_,
        sequence_parallel_,
        {},
        {}};
  }
  if (placement.post_process) {
    ParamRef weight = params_.get(config.tied_output() ? "embedding.word_embeddings.weight"
                                                       : "output_layer.weight");
    lm_head_.output_layer = {
        weight, ParamRef{nullptr, nullptr, 0}, config.hidden_size, vocab_local, &tp_, &precision_};
  }
  int valid = std::clamp(config.vocab_size - vocab_start, 0, vocab_local);
  lm_head_.cross_entropy = {vocab_start, vocab_local, valid, &tp_};
  lm_head_.sequence_parallel = sequence_parallel_;
  lm_head_.chunk_rows = shape_.logits_chunk_rows;
  if (placement.post_process) final_norm_ = make_norm(params_, "final_layernorm", config);
}

void GPTModel::defer_weight_grad_zeroing() {
  // The layers' linear weights and the output layer's take their gradient from products that
  // each write all of it: the step's first writes it, instead of zero_grads filling it and
  // the product adding. (The output layer's first row chunk comes before the tied
  // embedding's backward adds to the same gradient.)
  for (const TransformerLayer& layer : layers_)
    for (const ParamRef& weight : layer.product_weights()) params_.defer_zeroing(weight);
  if (options_.placement.post_process) params_.defer_zeroing(lm_head_.output_layer.weight);
  precision_.deferred_zero = params_.deferred_zero();
}

void GPTModel::set_vocabulary_hooks(VocabularyHooks hooks) {
  const int rows = options_.vocabulary_block_rows;
  if (rows <= 0) throw std::logic_error("set_vocabulary_hooks: the chunk has no vocabulary blocks");
  if (options_.placement.pre_process) {
    embedding_.sharded_lookup = hooks.lookup;
    embedding_.sharded_lookup_backward = hooks.lookup_backward;
  }
  if (!options_.placement.post_process) return;
  const long h = config_.hidden_size,
             at = lm_head_.output_layer.weight.value - std::as_const(params_).values();
  auto flat = [at, h](const std::function<void(long, long)>& f) {
    return [f, at, h](int first, int count) { f(at + first * h, at + (first + count) * h); };
  };
  lm_head_.blocks = {rows, flat(hooks.need), flat(hooks.grad_begin), flat(hooks.grad_done), [this] {
                       if (progress_) progress_();
                     }};
}

long GPTModel::local_rows(long tokens) const {
  return sequence_parallel_ ? tokens / tp_.size() : tokens;
}

long GPTModel::first_local_row(long tokens) const {
  return sequence_parallel_ ? local_rows(tokens) * tp_.rank() : 0;
}

// The plan and the arena come from one table (chunk_buffers, what the planner sizes too):
// the plan lists its rows, the carve takes their parts from the arena in the same order
// and points the model's pointers at them (targets()), so a buffer cannot be planned and
// not carved, or carved at another size.
void GPTModel::plan_and_allocate() {
  if (shape_.parameter_floats != params_.size())
    throw std::logic_error("memory plan: parameter buffer size differs from its layout's");
  if (shape_.expert_floats != expert_params_.size())
    throw std::logic_error("memory plan: expert buffer size differs from its layout's");
  buffers_ = chunk_buffers(shape_);
  if (params_.decode_panel_floats() > 0)  // Parameters' own, like the weights
    buffers_.push_back(
        {"parameters", "decode copies (panel layout)", {params_.decode_panel_floats()}});
  plan_ = trident::memory_plan(buffers_);
  size_activation_sets();
  carve_arena();
  wire_slots();
}

void GPTModel::size_activation_sets() {
  const int layers = shape_.layers;
  act_.assign(options_.slots, {});
  for (Activations& s : act_) s.layers.resize(layers);
  held_.assign(shape_.held_sets(), {});
  for (HeldSet& set : held_) set.layers.resize(layers);
  recompute_act_.assign(recompute_.layers > 0 ? recompute_.size : 0, {});
}

namespace {

using PartTarget = std::function<void(float* at, long floats)>;

PartTarget to(float*& p) {
  return [&p](float* at, long) { p = at; };
}

PartTarget to(int*& p) {
  return [&p](float* at, long) { p = reinterpret_cast<int*>(at); };
}

PartTarget to(std::uint16_t*& p) {
  return [&p](float* at, long) { p = reinterpret_cast<std::uint16_t*>(at); };
}

// bf16 runs keep the activations only matrix products read in bf16.
PartTarget to(kernels::GemmOperandBuffer& b, bool bf16) {
  return [&b, bf16](float* at, long) {
    if (bf16)
      b.bf16 = reinterpret_cast<kernels::bf16_t*>(at);
    else
      b.fp32 = at;
  };
}

std::vector<PartTarget> layer_targets(LayerActivations& a, BufferField field, bool bf16) {
  switch (field) {
    case BufferField::kLn1Out:
      return {to(a.ln1_out, bf16)};
    case BufferField::kLnStats:
      return {to(a.ln1_mean), to(a.ln1_rstd), to(a.ln2_mean), to(a.ln2_rstd)};
    case BufferField::kQkv:
      return {to(a.qkv)};
    case BufferField::kQkNorm:
      return {to(a.qkv_pre), to(a.qk_rstd)};
    case BufferField::kAttentionOut:
      return {to(a.attn_out)};
    case BufferField::kAttentionLse:
      return {to(a.attn_lse)};
    case BufferField::kResidual:
      return {to(a.residual1)};
    case BufferField::kLn2Out:
      return {to(a.ln2_out, bf16)};
    case BufferField::kFc1Out:
      return {to(a.fc1_pre)};
    case BufferField::kFc1Act:
      return {to(a.fc1_act, bf16)};
    case BufferField::kLayerOutput:
      return {to(a.output)};
    case BufferField::kMoe:
      return {to(a.moe.probs),       to(a.moe.lse),
              to(a.moe.idx),         to(a.moe.weights),
              to(a.moe.rows),        to(a.moe.fc1_pre),
              to(a.moe.act),         to(a.moe.row_weights),
              to(a.moe.recv_counts), to(a.moe.shared_fc1_pre),
              to(a.moe.shared_act),  to(a.moe.shared_gate),
              to(a.moe.shared_out)};
    default:
      throw std::logic_error("memory plan: a layer has no buffer of this kind");
  }
}

bool in_held_set(BufferHome home) {
  return home == BufferHome::kHeldLayers || home == BufferHome::kHeldDenseLayers ||
         home == BufferHome::kHeldOutputs;
}

long footprint(const ChunkBuffer& b) {
  long floats = 0;
  for (long part : b.parts) floats += Arena::slice_floats(part);
  return floats * b.copies;
}

}  // namespace

// The copies of a home's layer buffers, in carve order: set by set, layer by layer.
std::vector<LayerActivations*> GPTModel::home_layers(BufferHome home) {
  std::vector<LayerActivations*> out;
  auto add = [&](std::vector<LayerActivations>& layers, auto&& has) {
    for (int l = 0; l < (int)layers.size(); ++l)
      if (has(l)) out.push_back(&layers[l]);
  };
  auto kept = [&](int l) { return l >= shape_.recomputed_layers; };
  auto held_output = [&](int l) { return shape_.output_held(l); };
  auto slot_output = [&](int l) { return shape_.output_in_slot(l); };
  auto inner = [&](int j) { return j + 1 < (int)recompute_act_.size(); };
  if (home == BufferHome::kSlotLayers)
    for (Activations& s : act_) add(s.layers, kept);
  if (home == BufferHome::kSlotMoeLayers)
    for (Activations& s : act_) add(s.layers, [&](int l) { return shape_.kept_moe_layer(l); });
  if (home == BufferHome::kSlotOutputs)
    for (Activations& s : act_) add(s.layers, slot_output);
  if (home == BufferHome::kHeldLayers)
    for (HeldSet& set : held_) add(set.layers, kept);
  if (home == BufferHome::kHeldDenseLayers)
    for (HeldSet& set : held_) add(set.layers, [&](int l) { return shape_.kept_dense_layer(l); });
  if (home == BufferHome::kHeldOutputs)
    for (HeldSet& set : held_) add(set.layers, held_output);
  if (home == BufferHome::kRecomputeGroup) add(recompute_act_, [](int) { return true; });
  if (home == BufferHome::kRecomputeGroupInner) add(recompute_act_, inner);
  return out;
}

std::vector<GPTModel::PartTarget> GPTModel::slot_targets(Activations& s, BufferField field) {
  const bool bf16 = options_.precision == kernels::Precision::kBf16;
  switch (field) {
    case BufferField::kChunkInput:
      return {to(s.input)};
    case BufferField::kFinalLnOut:
      return {to(s.final_ln_out, bf16)};
    case BufferField::kFinalLnStats:
      return {to(s.final_ln_mean), to(s.final_ln_rstd)};
    case BufferField::kFinalLnGrad:
      return {to(s.d_final_ln_out)};
    case BufferField::kLosses:
      return {to(s.losses)};
    case BufferField::kOutputGrad:
      return {to(s.output_grad)};
    default:
      throw std::logic_error("memory plan: a slot has no buffer of this kind");
  }
}

std::vector<GPTModel::PartTarget> GPTModel::chunk_targets(BufferField field) {
  const bool bf16 = options_.precision == kernels::Precision::kBf16;
  kernels::LinearScratch& ls = precision_.scratch;
  switch (field) {
    case BufferField::kAttentionOut:  // selective recomputation's one, for every kept layer
      return {[this](float* at, long) {
        for (LayerActivations* a : home_layers(BufferHome::kHeldLayers)) a->attn_out = at;
      }};
    case BufferField::kAttentionLse:
      return {[this](float* at, long) {
        for (LayerActivations* a : home_layers(BufferHome::kSlotLayers)) a->attn_lse = at;
      }};
    case BufferField::kResidualGrad:
      return {to(d_residual_)};
    case BufferField::kGatheredInput:
      return {to(scratch_.gathered, bf16)};
    case BufferField::kRowOutAndDHidden:
      return {to(scratch_.row_out), to(scratch_.d_hidden)};
    case BufferField::kDFfn:
      return {to(scratch_.d_ffn)};
    case BufferField::kDAttnAndDQkv:
      return {to(scratch_.d_attn), to(scratch_.d_qkv)};
    case BufferField::kMoeScratch: {
      MoeScratch& m = scratch_.moe;
      return {to(m.logits),    to(m.counts),  to(m.src_weights),  to(m.d_row_weights),
              to(m.d_weights), to(m.scaled),  to(m.d_scaled),     to(m.expert_out),
              to(m.own_rows),  to(m.staging), to(m.shared_d_out), to(m.shared_d_act),
              to(m.x32),       to(m.in16),    to(m.out16),        to(m.in32),
              to(m.out32),     to(m.weight32)};
    }
    case BufferField::kLoraScratch:
      return {to(scratch_.lora.u), to(scratch_.lora.du)};
    case BufferField::kLoraInput:
      return {to(scratch_.lora.x)};
    case BufferField::kLoraLow:
      return {to(scratch_.lora.low)};
    case BufferField::kLogits:
      return {to(lm_head_.logits)};
    case BufferField::kDLogits16:
      return {
          [this](float* at, long) { lm_head_.dlogits16 = reinterpret_cast<kernels::bf16_t*>(at); }};
    case BufferField::kGemmOperands16:  // bf16 pairs, two to a float of the arena
      return {to(ls.act16), to(ls.in16)};
    case BufferField::kWeightGrad32:
      return {[&ls](float* at, long floats) {
        ls.weight_grad32 = at, ls.weight_grad32_floats = floats;
      }};
    case BufferField::kGemmOperands32:
      return {to(ls.act32), to(ls.in32), to(ls.weight32)};
    default:
      throw std::logic_error("memory plan: the chunk has no scratch buffer of this kind");
  }
}

std::vector<GPTModel::PartTarget> GPTModel::targets(const ChunkBuffer& b) {
  std::vector<PartTarget> out;
  auto append = [&](std::vector<PartTarget> more) {
    for (PartTarget& t : more) out.push_back(std::move(t));
  };
  const bool bf16 = options_.precision == kernels::Precision::kBf16;
  switch (b.home) {
    case BufferHome::kOutsideArena:
      break;
    case BufferHome::kChunk:
      append(chunk_targets(b.field));
      break;
    case BufferHome::kSlots:
      for (Activations& s : act_) append(slot_targets(s, b.field));
      break;
    case BufferHome::kDeferredEntries:
      for (int k = 0; k < options_.deferred_weight_grads; ++k)
        out.push_back([this](float* at, long floats) { deferred_.add_entry(at, floats); });
      break;
    default:
      for (LayerActivations* a : home_layers(b.home)) append(layer_targets(*a, b.field, bf16));
  }
  return out;
}

// Takes every part of every copy of the table's arena buffers, in table order. A held set
// must be one contiguous range (WeightGradStore does not copy the operands it finds there),
// so the held sets come first, one block each, and their buffers are sliced inside them.
void GPTModel::carve_arena() {
  long held_floats = 0, other_floats = 0;
  for (const ChunkBuffer& b : buffers_)
    if (b.in_arena()) (in_held_set(b.home) ? held_floats : other_floats) += footprint(b);
  arena_ = std::make_unique<Arena>(held_floats + other_floats);
  float* held_block = arena_->take(held_floats);
  const long set_floats = held_floats / (long)held_.size();
  for (size_t k = 0; k < held_.size(); ++k)
    held_[k].begin = held_block + k * set_floats, held_[k].end = held_[k].begin + set_floats;
  std::vector<long> held_used(held_.size(), 0);
  carved_.clear();
  for (int i = 0; i < (int)buffers_.size(); ++i) {
    const ChunkBuffer& b = buffers_[i];
    if (!b.in_arena()) continue;
    const std::vector<PartTarget> pointers = targets(b);
    if (pointers.size() != (size_t)b.copies * b.parts.size())
      throw std::logic_error("memory plan: \"" + b.name + "\" has " +
                             std::to_string(b.copies * b.parts.size()) + " parts, the model " +
                             std::to_string(pointers.size()) + " pointers to them");
    for (size_t k = 0; k < pointers.size(); ++k) {
      const int copy = (int)(k / b.parts.size());
      const long floats = b.parts[k % b.parts.size()];
      float* at = take_part(b, copy, floats, held_block, held_used);
      pointers[k](at, floats);
      carved_.push_back({i, at - arena_->data(), floats});
    }
  }
}

// Held sets' parts go to their set's block (copies are set by set), the rest to the arena.
float* GPTModel::take_part(const ChunkBuffer& b, int copy, long floats, float* held_block,
                           std::vector<long>& held_used) {
  if (!in_held_set(b.home)) return arena_->take(floats);
  const int set = copy / (b.copies / (int)held_.size());
  const long set_floats = held_[set].end - held_[set].begin;
  float* at = held_block + set * set_floats + held_used[set];
  held_used[set] += Arena::slice_floats(floats);
  if (held_used[set] > set_floats) throw std::logic_error("memory plan: a held set overflows");
  return at;
}

// After the carve: a slot's recomputed layers use the recompute group's buffers (but for
// each group's last output, the slot's own), its kept layers the held set it starts with.
void GPTModel::wire_slots() {
  const int n = options_.slots;
  for (int i = 0; i < n; ++i) {
    Activations& s = act_[i];
    for (int l = 0; l < recompute_.layers; ++l) {
      float* own = s.layers[l].output;
      s.layers[l] = recompute_act_[l - recompute_.first(l)];
      if (recompute_.last(l)) s.layers[l].output = own;
    }
    use_held(s, i);
  }
  free_held_.clear();
  for (int k = (int)held_.size() - 1; k >= n; --k) free_held_.push_back(k);
  if (deferred_.entries() > 0) precision_.deferred = &deferred_;
}

void GPTModel::use_held(Activations& a, int set) {
  a.held = set;
  for (int l = recompute_.layers; l < (int)layers_.size(); ++l) {
    LayerActivations& to = a.layers[l];
    const LayerActivations& from = held_[set].layers[l];
    to.ln1_out = from.ln1_out, to.qkv = from.qkv, to.attn_out = from.attn_out;
    to.residual1 = from.residual1, to.ln2_out = from.ln2_out;
    to.fc1_pre = from.fc1_pre, to.fc1_act = from.fc1_act;
    if (from.output) to.output = from.output;
  }
}

void GPTModel::split_tokens(Activations& a, const int* tokens, int batch, int seq) {
  if (batch > micro_batch_ || seq > seq_)
    throw std::invalid_argument("batch " + std::to_string(batch) + "x" + std::to_string(seq) +
                                " exceeds the planned " + std::to_string(micro_batch_) + "x" +
                                std::to_string(seq_));
  if (sequence_parallel_ && (long)batch * seq % tp_.size() != 0)
    throw std::invalid_argument("sequence parallelism: batch " + std::to_string(batch) + "x" +
                                std::to_string(seq) + " does not split into " +
                                std::to_string(tp_.size()) + " equal row blocks");
  a.input_ids.resize((size_t)batch * seq);
  a.target_ids.resize((size_t)batch * seq);
  // Context parallelism: tokens hold whole samples, of which this rank takes its chunks.
  const int whole = seq * cp_.size;
  for (int b = 0; b < batch; ++b)
    for (int s = 0; s < seq; ++s) {
      const int at = cp_.active() ? token_position_[s] : s;
      const int flagged_next = tokens[(long)b * (whole + 1) + at + 1];
      const int id = token_id(tokens[(long)b * (whole + 1) + at]), next = token_id(flagged_next);
      if (id < 0 || id >= config_.vocab_size || next < 0 || next >= config_.vocab_size)
        throw std::invalid_argument("token id out of range [0, " +
                                    std::to_string(config_.vocab_size) + ")");
      a.input_ids[(size_t)b * seq + s] = id;
      // -1: a target the loss does not count (its loss and gradient are 0).
      a.target_ids[(size_t)b * seq + s] = counted_target(flagged_next) ? next : -1;
    }
  find_documents(a, tokens, batch, seq);
}

// Megatron's get_ltor_masks_and_position_ids: a document ends with its EOD, so the token
// after an EOD starts the next one, at position 0. Found over the whole sample (context
// parallelism: of which this rank keeps its tokens' global document starts and positions;
// their positions always, which RoPE and learned positions read).
void GPTModel::find_documents(Activations& a, const int* tokens, int batch, int seq) const {
  const PackedDocuments& p = options_.packed;
  a.doc_start.clear(), a.positions.clear();
  if (!p.splits_documents() && !cp_.active()) return;
  a.doc_start.resize((size_t)batch * seq);
  a.positions.resize((size_t)batch * seq);
  const int whole = seq * cp_.size;
  std::vector<int> start_of(whole);
  for (int b = 0; b < batch; ++b) {
    int start = 0;
    for (int s = 0; s < whole; ++s) {
      start_of[s] = start;
      const int id = token_id(tokens[(long)b * (whole + 1) + s]);
      if (p.splits_documents() && id == p.eod) start = s + 1;
    }
    for (int s = 0; s < seq; ++s) {
      const size_t i = (size_t)b * seq + s;
      const int at = cp_.active() ? token_position_[s] : s;
      a.doc_start[i] = p.reset_attention_mask ? start_of[at] : 0;
      a.positions[i] = p.reset_position_ids ? at - start_of[at] : at;
    }
  }
}

const float* GPTModel::logits_row(int r) const {
  return lm_head_.logits_rows(act_[0].final_ln_out.operand(), r, 1);
}

const float* GPTModel::output_buffer(int slot) const {
  return layers_.empty() ? act_[slot].input : act_[slot].layers.back().output;
}

LayerCall GPTModel::layer_call(const Activations& a, int batch, int seq) const {
  const long tokens = (long)batch * seq;
  LayerCall call{batch,
                 seq,
                 {&options_.dropout, options_.dropout.any() ? a.first_sample : -1, seq,
                  first_local_row(tokens)},
                 progress_ ? &progress_ : nullptr};
  if (options_.packed.reset_attention_mask) call.doc_start = a.doc_start.data();
  if (options_.packed.reset_position_ids) call.positions = a.positions.data();
  if (cp_.active()) {  // every token at its global position (dropout's masks too)
    call.positions = a.positions.data();
    call.dropout.token_position = token_position_.data();
    call.context = &cp_;
  }
  return call;
}

const float* GPTModel::layer_input(const Activations& a, int l) const {
  return l == 0 ? a.input : a.layers[l - 1].output;
}

// Rebuilds the activations of the recomputed group that ends at layer `last` from the
// group's kept input. The kernels are deterministic and dropout masks are keyed by (layer,
// sample), so they are bit-identical to those of forward, and so are the gradients.
// The group's last output is kept from forward and must not be written now: it may be the
// buffer of a send to the next stage still in flight. Its recomputed copy goes to the
// slot's boundary gradient (d(final LayerNorm output) or the received d(output)), which
// backward_chunk consumed before reaching the layers; no later layer reads it.
void GPTModel::recompute_group(Activations& a, int last, const LayerCall& call) {
  float* spare = options_.placement.post_process ? a.d_final_ln_out : a.output_grad;
  for (int k = recompute_.first(last); k <= last; ++k) {
    LayerActivations redo = a.layers[k];
    if (k == last) redo.output = spare;
    layers_[k].forward(layer_input(a, k), redo, scratch_, call);
  }
}

double GPTModel::forward_chunk(int slot, const int* tokens, int batch, int seq, float grad_scale,
                               float* per_token_loss, long first_sample) {
  Activations& a = act_[slot];
  if (a.held < 0) {  // its last micro-batch's B handed its set to that micro-batch's W
    if (free_held_.empty())
      throw std::logic_error("forward_chunk: more micro-batches between F and W than the " +
                             std::to_string(held_.size()) + " planned (ChunkOptions::unfinished)");
    use_held(a, free_held_.back());
    free_held_.pop_back();
  }
  split_tokens(a, tokens, batch, seq);
  a.first_sample = grad_scale != 0.f ? first_sample : -1;  // no dropout when evaluating
  const PassScope pass(*this, false);
  params_.refresh_low_precision();
  expert_params_.refresh_low_precision();
  const int rows = batch * seq, n = (int)local_rows(rows), h = config_.hidden_size;
  const int specs = (int)params_.layout().specs().size();
  auto need = [&](int begin, int end) {
    if (params_needed_) params_needed_(begin, end);
  };
  LayerCall call = layer_call(a, batch, seq);
  // Training forwards count the router losses (evaluation's are not part of any objective).
  a.moe_loss_grad = router_loss_scale_ >= 0 ? router_loss_scale_ : (double)grad_scale * rows;
  if (grad_scale != 0.f) call.moe_stats = &moe_stats_;
  if (options_.placement.pre_process) {
    need(0, embedding_specs_);  // word and (learned) position embeddings
    embedding_.forward(a.input_ids.data(), batch, seq, a.input, scratch_.row_out, call.positions);
    kernels::dropout_inplace(a.input, n, h, call.dropout, kernels::kEmbeddingDropoutSite);
  }
  const float* x = a.input;
  for (size_t l = 0; l < layers_.size(); ++l) {
    need(layer_first_spec_[l], layer_end_spec_[l]);
    layers_[l].forward(x, a.layers[l], scratch_, call);
    x = a.layers[l].output;
  }
  if (!options_.placement.post_process) return 0.0;
  need(post_first_spec_, specs);  // final norm (and an untied output layer)
  final_norm_.forward(x, a.final_ln_out, a.final_ln_mean, a.final_ln_rstd, n, h);
  if (config_.tied_output() && lm_head_.blocks.rows == 0)
    need(0, 1);  // the output layer's (tied) word embedding (else: in blocks, as it runs)
  if (sequence_parallel_) {
    // The logits need every row: all-gather the final LayerNorm output (g-bar); d(its
    // rows) is reduce-scattered from the partial d(input) in row_out into d_final_ln_out.
    tensor_parallel::gather_from_sequence_parallel_region(tp_, a.final_ln_out.operand(),
                                                          scratch_.gathered, (long)n * h);
    lm_head_.forward(scratch_.gathered.operand(), a.target_ids.data(), rows, a.losses, grad_scale,
                     scratch_.row_out, a.d_final_ln_out);
  } else {
    lm_head_.forward(a.final_ln_out.operand(), a.target_ids.data(), rows, a.losses, grad_scale,
                     a.d_final_ln_out);
  }
  double total = 0;
  for (int r = 0; r < rows; ++r) total += a.losses[r];
  if (per_token_loss) std::copy_n(a.losses, rows, per_token_loss);
  return total;
}

void GPTModel::grad_ready(int spec_begin, int spec_end) const {
  if (grad_ready_ && spec_begin < spec_end) grad_ready_(spec_begin, spec_end);
}

void GPTModel::non_layer_grads_ready() const {
  // The same ranges as backward reports (RMSNorm has no bias, RoPE no position embedding,
  // an untied output layer no embedding copy on the last stage).
  const int specs = (int)params_.layout().specs().size();
  if (options_.placement.post_process) {
    grad_ready(post_first_spec_, specs);  // final norm (and an untied output layer)
    if (!options_.placement.pre_process && config_.tied_output()) grad_ready(0, 1);  // tied copy
  }
  if (options_.placement.pre_process) grad_ready(0, embedding_specs_);  // word (and position)
}

void GPTModel::backward_chunk(int slot, int batch, int seq) {
  backward(slot, batch, seq, false);
}

void GPTModel::backward_input_chunk(int slot, int batch, int seq, int key) {
  if (layers_.empty()) return backward(slot, batch, seq, true);  // no linears to defer
  if (deferred_.entries() == 0)
    throw std::logic_error(
        "backward_input_chunk: the chunk was planned without deferred weight "
        "gradients (ChunkOptions::deferred_weight_grads)");
  Activations& a = act_[slot];
  const HeldSet& held = held_.at(a.held);
  deferred_.begin(key, held.begin, held.end);
  try {
    backward(slot, batch, seq, true);
  } catch (...) {
    deferred_.end();
    throw;
  }
  deferred_.end();
  // W reads the set: it stays with the micro-batch; the slot takes a free one at its next F.
  held_by_key_[key] = a.held;
  a.held = -1;
}

// The products replay in the order B recorded them, layer by layer from the last, so each
// layer's weights are final (for this micro-batch) at its mark.
void GPTModel::weight_chunk(int key) {
  if (!layers_.empty()) {
    deferred_.replay(key, [&](int l) {
      grad_ready(layer_first_spec_[l], layer_end_spec_[l]);
      if (progress_) progress_();
    });
    free_held_.push_back(held_by_key_.at(key));
    held_by_key_.erase(key);
  }
  non_layer_grads_ready();
}

void GPTModel::backward(int slot, int batch, int seq, bool defer_weight_grads) {
  Activations& a = act_[slot];
  const int n = (int)local_rows((long)batch * seq), h = config_.hidden_size;
  const int specs = (int)params_.layout().specs().size();
  // Deferred: nothing is final before W, which reports every tensor.
  auto ready = [&](int begin, int end) {
    if (!defer_weight_grads) grad_ready(begin, end);
  };
  const float* last = output_buffer(slot);
  LayerCall call = layer_call(a, batch, seq);
  call.moe_loss_grad = a.moe_loss_grad;
  const PassScope pass(*this, true);
  auto need = [&](std::pair<int, int> specs) {
    if (params_needed_ && specs.first < specs.second) params_needed_(specs.first, specs.second);
  };
  if (options_.placement.post_process) {
    need({post_first_spec_, specs});
    // The output layer's gradients were formed with the loss, in forward_chunk.
    final_norm_.backward(a.d_final_ln_out, last, a.final_ln_mean, a.final_ln_rstd, d_residual_, n,
                         h, false);
    ready(post_first_spec_, specs);  // final norm (and an untied output layer)
    if (!options_.placement.pre_process && config_.tied_output()) ready(0, 1);  // tied copy
  } else {
    std::copy_n(a.output_grad, (long)n * h, d_residual_);
  }
  for (int l = (int)layers_.size() - 1; l >= 0; --l) {
    need(backward_specs(l));
    if (recompute_.last(l))
      recompute_group(a, l, call);
    else if (l >= recompute_.layers && options_.recompute_attention)
      layers_[l].attention_core(a.layers[l], call);
    layers_[l].backward(layer_input(a, l), a.layers[l], d_residual_, scratch_, call);
    if (defer_weight_grads) deferred_.mark(l);
    ready(layer_first_spec_[l], layer_end_spec_[l]);
  }
  if (options_.placement.pre_process) {
    // The embedding dropout's backward is the same mask, applied to the gradient.
    kernels::dropout_inplace(d_residual_, n, h, call.dropout, kernels::kEmbeddingDropoutSite);
    embedding_.backward(a.input_ids.data(), batch, seq, d_residual_, scratch_.row_out,
                        call.positions);
    ready(0, embedding_specs_);  // word and (learned) position embeddings
  }
}

double GPTModel::forward_backward(const int* tokens, int batch, int seq, float grad_scale,
                                  long first_sample) {
  double loss = forward_chunk(0, tokens, batch, seq, grad_scale, nullptr, first_sample);
  backward_chunk(0, batch, seq);
  return loss;
}

double GPTModel::forward(const int* tokens, int batch, int seq, float* per_token_loss) {
  return forward_chunk(0, tokens, batch, seq, 0.f, per_token_loss);
}

}  // namespace trident
