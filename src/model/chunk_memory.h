#pragma once
// The memory plan of one model chunk as a pure function of its shape: GPTModel builds its
// plan (and then its arena) from it, and the planner (src/planner) sizes layouts it never
// builds with the same function, so the plan `trident plan` prints is the one training
// prints.
#include <string>
#include <utility>
#include <vector>

#include "config/model_config.h"
#include "config/packed_documents.h"
#include "context_parallel/context_parallel.h"
#include "kernels/dropout.h"
#include "kernels/low_precision.h"
#include "model/memory_plan.h"
#include "model/moe_layer.h"
#include "parameters/parameter_layout.h"

namespace trident {

// How one chunk is built, beyond the model's shape.
struct ChunkOptions {
  ChunkPlacement placement{};
  int slots = 1;  // micro-batches in flight (the schedule's maximum)
  // Zero-bubble schedules (zb-h1): micro-batches between their B and their W at once (the
  // schedule's max_deferred_weight_grads), each with a buffer for the weight-gradient
  // operands W cannot read from the held activations (see ChunkShape::held_sets); 0:
  // backward computes weight gradients at once.
  int deferred_weight_grads = 0;
  // Zero-bubble schedules: micro-batches between their F and their W at once (the
  // schedule's max_unfinished). The activations W reads are held that many times, the rest
  // `slots` times. 0: slots + deferred_weight_grads (always enough).
  int unfinished = 0;
  // How many of this chunk's first layers keep only their input in forward and recompute
  // the rest in backward (--recompute-granularity full), and how many consecutive ones share
  // one kept input: --recompute-method uniform groups every layer N at a time (Megatron's
  // meaning of --recompute-num-layers), block recomputes its first N layers one by one (1).
  // A group larger than the recomputed layers is one group of all of them.
  int recompute_layers = 0;
  int recompute_group = 1;
  // Keep q, k, v but not the attention core's output; recompute it in backward
  // (--recompute-granularity selective).
  bool recompute_attention = false;
  kernels::Precision precision = kernels::Precision::kFp32;
  kernels::DropoutConfig dropout{};
  long pad_multiple = 16;  // parameter buffer length multiple (distributed optimizer)
  // The expert buffer's (expert parallelism): 16 x the expert-data-parallel size under the
  // distributed optimizer, which shards it over that group.
  long expert_pad_multiple = 16;
  // Sharded gradients (ZeRO-2): the gradient buffer's pages come on first write; all but
  // this rank's shard are given back after each reduction (GradientMemory::kOnFirstWrite).
  // The expert buffer's too (expert parallelism: sharded over the expert-data group).
  bool shard_gradients = false;
  // Sharded weights (ZeRO-3): the weight buffer (and its 16-bit copy) likewise; a unit's
  // weights outside this rank's shard exist only while it runs (data_parallel/param_gatherer.h).
  // The expert buffer's too, each MoE layer's experts a unit.
  bool shard_parameters = false;
  // Sharded weights in fp32 with both uses of the word embedding on this chunk (or untied):
  // the output layer's weight comes and goes in blocks of this many rows and the input word
  // embedding row by row (data_parallel/buckets.h VocabularyBlocks, set_vocabulary_hooks);
  // 0: off.
  int vocabulary_block_rows = 0;
  // Rows of logits formed at a time by the fused output layer + cross-entropy; 0 picks
  // tensor_parallel::lm_head_chunk_rows. The micro-batch's b * s gives the un-fused path.
  int logits_chunk_rows = 0;
  // --sequence-parallel (Korthikanti et al. 2022): with t > 1, LayerNorms, dropout,
  // biases and the residual stream run on this rank's 1/t of the micro-batch's b * s rows
  // (contiguous blocks of the batch-major rows), which must divide by t. The embedding
  // output, boundary tensors and their gradients are then that block too. Ignored at t = 1
  // and for inference.
  bool sequence_parallel = false;
  // Context parallelism (--context-parallel-size c > 1): the chunk is planned, and its
  // forward_chunk / backward_chunk called, with seq = this rank's tokens per sample (the
  // sequence / c: chunks i and 2c - 1 - i), while forward_chunk's tokens hold whole samples
  // ([batch, seq x c + 1]); attention runs over `group` (context_parallel/attention.h).
  // The group is set by whoever builds the chunk; size 1: off.
  context_parallel::ContextParallel context_parallel{};
  // MoE layers' router losses (--moe-aux-loss-coeff with aux_loss, --moe-z-loss-coeff),
  // added to the training objective as Megatron does: (1/m) sum over micro-batches of each
  // micro-batch's mean language-model loss plus its layers' router losses.
  double moe_aux_loss_coeff = 0.0;
  double moe_z_loss_coeff = 0.0;
  // --expert-model-parallel-size: the MoE layers run E/EP experts on the rows the expert
  // group sends them (sized for the dropless worst case, MoeDims::expert_rows).
  int expert_parallel = 1;
  // --expert-tensor-parallel-size ETP (0: t): the ranks each expert is split over. At ETP = 1
  // < t the experts are whole and each tensor rank routes its own sequence-parallel rows
  // (model/moe_layer.h), so the MoE buffers are sized for tokens / t rows.
  int expert_tensor_parallel = 0;
  // Packed documents (--reset-position-ids, --reset-attention-mask): where each token's
  // document starts and its position, found from the EOD tokens of every micro-batch.
  PackedDocuments packed{};
  // Generation: no gradients or optimizer state (generation/ runs the layers on its own
  // cache and activations; micro_batch x seq should then be 1 x 1).
  bool inference = false;
  // Generation: the linear weights also in the decode products' panel layout (twice their
  // memory; see kernels/skinny_linear.h for what it buys).
  bool decode_panels = false;
};

// Everything a chunk's memory plan depends on, resolved (slots >= 1, recompute clamped to
// the chunk's layers, logits rows chosen).
struct ChunkShape {
  ModelConfig config;
  int tensor_parallel_size = 1;
  int micro_batch = 1, seq = 1;
  int layers = 0;
  int recomputed_layers = 0, recompute_group = 1;
  ChunkOptions options;
  long parameter_floats = 0;  // this rank's flat buffer, padding included
  // Expert parallelism (parameters/parameter_layout.h ExpertSlice): the expert buffer's
  // floats, padding included, and the experts per MoE layer it holds (0: experts inline).
  long expert_floats = 0;
  int local_experts = 0;
  long lora_floats = 0;     // LoRA's adapter buffer, padding included (0: no LoRA)
  long largest_weight = 0;  // the largest 2-D tensor this rank holds
  int logits_chunk_rows = 0;
  bool sequence_parallel = false;  // options.sequence_parallel, in effect (t > 1, training)

  long tokens() const { return (long)micro_batch * seq; }
  // Rows of a [tokens, h] tensor outside the tensor-parallel region: tokens / t with
  // sequence parallelism.
  long local_tokens() const {
    return sequence_parallel ? tokens() / tensor_parallel_size : tokens();
  }
  long logits_chunk_floats() const;
  // Largest output-or-gradient operand and largest input operand of any linear layer
  // (the output layer's counted per row chunk): the rounded-operand scratch sizes.
  std::pair<long, long> operand_sizes() const;
  long largest_layer_weight() const;  // qkv or fc1 / fc2, this rank's slice
  // How many sets of the layers' held activations the chunk has. A zero-bubble schedule's W
  // reads each linear's input where forward left it (ln1 / ln2 out, attention out, GeLU /
  // SwiGLU out) and finds the output gradients in buffers of the same layer that B has
  // passed (qkv's in qkv, fc1's in fc1 out, linear_proj's in the residual after attention,
  // linear_fc2's in the layer's output, all but the chunk's last), so these buffers of the
  // layers that are not recomputed live from F to W (options.unfinished sets), the rest
  // from F to B (slots sets). Without deferred weight gradients: slots.
  int held_sets() const;
  // One micro-batch's deferred weight-gradient operands that W cannot read from the held
  // activations, as their products take them (bf16 in bf16 runs): linear_fc2's output
  // gradient in the chunk's last layer, any output gradient that outgrows its buffer (with
  // sequence parallelism linear_proj's and linear_fc2's, of all rows, against their 1/t), the
  // attention output under selective recomputation, the all-gathered LayerNorm outputs
  // under sequence parallelism, and dY and X of every linear of the recomputed layers.
  long deferred_weight_grad_floats() const;

  // The layers that keep their activations (the ones after the recomputed ones).
  int kept_layers() const { return layers - recomputed_layers; }
  bool deferring() const { return options.deferred_weight_grads > 0; }
  // Where layer l's output lives. Zero-bubble schedules keep it in the held sets for all
  // kept layers but the chunk's last (linear_fc2's output gradient goes there in B; the
  // last is the chunk's output, which a send may still read). Otherwise it is the slot's:
  // every kept layer's, and of the recomputed ones only each group's last (the next
  // group's input).
  bool output_held(int l) const;
  // Whether the chunk's layer l is an MoE layer, and one that keeps its activations.
  bool moe_layer(int l) const { return config.is_moe_layer(options.placement.first_layer + l); }
  bool kept_moe_layer(int l) const { return l >= recomputed_layers && moe_layer(l); }
  bool kept_dense_layer(int l) const { return l >= recomputed_layers && !moe_layer(l); }
  bool output_in_slot(int l) const;
};

// What the chunk's parameter layout contributes: its parameters (unpadded) and its largest
// 2-D tensor. Building the layout names every tensor; the planner, which sizes thousands of
// layouts, computes this once per distinct chunk.
// The expert buffer's Adam row of a chunk's plan (resized by the optimizer's sharding).
inline constexpr const char* kExpertMomentsRow = "expert adam exp_avg + exp_avg_sq";
// LoRA: the adapter buffer's rows (the base then has no gradient or Adam row).
inline constexpr const char* kLoraWeightsRow = "lora adapters";
inline constexpr const char* kLoraGradientsRow = "lora gradients";
inline constexpr const char* kLoraMomentsRow = "lora adam exp_avg + exp_avg_sq";
// ...and the branches' scratch (add_lora_scratch in chunk_memory.cpp).
inline constexpr const char* kLoraBranchRow = "LoRA branch u = x A^T + du";
inline constexpr const char* kLoraInputRow = "LoRA branch input in fp32 (dropout, bf16)";
inline constexpr const char* kLoraLowRow = "LoRA bf16 s u + s B";
// Context parallelism (c > 1): the attention call's buffers of this --cp-comm-type, held while
// it runs (context_parallel/buffers.h), a "communication" row of the chunk's plan.
std::string context_parallel_row(context_parallel::CpCommType type);
// The floats of a chunk's LoRA adapter buffer (ParameterLayout::lora_adapters), padded to
// pad_multiple; 0 without LoRA. Every layer's adapters have the same size (LoRA refuses MoE).
long lora_adapter_floats(const ModelConfig& config, TensorParallelRank tp,
                         const ChunkPlacement& placement, long pad_multiple);

struct LayoutSizes {
  long parameters = 0;  // the dense buffer (all of it with experts inline)
  long experts = 0;     // expert parallelism: the expert buffer of one expert rank
  long largest_weight = 0;
  // (offset, floats) of each tensor, in layout order; empty past kLayersSizedWhole layers.
  std::vector<std::pair<long, long>> tensors;
  // (offset, floats) of each weight unit (parameters/parameter_layout.h weight_units), the
  // padding up to the next unit included; empty with `tensors`.
  std::vector<std::pair<long, long>> units;
};
// Chunks of up to this many layers are sized from their whole parameter layout.
inline constexpr int kLayersSizedWhole = 4096;
// expert_parallel > 1 (MoE): the experts in a buffer of their own (splits_experts).
LayoutSizes layout_sizes(const ModelConfig& config, TensorParallelRank tp,
                         const ChunkPlacement& placement, int expert_parallel = 1,
                         int expert_tensor_parallel = 0);

// Rows of logits the fused output layer forms at a time for a micro-batch of `tokens` rows
// (ChunkOptions::logits_chunk_rows, or tensor_parallel::lm_head_chunk_rows).
int logits_chunk_rows(const ModelConfig& config, int t, long tokens, const ChunkOptions& options);

// The shape of chunk `options.placement` of a model on tensor-parallel rank `tp`,
// from its parameter layout (or its sizes, computed before).
ChunkShape chunk_shape(const ModelConfig& config, TensorParallelRank tp, int micro_batch, int seq,
                       const ChunkOptions& options);
ChunkShape chunk_shape(const ModelConfig& config, TensorParallelRank tp, int micro_batch, int seq,
                       const ChunkOptions& options, const LayoutSizes& sizes);

// Where a buffer's copies live, in the order the carve hands them out (the set first, then
// the layer). Sets: the micro-batch slots (ChunkOptions::slots), the held sets
// (ChunkShape::held_sets, each one contiguous range of the arena for WeightGradStore), the
// one recompute group shared by every slot, or the chunk.
enum class BufferHome {
  kOutsideArena,   // parameters, gradients, optimizer state: Parameters and the optimizer own them
  kChunk,          // one copy
  kSlots,          // one per slot
  kSlotLayers,     // per slot, each kept layer
  kSlotMoeLayers,  // per slot, each kept MoE layer
  kSlotOutputs,    // per slot, each layer with ChunkShape::output_in_slot
  kHeldLayers,     // per held set, each kept layer
  kHeldDenseLayers,      // per held set, each kept layer with the dense MLP (fc1 out, activation)
  kHeldOutputs,          // per held set, each layer with ChunkShape::output_held
  kRecomputeGroup,       // each layer of the recompute group
  kRecomputeGroupInner,  // each layer of the recompute group but its last
  kDeferredEntries,      // per micro-batch between its B and its W
};

// The pointers GPTModel sets from one copy, one per part, in this order.
enum class BufferField {
  kNone,  // outside the arena
  // A layer's (LayerActivations).
  kLn1Out,
  kLnStats,  // ln1 mean, ln1 rstd, ln2 mean, ln2 rstd
  kQkv,
  kQkNorm,        // --qk-layernorm: qkv before the norm, the heads' rstd
  kAttentionOut,  // kChunk: the one selective recomputation rebuilds for every kept layer
  kAttentionLse,  // kChunk: likewise
  kResidual,
  kLn2Out,
  kFc1Out,
  kFc1Act,
  kMoe,  // an MoE MLP's MoeActivations (model/moe_layer.h), part by part
  kLayerOutput,
  // A slot's.
  kChunkInput,
  kFinalLnOut,
  kFinalLnStats,  // mean, rstd
  kFinalLnGrad,
  kLosses,
  kOutputGrad,
  kDeferredOperands,
  // The chunk's scratch.
  kResidualGrad,
  kGatheredInput,
  kRowOutAndDHidden,  // row_out, d_hidden
  kDFfn,
  kDAttnAndDQkv,  // d_attn, d_qkv
  kMoeScratch,    // MoeScratch, part by part
  kLoraScratch,   // LoRA: u, du (tensor_parallel/lora.h LoraScratch)
  kLoraInput,     // LoRA with --lora-dropout or bf16: the branch's fp32 input
  kLoraLow,       // LoRA in bf16 runs: bf16(s u), bf16(s B)
  kLogits,
  kDLogits16,
  kGemmOperands16,  // act16, in16
  kWeightGrad32,
  kGemmOperands32,  // act32, in32, weight32
};

// One row of the chunk's buffer table: what the plan prints and sizes (group, name, floats,
// copies) and what the carve takes from the arena for it (each copy's parts, in the field's
// pointer order, every part on its own cache line).
struct ChunkBuffer {
  std::string group;  // MemoryPlan's: "parameters", "optimizer", "activations", "scratch"
  std::string name;
  std::vector<long> parts;
  int copies = 1;
  BufferHome home = BufferHome::kOutsideArena;
  BufferField field = BufferField::kNone;
  long floats() const;  // per copy: its parts together
  bool in_arena() const { return home != BufferHome::kOutsideArena; }
};

// Every buffer the chunk holds, in the order the plan prints them: parameters, gradients,
// Adam moments (unsharded; the distributed optimizer resizes them), activations for `slots`
// micro-batches, scratch. GPTModel carves its arena from this table.
std::vector<ChunkBuffer> chunk_buffers(const ChunkShape& shape);
MemoryPlan memory_plan(const std::vector<ChunkBuffer>& buffers);
// memory_plan(chunk_buffers(shape)), what the planner sizes.
MemoryPlan plan_chunk_memory(const ChunkShape& shape);

}  // namespace trident
