#include "cli/lora_args.h"

#include <cmath>

namespace trident::cli {

namespace {
constexpr const char* kLoraGroup = "LoRA (fine-tuning a frozen base; Megatron-Bridge's names)";
}  // namespace

LoraFlags add_lora_flags(CLI::App& app, LoraConfig& lora) {
  LoraFlags f;
  auto add = [&](const char* flag, auto& field, const char* help) {
    f.given[flag] = app.add_option(flag, field, help)
                        ->capture_default_str()
                        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                        ->group(kLoraGroup);
  };
  add("--lora-rank", lora.rank,
      "R: adapters of rank R on the targeted linears, the base frozen (0: no LoRA)");
  add("--lora-alpha", lora.alpha, "the adapters' output is scaled by alpha / R (as PEFT)");
  add("--lora-dropout", lora.dropout,
      "dropout on the adapters' input (PEFT's lora_dropout; training only)");
  f.given["--lora-target-modules"] =
      app.add_option("--lora-target-modules", lora.target_modules,
                     "linears given adapters: linear_qkv, linear_proj, linear_fc1, linear_fc2 "
                     "(comma- or space-separated)")
          ->delimiter(',')
          ->capture_default_str()
          ->group(kLoraGroup);
  return f;
}

void check_lora_flags(const LoraFlags& flags, const LoraConfig& lora,
                      std::vector<std::string>& errors) {
  if (flags.was_given("--lora-rank") && lora.rank <= 0)
    errors.push_back("--lora-rank must be > 0 (got " + std::to_string(lora.rank) + ")");
  if (!flags.was_given("--lora-rank"))
    for (const char* flag : {"--lora-alpha", "--lora-dropout", "--lora-target-modules"})
      if (flags.was_given(flag)) errors.push_back(std::string(flag) + " needs --lora-rank");
  if (!(lora.alpha > 0.f) || !std::isfinite(lora.alpha))
    errors.push_back("--lora-alpha must be > 0 and finite");
  if (!(lora.dropout >= 0.f && lora.dropout < 1.f))
    errors.push_back("--lora-dropout must be in [0, 1)");
  if (lora.target_modules.empty())
    errors.push_back("--lora-target-modules: name at least one linear");
  for (const std::string& m : lora.target_modules) {
    bool known = false;
    for (const std::string& k : lora_modules()) known = known || k == m;
    if (!known)
      errors.push_back("--lora-target-modules: unknown module '" + m +
                       "' (linear_qkv, linear_proj, linear_fc1, linear_fc2)");
  }
}

}  // namespace trident::cli
