#pragma once
// The GPT-2 model, or one pipeline chunk of it, on one rank: embedding (first chunk),
// a range of transformer layers, final LayerNorm + output layer tied to the word embedding
// + vocabulary-parallel cross-entropy (last chunk). Parameters, gradients and activations
// are planned and allocated once, at construction; `slots` micro-batches can be in flight.
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "config/model_config.h"
#include "kernels/dropout.h"
#include "kernels/mixed_linear.h"
#include "kernels/weight_grad_store.h"
#include "model/chunk_memory.h"
#include "model/memory_plan.h"
#include "model/moe_stats.h"
#include "model/transformer_layer.h"
#include "parameters/parameters.h"
#include "pipeline_parallel/stage.h"
#include "tensor_parallel/lm_head_loss.h"

namespace trident {

class GPTModel : public pipeline_parallel::PipelineStage {
 public:
  // micro_batch x seq is the largest batch forward/backward will be called with. Context
  // parallelism (options.context_parallel): seq is this rank's tokens per sample (the
  // sequence / c), here and in every call below, whose tokens hold whole samples ([batch,
  // seq x c + 1]); the loss returned is that of this rank's tokens.
  // expert: the expert group of the MoE layers (options.expert_parallel ranks; null at
  // EP = 1), which must outlive the model.
  GPTModel(const ModelConfig& config, comm::Communicator& tp, int micro_batch, int seq,
           const ChunkOptions& options = {}, comm::Communicator* expert = nullptr);

  // Whole-model helpers (one chunk holding everything, slot 0).
  // tokens: [batch, seq + 1]; input ids are the first seq, targets the last seq.
  // Returns the sum of the per-token losses; gradients of grad_scale * (that sum) are
  // accumulated into parameters().grads(). grad_scale must not be 0.
  double forward_backward(const int* tokens, int batch, int seq, float grad_scale,
                          long first_sample = -1);
  // Forward only. per_token_loss, when given, receives batch * seq losses.
  double forward(const int* tokens, int batch, int seq, float* per_token_loss = nullptr);

  // Pipeline interface. forward_chunk reads token ids (first chunk) or input_buffer(slot)
  // (later chunks); the last chunk returns the loss sum (0 elsewhere) and, when grad_scale
  // != 0, already accumulates the output layer's weight gradient and keeps d(final
  // LayerNorm output) for backward_chunk (the logits exist one row chunk at a time). Later chunks
  // leave their output in output_buffer(slot); backward_chunk then reads d(output) from
  // output_grad_buffer(slot) and leaves d(input) in input_grad(). first_sample: the run-wide index
  // of the micro-batch's first sample, which names its dropout masks; < 0 (evaluation) turns
  // dropout off.
  double forward_chunk(int slot, const int* tokens, int batch, int seq, float grad_scale,
                       float* per_token_loss = nullptr, long first_sample = -1) override;
  void backward_chunk(int slot, int batch, int seq) override;
  // Zero-bubble schedules (ChunkOptions::deferred_weight_grads > 0): backward_chunk without
  // the linears' weight gradients, whose operands are kept under `key` for weight_chunk(key).
  // The grad-ready hook is then called by weight_chunk, for every tensor (biases, LayerNorms
  // and the embedding are final after B, the linears' weights after W).
  void backward_input_chunk(int slot, int batch, int seq, int key) override;
  void weight_chunk(int key) override;
  float* input_buffer(int slot) override { return act_[slot].input; }
  const float* output_buffer(int slot) const override;
  float* output_grad_buffer(int slot) override { return act_[slot].output_grad; }
  const float* input_grad() const override { return d_residual_; }

  // Called during backward_chunk with [begin, end) spec indices whose gradients are final
  // for this micro-batch (layers in reverse, then the embedding): data parallelism starts
  // reducing a bucket as soon as all of it is final. Empty function: no calls.
  using GradReadyHook = std::function<void(int spec_begin, int spec_end)>;
  void set_grad_ready_hook(GradReadyHook hook) { grad_ready_ = std::move(hook); }
  // Called during forward_chunk with [begin, end) spec indices about to be read (the
  // embedding, each layer, the final LayerNorm and output layer, in that order): the
  // distributed optimizer's overlapped all-gather waits there for the buckets holding them.
  // With sharded weights (ZeRO-3) also during backward (the final LayerNorm, then each layer,
  // or each recomputed group before its recomputation; the embedding's backward reads no
  // weights), each call naming whole units of weight_units().
  using ParamsNeededHook = std::function<void(int spec_begin, int spec_end)>;
  void set_params_needed_hook(ParamsNeededHook hook) { params_needed_ = std::move(hook); }
  // Sharded weights: told as each forward or backward pass over the chunk begins (backward:
  // true) and ends, so that the gathered units can be given back.
  void set_pass_hooks(std::function<void(bool backward)> begin, std::function<void()> end) {
    pass_begin_ = std::move(begin), pass_end_ = std::move(end);
  }
  // The spec ranges the chunk's weights are gathered in under ZeRO-3
  // (parameters/parameter_layout.h).
  std::vector<std::pair<int, int>> weight_units() const {
    return trident::weight_units(params_.layout());
  }
  // With ChunkOptions::vocabulary_block_rows: the output layer's weight rows [begin, end) of
  // the flat buffer are about to be read (need), their gradient written (grad_begin), or
  // their gradient for this micro-batch's chunk of rows is complete (grad_done); and the
  // input word embedding's lookup and its backward (tensor_parallel::VocabParallelEmbedding).
  struct VocabularyHooks {
    std::function<void(long begin, long end)> need, grad_begin, grad_done;
    std::function<void(const int* ids, int rows, float* out)> lookup;
    std::function<void(const int* ids, int rows, const float* dout)> lookup_backward;
  };
  void set_vocabulary_hooks(VocabularyHooks hooks);
  // Called between the big products inside each layer's forward and backward (communication
  // progress).
  void set_progress_hook(std::function<void()> hook) { progress_ = std::move(hook); }

  Parameters& parameters() { return params_; }
  const Parameters& parameters() const { return params_; }
  // Expert parallelism (training, EP > 1): this rank's E/EP experts of the chunk's MoE layers,
  // in a buffer of their own (reduced over the expert-data-parallel group, sharded over it by
  // the distributed optimizer). Empty otherwise: the experts are in parameters().
  Parameters& expert_parameters() { return expert_params_; }
  const Parameters& expert_parameters() const { return expert_params_; }
  bool splits_experts() const { return expert_params_.size() > 0; }
  // LoRA (ModelConfig::lora): the chunk's adapters, in a buffer of their own with the
  // gradients and (RankModel's) optimizer; the base buffer, parameters(), then has no
  // gradients. Empty without LoRA.
  Parameters& lora_parameters() { return lora_params_; }
  const Parameters& lora_parameters() const { return lora_params_; }
  bool has_lora() const { return lora_params_.size() > 0; }
  // What training updates and reduces: the adapters under LoRA, else parameters().
  Parameters& trainable_parameters() { return has_lora() ? lora_params_ : params_; }
  const Parameters& trainable_parameters() const { return has_lora() ? lora_params_ : params_; }
  const ModelConfig& config() const { return config_; }
  const ChunkPlacement& placement() const { return options_.placement; }
  // The ranks each expert is split over (--expert-tensor-parallel-size; 0: t).
  int expert_tensor_parallel() const { return options_.expert_tensor_parallel; }
  // Whether sequence parallelism is on: boundary tensors hold rows / t rows.
  bool sequence_parallel() const { return sequence_parallel_; }
  // Whole experts at ETP = 1 < t (model/moe_layer.h): each tensor rank routes its own rows,
  // so the routers' weight gradients are partial sums over the tensor group.
  bool routers_see_own_rows() const {
    return config_.moe.enabled() && sequence_parallel_ && options_.expert_tensor_parallel > 0 &&
           options_.expert_tensor_parallel < tp_.size();
  }
  const MemoryPlan& memory_plan() const { return plan_; }
  // The router losses (coefficients included) and expert loads of the MoE layers of this
  // chunk, summed over the training forwards since the last call, and reset.
  MoeStats take_moe_stats() { return std::exchange(moe_stats_, {}); }
  // The factor every training micro-batch's router losses get in the gradient from now on:
  // the objective is (1/m) sum over micro-batches of [LM loss + router losses], averaged
  // over d, so the trainer sets loss_scale / (m x d) each step. Negative (the default):
  // grad_scale x the micro-batch's tokens, the same factor when every target counts; the
  // trainer must set it when a loss mask (--sft) makes grad_scale 1 / counted targets.
  void set_router_loss_scale(double scale) { router_loss_scale_ = scale; }
  // The table memory_plan() lists, row for row, and where the carve put each part of each
  // copy of its arena buffers (offsets from the arena's start): tests hold one to the other.
  struct CarvedPart {
    int buffer;  // its row in buffers()
    long offset, floats;
  };
  const std::vector<ChunkBuffer>& buffers() const { return buffers_; }
  const std::vector<CarvedPart>& carved() const { return carved_; }
  long arena_floats() const { return arena_->size(); }
  const ChunkShape& shape() const { return shape_; }
  // Zero-bubble schedules: the weight-gradient operands kept from B to W.
  const kernels::WeightGradStore& weight_grad_store() const { return deferred_; }
  MemoryPlan& memory_plan() { return plan_; }
  int padded_vocab() const { return padded_vocab_; }
  int max_seq() const { return seq_; }
  // The pieces, for generation/, which runs them on cached keys and values.
  const std::vector<TransformerLayer>& layers() const { return layers_; }
  const tensor_parallel::VocabParallelEmbedding& embedding() const { return embedding_; }
  const tensor_parallel::ColumnParallelLinear& output_layer() const {
    return lm_head_.output_layer;
  }
  const Norm& final_norm() const { return final_norm_; }
  // This rank's shard of the logits of row r (batch-major) of the last forward on slot 0,
  // formed on demand in scratch that the next call or forward overwrites.
  const float* logits_row(int r) const;

 private:
  struct Activations {  // one in-flight micro-batch
    float* input;       // embedding output (first chunk) or received hidden states
    std::vector<LayerActivations> layers;
    kernels::GemmOperandBuffer final_ln_out;  // bf16 in bf16 runs
    float *final_ln_mean, *final_ln_rstd;
    float* d_final_ln_out;  // [tokens, hidden], written by forward_chunk when training
    float* losses;
    float* output_grad;  // d(output) received from the next stage
    std::vector<int> input_ids, target_ids;
    // Packed documents: [batch * seq] first token of each token's document in its sample,
    // and its position (empty unless ChunkOptions::packed asks for them).
    std::vector<int> doc_start, positions;
    long first_sample = -1;
    // The MoE router losses' gradient seed in backward (set_router_loss_scale).
    double moe_loss_grad = 0.0;
    int held = -1;  // the set of held activations its layers use (-1: none yet)
  };
  // The activations W reads (ChunkShape::held_sets), of the layers that are not recomputed:
  // a slot takes a set at F; a zero-bubble B hands it to the micro-batch until its W.
  struct HeldSet {
    const float *begin = nullptr, *end = nullptr;  // all of its memory, contiguous
    // ln1_out, qkv, attn_out, residual1, ln2_out, fc1_pre, fc1_act and, with deferred
    // weight gradients, output (ChunkShape::output_held)
    std::vector<LayerActivations> layers;
  };
  void use_held(Activations& a, int set);
  void check_sequence_split(int micro_batch, int seq) const;
  void build_layers(const ModelConfig& config);
  void build_embedding_and_head(const ModelConfig& config);
  // Leaves the zeroing of the product weights' gradients to their first product (deferred_zero).
  void defer_weight_grad_zeroing();
  void plan_and_allocate();
  // The carve (see plan_and_allocate): the pointers each row of buffers_ sets, copy by copy
  // and part by part.
  using PartTarget = std::function<void(float* at, long floats)>;
  std::vector<PartTarget> targets(const ChunkBuffer& b);
  std::vector<PartTarget> slot_targets(Activations& s, BufferField field);
  std::vector<PartTarget> chunk_targets(BufferField field);
  std::vector<LayerActivations*> home_layers(BufferHome home);
  void size_activation_sets();
  void carve_arena();
  float* take_part(const ChunkBuffer& b, int copy, long floats, float* held_block,
                   std::vector<long>& held_used);
  void wire_slots();
  // Rows of a [tokens, h] tensor outside the tensor-parallel region on this rank, and the
  // first of them in the micro-batch.
  long local_rows(long tokens) const;
  long first_local_row(long tokens) const;
  void find_documents(Activations& a, const int* tokens, int batch, int seq) const;
  // Context parallelism: cp_ from the options, and each local token's global position.
  void place_context_parallel_tokens();
  void split_tokens(Activations& a, const int* tokens, int batch, int seq);
  LayerCall layer_call(const Activations& a, int batch, int seq) const;
  const float* layer_input(const Activations& a, int l) const;
  void recompute_group(Activations& a, int last, const LayerCall& call);
  void backward(int slot, int batch, int seq, bool defer_weight_grads);
  void grad_ready(int spec_begin, int spec_end) const;
  // After B: the final LayerNorm and the embedding (or the tied copy on the last stage).
  void non_layer_grads_ready() const;

  // The recomputed layers [0, layers) in groups of `size` consecutive layers (the last
  // group smaller when size does not divide layers); a group keeps only its input.
  struct RecomputeGroups {
    int layers = 0, size = 1;
    int count() const { return (layers + size - 1) / size; }
    int first(int l) const { return l / size * size; }
    bool last(int l) const { return l < layers && (l + 1 == layers || (l + 1) % size == 0); }
  };

  ModelConfig config_;
  comm::Communicator& tp_;
  comm::Communicator* expert_ = nullptr;
  int micro_batch_, seq_, padded_vocab_;
  ChunkOptions options_;  // slots normalised to >= 1
  bool sequence_parallel_ = false;
  // Context parallelism (ChunkOptions::context_parallel): the cp group, and the global
  // position (in its sample) of each of this rank's seq_ tokens per sample.
  context_parallel::ContextParallel cp_;
  std::vector<int> token_position_;
  ChunkShape shape_;  // what the memory plan is computed from
  RecomputeGroups recompute_;
  // One group's activations, shared by every recomputed group of every slot.
  std::vector<LayerActivations> recompute_act_;
  kernels::LinearPrecision precision_;
  Parameters params_;
  Parameters expert_params_;  // see expert_parameters()
  Parameters lora_params_;    // see lora_parameters()
  std::vector<TransformerLayer> layers_;
  tensor_parallel::VocabParallelEmbedding embedding_;
  tensor_parallel::LMHeadLoss lm_head_;  // output layer (weight = word embedding) + loss
  Norm final_norm_{};
  std::vector<ChunkBuffer>
      buffers_;  // the chunk's buffer table: plan_ lists it, the arena holds it
  MemoryPlan plan_;
  std::unique_ptr<Arena> arena_;
  std::vector<CarvedPart> carved_;
  std::vector<Activations> act_;
  float* d_residual_ = nullptr;
  MoeStats moe_stats_;               // see take_moe_stats
  double router_loss_scale_ = -1.0;  // see set_router_loss_scale
  LayerScratch scratch_{};
  kernels::WeightGradStore deferred_;  // zero-bubble schedules: the W ops' operands
  std::vector<HeldSet> held_;
  std::vector<int> free_held_;
  std::map<int, int> held_by_key_;  // micro-batch between its B and W -> its held set
  GradReadyHook grad_ready_;
  ParamsNeededHook params_needed_;
  std::function<void(bool)> pass_begin_;
  std::function<void()> pass_end_;
  // Tells pass_end_ when a pass leaves its scope, however it leaves.
  struct PassScope {
    PassScope(const GPTModel& m, bool backward);
    ~PassScope();
    const GPTModel& model;
  };
  // The specs a layer's backward needs: the recomputed group it ends (rebuilt first), its
  // own, or none (inside a recomputed group, gathered with the group).
  std::pair<int, int> backward_specs(int l) const;
  std::function<void()> progress_;
  std::vector<int> layer_first_spec_;  // index of each layer's first parameter spec
  std::vector<int> layer_end_spec_;    // one past each layer's last
  int embedding_specs_ = 0;            // the embedding's specs (first chunk), from index 0
  int post_first_spec_ = 0;            // the final norm's first spec (last chunk)
};

}  // namespace trident
