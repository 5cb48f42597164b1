#pragma once
// What each data-parallel sharding strategy costs a rank per iteration, beside the memory
// plan training prints (engine::planned_rank_memory, which also sizes ZeRO-3's sharded
// weights): the bytes its data-parallel collectives move and their time on the ring model,
// less what overlaps with compute.
//
// Per iteration, with Psi this rank's parameters (its chunks' floats), m micro-batches per
// replica and every collective on fp32 (trident's wire format):
//   no_shard            one all-reduce of the gradients after the last backward: 2 Psi
//   optim (ZeRO-1)      one reduce-scatter + one all-gather of the updated values: 2 Psi
//   optim_grads (ZeRO-2) a reduce-scatter after every micro-batch's backward + one
//                       all-gather: (m + 1) Psi, less (m - 1) H (below)
//   optim_grads_params (ZeRO-3) per micro-batch every unit's weights all-gathered before it
//                       runs in forward and again in backward, the gradients
//                       reduce-scattered: 3 m Psi, less m times the embedding (or a tied
//                       copy of it), which backward does not gather (below), and (m - 1) H
// each times (d - 1) / d on a ring (Rajbhandari et al. 2020, section 7: ZeRO-3 moves 1.5x the
// data of plain data parallelism at m = 1; trident a little less, the embedding's share).
// H: with a tied output layer on a pipeline, the end stages' gradient bucket holding the word
// embedding waits for the two stages' sum after the last backward, so it is reduce-scattered
// once per iteration, not per micro-batch (engine/rank_model.cpp, holds_tied_copy).
#include <utility>
#include <vector>

#include "data_parallel/buckets.h"
#include "data_parallel/sharding_strategy.h"
#include "model/chunk_memory.h"
#include "planner/cluster.h"

namespace trident::planner {

// ZeRO-3's all-gathers of one micro-batch, in floats, as training's passes ask for the units
// (GPTModel::forward_chunk and backward, data_parallel/param_gatherer.h): forward gathers
// every unit once (a tied word embedding is kept from the embedding to the output layer);
// backward every unit but the embedding (its backward reads no weights) and a last stage's
// copy of a tied word embedding (the output layer's gradients are formed in forward).
struct UnitGathers {
  double forward = 0, backward = 0;
  // Of those, what each pass waits for: its first unit (prefetch starts only inside a pass).
  double forward_waited = 0, backward_waited = 0;
  // Gradient floats reduce-scattered per micro-batch beyond the chunk's parameters: the
  // output layer's blocks once per chunk of logits rows, the input embedding's never (its
  // rows go straight to their owners' shards). 0 where the vocabulary is a unit.
  double extra_scattered = 0;
  UnitGathers& operator+=(const UnitGathers& o);
};

// ZeRO-3's vocabulary, where it is not a unit (engine::vocabulary_blocks): the output layer
// gathers each block for each chunk of logits rows twice (logits, then d(input) in reverse:
// the block at each turn is still there); the input embedding gathers nothing and swaps
// d x tokens x hidden floats each way instead (data_parallel/sharded_embedding.h).
struct VocabularyTraffic {
  data_parallel::VocabularyBlocks blocks;
  int logits_chunks = 1;
  double swapped_floats = 0;
};

// One chunk's gathers, from its units (LayoutSizes::units) and place in the pipeline. Sizes
// without units (chunks past kLayersSizedWhole layers): every parameter once each way.
UnitGathers chunk_unit_gathers(const LayoutSizes& sizes, const ChunkPlacement& placement,
                               bool tied_output, const VocabularyTraffic& vocabulary = {});

// The work the data-parallel collectives of one iteration can hide under, on one rank.
struct DataParallelWork {
  int data = 1;
  int microbatches = 1;
  double parameter_floats = 0;       // Psi: this rank's chunks
  double bucket_floats = 0;          // a gradient bucket (the last one cannot overlap)
  double held_back_floats = 0;       // H: of Psi, reduced once after the last backward
  UnitGathers gathers;               // ZeRO-3: all the rank's chunks, one micro-batch
  double forward = 0, backward = 0;  // seconds of one micro-batch through this rank's chunks
};

struct DataParallelTraffic {
  double bytes = 0;    // sent by each rank per iteration
  double seconds = 0;  // every collective, on the ring model
  double exposed = 0;  // of those seconds, what no compute hides
};

DataParallelTraffic data_parallel_traffic(data_parallel::ShardingStrategy strategy,
                                          const DataParallelWork& work, const LinkSpec& link);

}  // namespace trident::planner
