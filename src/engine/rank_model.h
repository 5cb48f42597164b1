#pragma once
// What one rank holds of the model: its pipeline chunks (virtual stages j * p + s), one
// AdamW and one data-parallel reducer per chunk, the loss scaler, and the schedule that
// runs them. Training builds it here; generation, serving and evaluation can too, without
// reaching into train/.
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "train/training_config.h"
#include "core/startup_clock.h"
#include "data_parallel/grad_reducer.h"
#include "engine/rank_buffers.h"
#include "model/gpt_model.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "pipeline_parallel/schedules.h"

namespace trident {

struct RankModel {
  pipeline_parallel::ScheduleConfig schedule;
  std::vector<std::unique_ptr<GPTModel>> chunks;
  std::vector<std::unique_ptr<data_parallel::GradientReducer>> reducers;
  std::vector<std::unique_ptr<AdamW>> optimizers;
  LossScaler scaler = LossScaler::none();
  MemoryPlan buffers;  // besides the chunks' plans (engine/rank_buffers.h)

  std::vector<GPTModel*> chunk_pointers() const;
  std::vector<const Parameters*> parameters() const;
  long planned_bytes() const;
  void zero_grads();
  // Completes overlapped parameter all-gathers (before anything outside forward reads values).
  void finish_param_gather();
};

// Builds this rank's chunks (activation slots sized by the schedule), then initialises them
// from the seed or loads --load-hf.
// clock (optional): the phases (allocation, initialisation) are timed, with progress lines.
RankModel build_rank_model(const TrainingConfig& c, comm::Communicator& tp, comm::Communicator& pp,
                           comm::Communicator& dp, StartupClock* clock = nullptr);

// This rank's pipeline stage for generation: one chunk with weights only (no gradients,
// optimizer or training activations), filled from c.load_hf when given; a checkpoint is
// loaded into it by the caller (checkpoint::load, weights only). decode_panels: see
// ChunkOptions.
RankModel build_inference_rank_model(const TrainingConfig& c, comm::Communicator& tp,
                                     comm::Communicator& pp, bool decode_panels);

// The one-process model (values), complete on pipeline rank 0 of every tensor group... and
// meaningful on world rank 0: tensor shards are gathered, then pipeline stages send their
// tensors to stage 0.
Parameters gather_rank_model(const RankModel& m, const TrainingConfig& config,
                             comm::Communicator& tp, comm::Communicator& pp);

}  // namespace trident
