#pragma once
// Low-rank adapters (LoRA, Hu et al. 2021) on the transformer layers' linears, with
// Megatron-Bridge's flag names: each targeted linear W gains y += (alpha / R) (x A^T) B^T,
// A [R, in] drawn like the model's other weights (normal(0, --init-method-std)), B [out, R]
// zero, so training starts at the base model. The base weights are frozen.
#include <string>
#include <vector>

namespace trident {

struct LoraConfig {
  int rank = 0;         // --lora-rank R; 0: no adapters
  float alpha = 32.f;   // --lora-alpha (Megatron-Bridge's default); the branch is scaled alpha / R
  float dropout = 0.f;  // --lora-dropout on the branch's input
  // --lora-target-modules: linear_qkv, linear_proj, linear_fc1, linear_fc2 (the default: all)
  std::vector<std::string> target_modules = {"linear_qkv", "linear_proj", "linear_fc1",
                                             "linear_fc2"};
  // The frozen base the adapters go with, as checkpoints record it: the absolute path of the
  // --load-hf directory, or empty for a base drawn from --seed.
  std::string base_hf;

  bool enabled() const { return rank > 0; }
  float scale() const { return alpha / (float)rank; }
  bool targets(const std::string& module) const {
    if (!enabled()) return false;
    for (const std::string& m : target_modules)
      if (m == module) return true;
    return false;
  }
};

// The modules --lora-target-modules may name.
inline const std::vector<std::string>& lora_modules() {
  static const std::vector<std::string> modules = {"linear_qkv", "linear_proj", "linear_fc1",
                                                   "linear_fc2"};
  return modules;
}

}  // namespace trident
