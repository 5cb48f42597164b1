#pragma once
// `trident train`'s LoRA flags (Megatron-Bridge's names, config/lora_config.h), into
// c.model.lora. Their rules against the rest of the run are train/lora_rules.h's.
#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "config/lora_config.h"

namespace trident::cli {

struct LoraFlags {
  std::map<std::string, CLI::Option*> given;
  bool was_given(const std::string& flag) const {
    const auto it = given.find(flag);
    return it != given.end() && it->second->count() > 0;
  }
};
LoraFlags add_lora_flags(CLI::App& app, LoraConfig& lora);

// The flags' own rules, each naming its flag: --lora-rank > 0 when given, the other flags
// only with it, alpha > 0, 0 <= dropout < 1, and only the modules lora_modules() names.
void check_lora_flags(const LoraFlags& flags, const LoraConfig& lora,
                      std::vector<std::string>& errors);

}  // namespace trident::cli
