#pragma once
// One training iteration (torchtitan's train_step): this replica's share of the global
// batch through the pipeline, forward and backward, then the optimizer step (gradients
// finished across t, p and d, clipped, applied). What the log needs comes back.
#include <vector>

#include "train/training_run.h"

namespace trident::train {

struct StepResult {
  long global_batch = 0;     // samples this iteration took (it grows under batch-size ramp-up)
  double loss_sum = 0;       // over the counted targets of the global batch, all replicas added
  long counted_targets = 0;  // every token, or under --sft those the loss masks keep
  double grad_norm = 0;      // of the true (unscaled) gradients
  // MoE: the step's router losses as they enter the objective (coefficients included,
  // summed over the MoE layers, (1/m) x summed over micro-batches, averaged over d).
  double moe_aux_loss = 0, moe_z_loss = 0;
  // The same per MoE layer, in layer order, with the tokens each expert was sent over the
  // global batch (the experts' load).
  struct MoeLayer {
    int layer = 0;
    double aux = 0, z = 0;
    std::vector<double> tokens_per_expert;
  };
  std::vector<MoeLayer> moe_layers;
  float lr = 0;          // the learning rate the step used
  bool skipped = false;  // fp16 overflow: the weights were not updated
  double seconds = 0;    // wall time of the whole step
};

// Collective over the world. Advances run.progress by the batch (and the LR schedule unless
// the step was skipped) and keeps the step's events for the timers, timeline and bubble.
StepResult train_step(TrainingRun& run, long iteration);

}  // namespace trident::train
