#include "optim/loss_scaler.h"

#include <algorithm>

namespace trident::optim {

LossScaler::LossScaler(float initial, float min, long window, int hysteresis, bool dynamic)
    : min_scale_(min), window_(window), hysteresis_(hysteresis), dynamic_(dynamic) {
  state_.scale = initial;
  state_.hysteresis_tracker = hysteresis;
}

bool LossScaler::update(bool found_inf) {
  if (found_inf) ++state_.skipped;
  if (!dynamic_) return found_inf;
  if (found_inf) {
    state_.growth_tracker = 0;
    if (--state_.hysteresis_tracker <= 0) state_.scale = std::max(state_.scale / 2, min_scale_);
    return true;
  }
  if (++state_.growth_tracker == window_) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = hysteresis_;
    state_.scale *= 2;
  }
  return false;
}

}  // namespace trident::optim
