#pragma once
// One optimizer step of a rank after its forward and backward passes (Megatron's
// finalize_model_grads followed by optimizer.step): the tied word embedding summed across
// the first and last pipeline stage, the data-parallel reduction finished (and the expert
// buffers' over the expert-data group), the global gradient norm over t, p and d (each
// expert counted once), the loss scaler's verdict, AdamW with clipping on this
// rank's range, and the distributed optimizer's parameter all-gather started. Training,
// and anything else that updates a model (fine-tuning, evaluation harnesses that adapt),
// calls this instead of reaching into the trainer.
#include <functional>
#include <string>

#include "distributed/process_groups.h"
#include "engine/rank_model.h"

namespace trident::engine {

struct StepOptions {
  float lr = 0.f;
  float loss_scale = 1.f;  // the gradients hold loss_scale x the true gradients
  float clip_grad = 0.f;   // 0: no clipping
  bool distributed_optimizer = false;
  bool inject_overflow = false;  // testing: one gradient becomes inf before the norm
  // The timeline's clock and recorder (optional): the waits for the data-parallel
  // reduction are recorded as they happen.
  std::function<double()> now_us;
  std::function<void(const std::string& name, const std::string& category, double start_us,
                     double end_us)>
      record;
};

struct StepOutcome {
  double grad_norm = 0;  // of the true (unscaled) gradients
  bool skipped = false;  // fp16 overflow: nothing was updated
};

StepOutcome finalize_and_step(RankModel& model, distributed::ProcessGroups& groups,
                              const StepOptions& options);

}  // namespace trident::engine
