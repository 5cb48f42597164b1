#pragma once
// Megatron's OptimizerParamScheduler for the learning rate, counted in samples as Megatron
// counts it (each update advances it by that iteration's global batch): linear warm-up
// from 0 over warmup_steps, then constant / linear / cosine decay to min_lr at
// decay_steps. Iteration-based flags become samples through the global batch size.
#include <string>

namespace trident::optim {

enum class DecayStyle { kConstant, kLinear, kCosine };

DecayStyle parse_decay_style(const std::string& s);  // throws on an unknown name

struct LrSchedule {
  float max_lr = 0.f;
  float min_lr = 0.f;
  double warmup_steps = 0;  // a fraction of decay_steps need not be whole (--lr-warmup-fraction)
  long decay_steps = 0;
  DecayStyle style = DecayStyle::kCosine;

  // Learning rate after `steps_done` steps (the rate used by the next update).
  float at(long steps_done) const;
};

}  // namespace trident::optim
