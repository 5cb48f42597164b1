#include "optim/lr_scheduler.h"

#include <cmath>
#include <stdexcept>

namespace trident::optim {

DecayStyle parse_decay_style(const std::string& s) {
  if (s == "constant") return DecayStyle::kConstant;
  if (s == "linear") return DecayStyle::kLinear;
  if (s == "cosine") return DecayStyle::kCosine;
  throw std::invalid_argument("--lr-decay-style must be constant, linear or cosine (got '" + s +
                              "')");
}

float LrSchedule::at(long n) const {
  // In double, as Megatron's Python floats, rounded once at the end.
  if (warmup_steps > 0 && n <= warmup_steps) return (float)(max_lr * ((double)n / warmup_steps));
  if (style == DecayStyle::kConstant) return max_lr;
  if (n > decay_steps) return min_lr;
  double ratio = ((double)n - warmup_steps) / ((double)decay_steps - warmup_steps);
  double coeff = style == DecayStyle::kLinear ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return (float)(min_lr + coeff * ((double)max_lr - min_lr));
}

}  // namespace trident::optim
