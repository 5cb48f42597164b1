#pragma once
// The rules that tie LoRA (config/lora_config.h) to the rest of a training run: what is
// built with it (t, p, d, the distributed optimizer, sequence parallelism, recomputation,
// fp32 or bf16) and what is refused by name for now (MoE, fp16, ZeRO-2 / 3, zb-h1).
#include <string>
#include <vector>

namespace trident::train {

struct TrainingConfig;

// Appends one message per broken rule, each naming its flag(s).
void check_lora(const TrainingConfig& c, std::vector<std::string>& errors);

}  // namespace trident::train
