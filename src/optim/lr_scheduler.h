#pragma once
// Megatron's OptimizerParamScheduler for the learning rate, counted in samples as Megatron
// counts it (each update advances it by that iteration's global batch): linear warm-up
// from 0 over warmup_steps, then constant / linear / cosine / inverse-square-root / WSD
// decay to min_lr at decay_steps. Iteration-based flags become samples through the global
// batch size.
#include <string>

namespace trident::optim {

enum class DecayStyle { kConstant, kLinear, kCosine, kInverseSquareRoot, kWsd };

// WSD (warmup-stable-decay): the rate stays at max_lr until the last wsd_decay_steps of
// the decay, then anneals to min_lr along one of these (--lr-wsd-decay-style).
enum class WsdDecayStyle { kLinear, kCosine, kExponential, kMinusSqrt };

DecayStyle parse_decay_style(const std::string& s);         // throws on an unknown name
WsdDecayStyle parse_wsd_decay_style(const std::string& s);  // throws on an unknown name

struct LrSchedule {
  float max_lr = 0.f;
  float min_lr = 0.f;
  double warmup_steps = 0;  // a fraction of decay_steps need not be whole (--lr-warmup-fraction)
  long decay_steps = 0;
  DecayStyle style = DecayStyle::kCosine;
  // WSD only: the annealing phase is the last wsd_decay_steps of decay_steps.
  long wsd_decay_steps = 0;
  WsdDecayStyle wsd_style = WsdDecayStyle::kExponential;  // Megatron's default

  // Learning rate after `steps_done` steps (the rate used by the next update).
  float at(long steps_done) const;
};

}  // namespace trident::optim
