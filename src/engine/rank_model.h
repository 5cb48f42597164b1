#pragma once
// What one rank holds of the model: its pipeline chunks (virtual stages j * p + s), one
// AdamW and one data-parallel reducer per chunk (and per chunk's expert buffer under expert
// parallelism), the loss scaler, and the schedule that runs them. Training builds it here;
// generation, serving, evaluation and convert can too, from a RankLayout, without reaching into
// train/.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/startup_clock.h"
#include "data_parallel/grad_reducer.h"
#include "data_parallel/param_gatherer.h"
#include "data_parallel/sharded_embedding.h"
#include "engine/rank_buffers.h"
#include "engine/rank_layout.h"
#include "model/gpt_model.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "pipeline_parallel/schedules.h"

namespace trident::engine {

struct RankModel {
  pipeline_parallel::ScheduleConfig schedule;
  std::vector<std::unique_ptr<GPTModel>> chunks;
  std::vector<std::unique_ptr<data_parallel::GradientReducer>> reducers;
  std::vector<std::unique_ptr<optim::AdamW>> optimizers;
  // Sharded weights (ZeRO-3): one per chunk, wired to its pass hooks, then one per chunk whose
  // experts are apart (expert parallelism), in chunk order, over its expert buffer and the
  // expert-data group (expert_gatherer below); empty otherwise.
  std::vector<std::unique_ptr<data_parallel::ParameterGatherer>> gatherers;
  // ZeRO-3's row-by-row input word embeddings (rank_layout.h vocabulary_blocks), any chunk's.
  std::vector<std::unique_ptr<data_parallel::ShardedEmbedding>> sharded_embeddings;
  // Expert parallelism (EP > 1): each chunk's expert buffer (GPTModel::expert_parameters)
  // has its own reducer, over the expert-data-parallel group (the sum over it equals
  // Megatron's: every rank's gradients already carry the 1/(global batch tokens) factor, so
  // the sum over d/EP ranks is the sum over d divided as the dense buffer's is), and its own
  // AdamW over the reducer's shard. Null for a chunk whose experts are inline (EP = 1) or that
  // has no MoE layer. The sharding strategy shards the expert buffer over the expert-data
  // group as it shards the dense one over the data-parallel group: under ZeRO-2/3 the reducer
  // reduce-scatters each bucket of expert gradients as the MoE layers' backwards complete it
  // and keeps only its shard (engine/grad_sync_hooks.h), and under ZeRO-3 each MoE layer's
  // experts are all-gathered before its forward and its backward (expert_gatherer).
  std::vector<std::unique_ptr<data_parallel::GradientReducer>> expert_reducers;
  std::vector<std::unique_ptr<optim::AdamW>> expert_optimizers;
  optim::LossScaler scaler = optim::LossScaler::none();
  MemoryPlan buffers;  // besides the chunks' plans (engine/rank_buffers.h)

  std::vector<GPTModel*> chunk_pointers() const;
  std::vector<const Parameters*> parameters() const;
  long planned_bytes() const;
  void zero_grads();
  // Completes overlapped parameter all-gathers (before anything outside forward reads values).
  void finish_param_gather();
  // Sharded weights: every chunk's whole buffer for a reader outside the passes (a sample,
  // an HF export), and back to the shards. Nothing to do otherwise.
  void gather_all_values();
  void release_gathered_values();
};

// ZeRO-3 with expert parallelism: chunk j's expert gatherer (in m.gatherers, after the
// chunks' own), or null where its experts are not sharded.
data_parallel::ParameterGatherer* expert_gatherer(const RankModel& m, size_t j);

// The expert buffer's specs (chunk.expert_parameters()) of the MoE layers whose dense specs
// lie in [begin, end): one contiguous range, {0, 0} for none. GPTModel's hooks name dense
// specs, layer by layer; the expert buffer's reducer and gatherer follow them to the experts.
using ExpertSpan = std::function<std::pair<int, int>(int begin, int end)>;
ExpertSpan expert_span(const GPTModel& chunk);

// What a trainable rank model is built from, besides its layout.
struct RankModelOptions {
  RankLayout layout;
  pipeline_parallel::ScheduleConfig schedule;  // at the run's final global batch
  // The schedule at every global batch the run uses (ramp-up included): activation slots
  // are sized for the most any of them keeps in flight.
  std::vector<pipeline_parallel::ScheduleConfig> schedules;
  data_parallel::ReducerOptions reduce;  // bucket_floats <= 0: Megatron's default for d
  optim::AdamWConfig adam;
  optim::LossScaler scaler = optim::LossScaler::none();
  std::uint64_t seed = 1234;  // initialisation, unless load_hf
  std::string load_hf;        // a HuggingFace directory to import the weights from
  bool async_save = false;    // checkpoints saved in the background: their snapshot is planned
};

// Builds this rank's chunks (activation slots sized by the schedules), then initialises
// them from the seed or loads load_hf.
// clock (optional): the phases (allocation, initialisation) are timed, with progress lines.
// expert, expert_data: the expert group (layout.expert_parallel ranks) and the
// expert-data-parallel group (d / EP ranks); null at EP = 1. dp: the ranks holding the same
// weights (d x c under context parallelism); context: the cp group (layout.context ranks;
// may be null at c = 1), whose chunks are planned for seq / c tokens per sample.
RankModel build_rank_model(const RankModelOptions& o, comm::Communicator& tp,
                           comm::Communicator& pp, comm::Communicator& dp,
                           StartupClock* clock = nullptr, comm::Communicator* expert = nullptr,
                           comm::Communicator* expert_data = nullptr,
                           comm::Communicator* context = nullptr);

// This rank's pipeline stage for generation: one chunk with weights only (no gradients,
// optimizer or training activations), filled from load_hf when given; a checkpoint is
// loaded into it by the caller (checkpoint::load, weights only). decode_panels: see
// ChunkOptions.
RankModel build_inference_rank_model(const RankLayout& layout, const std::string& load_hf,
                                     comm::Communicator& tp, comm::Communicator& pp,
                                     bool decode_panels);

// The one-process model (values), with LoRA adapters merged into their base weights,
// complete on pipeline rank 0 of every tensor group... and
// meaningful on world rank 0: experts are all-gathered over the expert group (expert
// parallelism; `expert` may be null at EP = 1), tensor shards are gathered, then pipeline
// stages send their tensors to stage 0.
Parameters gather_rank_model(const RankModel& m, const RankLayout& layout, comm::Communicator& tp,
                             comm::Communicator& pp, comm::Communicator* expert = nullptr);

// A chunk's parameters with every expert inline (its layout as at EP = 1): the dense buffer,
// its experts all-gathered over the expert group when they are apart. Collective over
// `expert` then.
Parameters chunk_with_all_experts(const GPTModel& chunk, const ModelConfig& config,
                                  TensorParallelRank tp, comm::Communicator* expert);

}  // namespace trident::engine
