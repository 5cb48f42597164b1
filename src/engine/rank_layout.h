#pragma once
// How the model is laid out over ranks: the parallel sizes, the pipeline split, and the
// options that shape every chunk and its memory. Training derives one from its config
// (TrainingConfig::rank_layout), generation and convert from their flags, and the planner
// from each candidate layout; chunk options and a rank's buffers are then computed here
// once, for all of them, so the plan `trident plan` prints is the plan training prints.
#include <string>
#include <vector>

#include "config/model_config.h"
#include "context_parallel/context_parallel.h"
#include "data_parallel/buckets.h"
#include "engine/rank_buffers.h"
#include "kernels/dropout.h"
#include "kernels/low_precision.h"
#include "model/chunk_memory.h"
#include "pipeline_parallel/schedules.h"

namespace trident::engine {

struct RankLayout {
  ModelConfig model;
  // data: the ranks each weight is replicated over (gradients reduced, the distributed
  // optimizer and ZeRO sharded), d x c under context parallelism (Megatron's data-parallel
  // group with context parallel); context: c, whose ranks each hold seq / c of every sample.
  int tensor = 1, pipeline = 1, data = 1;
  int context = 1;
  context_parallel::CpCommType cp_comm_type = context_parallel::CpCommType::kP2p;
  // Tokens per sample on this rank (the sequence / c).
  int local_seq() const { return model.seq_length / context; }
  int virtual_stages = 1;  // v: model chunks per pipeline rank
  // Layers of each virtual stage j * p + s, in order (p * v entries; uneven splits allowed).
  std::vector<int> split;
  // The split follows engine::default_split (no split flag, or --pipeline-split balanced):
  // a layout with more stages (the memory check's remedies) is split the same way; else evenly.
  bool split_by_cost = true;
  int micro_batch = 1;
  kernels::Precision precision = kernels::Precision::kFp32;
  kernels::DropoutConfig dropout{};
  std::string recompute_granularity;         // "" | full | selective
  std::string recompute_method = "uniform";  // uniform | block
  int recompute_num_layers = 1;
  bool distributed_optimizer = false;
  bool shard_gradients = false;    // ZeRO-2 (with distributed_optimizer)
  bool shard_parameters = false;   // ZeRO-3 (with shard_gradients)
  long ddp_bucket_size = 0;        // floats per gradient bucket (0: gradient_bucket_floats)
  bool sequence_parallel = false;  // in effect: asked for and t > 1
  int logits_chunk_rows = 0;       // 0: the output layer picks
  double moe_aux_loss_coeff = 0.0, moe_z_loss_coeff = 0.0;  // ChunkOptions' (MoE)
  int expert_parallel = 1;  // EP (MoE): the experts split over EP of each stage's t x d ranks
  int expert_tensor_parallel = 0;  // ETP (MoE; 0: t): the ranks each expert is split over
  PackedDocuments packed{};        // ChunkOptions' too (packed documents)

  // An even split of the model's layers over p * v virtual stages.
  static std::vector<int> even_split(int num_layers, int stages);
  // Where chunk `chunk` of pipeline rank `stage` sits: virtual stage chunk * p + stage.
  ChunkPlacement placement(int stage, int chunk) const;
  // The pipeline rank that owns a tensor of the one-process model (by its name).
  int owner_of(const std::string& tensor_name) const;
  // Layers of a chunk with `layers` layers that recompute their activations in backward.
  int recomputed_layers(int layers) const;
  // Consecutive recomputed layers that share one kept input (ChunkOptions::recompute_group).
  int recompute_group_size() const;
};

// What a pipeline schedule asks of each of a rank's chunks: micro-batches in flight (their
// activation slots), deferred weight gradients and unfinished micro-batches (zero-bubble).
// Over several schedules (a batch-size ramp-up), the largest of each.
struct ScheduleNeeds {
  std::vector<int> slots, deferred, unfinished;  // per chunk
};
ScheduleNeeds schedule_needs(const std::vector<pipeline_parallel::ScheduleConfig>& schedules,
                             int stage);

// How chunk `chunk` of pipeline rank `stage` is built for training.
ChunkOptions chunk_options(const RankLayout& layout, int stage, int chunk,
                           const ScheduleNeeds& needs);

// Floats of a chunk's two Adam moments: its whole buffer, or its 1/d shard under the
// distributed optimizer (the buffer is padded to a multiple of 16 d).
long adam_moment_floats(const RankLayout& layout, long parameter_floats);

// Expert parallelism: the expert-data-parallel size t x d / (ETP x EP), and the floats of
// the two Adam moments of a chunk's expert buffer (its 1/EDP shard under the distributed
// optimizer, which shards it over the expert-data group; ZeRO-2/3 shard its gradients and
// weights over that group too: engine/rank_memory.cpp).
int expert_data_size(const RankLayout& layout);
long expert_moment_floats(const RankLayout& layout, long expert_floats);

// Floats a gradient bucket gathers before it is reduced: --ddp-bucket-size, or Megatron's
// default max(40M, 1M x d); with sharded gradients max(10M, 1M x d), as every bucket outside
// the shard is memory held only until its reduction.
long gradient_bucket_floats(const RankLayout& layout);

// Sharded weights in fp32 (ZeRO-3), unless a pipeline splits a tied word embedding's two uses
// (whose gradients are summed across the stages whole): the chunk's vocabulary tensors run
// in blocks of whole rows, one gradient bucket each (data_parallel/buckets.h). Tensors are
// indices into the chunk's layout: the word embedding first, an untied output layer last.
data_parallel::VocabularyBlocks vocabulary_blocks(const RankLayout& layout,
                                                  const ChunkPlacement& placement, int tensors);
// The rows of its blocks (ChunkOptions::vocabulary_block_rows); 0: off.
int vocabulary_block_rows(const RankLayout& layout, const ChunkPlacement& placement);

// Floats of a chunk's gradients held at once: `resident` of its buffer (all of it, or with
// sharded gradients reduced while backward runs, this rank's 1/d shard plus the buckets
// being filled and reduced; without overlap every bucket fills before any is reduced) and
// `in_flight` in reductions (MPI's temporaries: every bucket, launched together at the
// step; with sharded gradients the largest run of buckets that may be in flight).
struct HeldGradientFloats {
  long resident = 0, in_flight = 0;
};
HeldGradientFloats held_gradient_floats(const RankLayout& layout, const ChunkPlacement& placement,
                                        const LayoutSizes& sizes, long parameter_floats,
                                        bool overlap_grad_reduce);

// Sharded weights (ZeRO-3): floats of a chunk's weight buffer held at once (this rank's 1/d
// shard plus the units gathered around it) and of its 16-bit copy (the shard and the
// gathered units, whole; in floats: half their elements). Else the whole buffer and its copy.
struct HeldWeightFloats {
  long weights = 0, low_precision_copy = 0;
};
HeldWeightFloats held_weight_floats(const RankLayout& layout, const ChunkPlacement& placement,
                                    const LayoutSizes& sizes, long parameter_floats);

// Sharded weights (ZeRO-3): the units a chunk's pass holds at once, the running ones (a
// recomputed group's, in backward) and as many next ones (prefetched).
int held_unit_window(const RankLayout& layout, const ChunkPlacement& placement);

// The shape of rank `stage`'s buffers besides its chunks (engine/rank_buffers.h).
// microbatches: the largest m of the run; gradient_floats: all its chunks' buffers.
RankBufferShape rank_buffer_shape(const RankLayout& layout, int stage, int microbatches,
                                  long gradient_floats, bool overlap_grad_reduce);

}  // namespace trident::engine
