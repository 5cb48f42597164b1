#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trident::optim {

DecayStyle parse_decay_style(const std::string& s) {
  if (s == "constant") return DecayStyle::kConstant;
  if (s == "linear") return DecayStyle::kLinear;
  if (s == "cosine") return DecayStyle::kCosine;
  if (s == "inverse-square-root") return DecayStyle::kInverseSquareRoot;
  if (s == "WSD") return DecayStyle::kWsd;  // Megatron's spelling, upper case
  throw std::invalid_argument(
      "--lr-decay-style must be constant, linear, cosine, inverse-square-root or WSD (got '" + s +
      "')");
}

WsdDecayStyle parse_wsd_decay_style(const std::string& s) {
  if (s == "linear") return WsdDecayStyle::kLinear;
  if (s == "cosine") return WsdDecayStyle::kCosine;
  if (s == "exponential") return WsdDecayStyle::kExponential;
  if (s == "minus_sqrt") return WsdDecayStyle::kMinusSqrt;
  throw std::invalid_argument(
      "--lr-wsd-decay-style must be linear, cosine, exponential or minus_sqrt (got '" + s + "')");
}

namespace {

// The WSD coefficient at step n (n <= decay_steps): 1 on the plateau, then the annealing
// curve over the last wsd_decay_steps, from 1 at its start to 0 at decay_steps.
double wsd_coefficient(const LrSchedule& s, long n) {
  const long anneal_start = s.decay_steps - s.wsd_decay_steps;
  if (n <= anneal_start) return 1.0;
  const double r = (double)(n - anneal_start) / (double)s.wsd_decay_steps;
  switch (s.wsd_style) {
    case WsdDecayStyle::kLinear:
      return 1.0 - r;
    case WsdDecayStyle::kCosine:
      return 0.5 * (std::cos(M_PI * r) + 1.0);
    case WsdDecayStyle::kExponential:
      return 2.0 * std::pow(0.5, r) - 1.0;
    case WsdDecayStyle::kMinusSqrt:
      return 1.0 - std::sqrt(r);
  }
  return 1.0;
}

}  // namespace

float LrSchedule::at(long n) const {
  // In double, as Megatron's Python floats, rounded once at the end.
  if (warmup_steps > 0 && n <= warmup_steps) return (float)(max_lr * ((double)n / warmup_steps));
  if (style == DecayStyle::kConstant) return max_lr;
  if (n > decay_steps) return min_lr;
  if (style == DecayStyle::kInverseSquareRoot) {
    // max_lr x sqrt(warm-up / n), both at least 1, never below the floor.
    const double lr =
        max_lr * std::sqrt(std::max(warmup_steps, 1.0)) / std::sqrt((double)std::max(n, 1L));
    return (float)std::max((double)min_lr, lr);
  }
  double coeff;
  if (style == DecayStyle::kWsd) {
    coeff = wsd_coefficient(*this, n);
  } else {
    double ratio = ((double)n - warmup_steps) / ((double)decay_steps - warmup_steps);
    coeff = style == DecayStyle::kLinear ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  }
  return (float)(min_lr + coeff * ((double)max_lr - min_lr));
}

}  // namespace trident::optim
