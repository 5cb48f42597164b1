#pragma once
// fp16 loss scaling as Megatron's DynamicGradScaler: the loss gradient is multiplied by
// `scale` so small activation gradients survive fp16; a step whose gradients overflow
// (inf/NaN) is skipped, and after `hysteresis` such steps the scale halves (not below
// the minimum); after `window` clean steps in a row it doubles. A constant scaler never
// changes (--loss-scale); bf16 and fp32 use scale 1 and never skip.
namespace trident::optim {

struct LossScalerState {
  float scale = 1.f;
  long growth_tracker = 0;  // clean steps since the last change
  int hysteresis_tracker = 0;
  long skipped = 0;  // steps skipped so far
};

class LossScaler {
 public:
  static LossScaler none() { return LossScaler(1.f, 1.f, 1, 1, false); }
  static LossScaler constant(float scale) { return LossScaler(scale, scale, 1, 1, false); }
  static LossScaler dynamic(float initial, float min, long window, int hysteresis) {
    return LossScaler(initial, min, window, hysteresis, true);
  }
  float scale() const { return state_.scale; }
  // Records whether this step's gradients overflowed; returns true when the step must be
  // skipped. Every rank calls it with the same, globally reduced, answer.
  bool update(bool found_inf);
  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& s) { state_ = s; }
  bool is_dynamic() const { return dynamic_; }

 private:
  LossScaler(float initial, float min, long window, int hysteresis, bool dynamic);
  float min_scale_;
  long window_;
  int hysteresis_;
  bool dynamic_;
  LossScalerState state_;
};

}  // namespace trident::optim
