#pragma once
// Megatron's OptimizerParamScheduler for the learning rate: linear warm-up from 0 over
// lr_warmup_iters, then constant / linear / cosine decay to min_lr at lr_decay_iters.
#include <string>

namespace trident {

enum class DecayStyle { kConstant, kLinear, kCosine };

DecayStyle parse_decay_style(const std::string& s);  // throws on an unknown name

struct LrSchedule {
  float max_lr = 0.f;
  float min_lr = 0.f;
  long warmup_iters = 0;
  long decay_iters = 0;
  DecayStyle style = DecayStyle::kCosine;

  // Learning rate after `steps_done` optimizer steps (the rate used by step steps_done+1).
  float at(long steps_done) const;
};

}  // namespace trident
