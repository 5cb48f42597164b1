#pragma once
// The log line's numbers: averages over the iterations since the previous line (Megatron's
// --log-interval), skipped fp16 steps kept out of the loss and gradient-norm averages.
#include "train/metrics.h"
#include "train/train_step.h"

namespace trident::train {

class LogInterval {
 public:
  // flops: the model FLOPs of the step (for TFLOP/s and MFU).
  void add(const StepResult& step, int seq_length, double flops);
  // The line after `last` (the interval's latest step) at `iteration`; starts a new interval.
  IterationStats take(const TrainingRun& run, long iteration, const StepResult& last);

 private:
  double loss_ = 0, grad_norm_ = 0, seconds_ = 0, flops_ = 0;
  double moe_aux_loss_ = 0, moe_z_loss_ = 0;
  std::vector<StepResult::MoeLayer> moe_layers_;  // summed over the stepped iterations
  long tokens_ = 0;
  // stepped: iterations that updated the weights; skipped: fp16 overflows, which did not.
  int iterations_ = 0, stepped_ = 0, skipped_ = 0;
};

}  // namespace trident::train
