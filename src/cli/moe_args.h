#pragma once
// `trident train`'s mixture-of-experts flags (Megatron's spellings and defaults, except the
// dispatcher: alltoall, the only one trident implements). The shape goes into
// c.model.moe, the layout and the router's loss options into c itself.
#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "train/training_config.h"

namespace trident::cli {

// The MoE flags; `given` tells which the command line (or the config file) set.
struct MoeFlags {
  std::map<std::string, CLI::Option*> given;
};
MoeFlags add_moe_flags(CLI::App& app, train::TrainingConfig& c);

// With --load-hf: the MoE shape of `hf` (the directory's config.json, io/hf_moe.h) into
// c.model.moe; a flag that contradicts it (--num-experts, --moe-router-topk,
// --moe-ffn-hidden-size, --moe-layer-freq, --moe-router-pre-softmax) is refused naming the
// flag and the field. router_aux_loss_coef is the default --moe-aux-loss-coeff; Mixtral's
// router_jitter_noise > 0 is refused (HF applies it in training, trident does not).
void apply_hf_moe_config(const MoeFlags& flags, const ModelConfig& hf, train::TrainingConfig& c,
                         std::vector<std::string>& errors);

// After the model's shape is final (preset, --load-hf): --moe-layer-freq resolved into
// c.model.moe.layer_pattern (unless --load-hf set it), and every MoE flag given without
// --num-experts refused by name (Megatron ignores them; a run meant to be MoE would train a dense
// model).
void apply_moe_flags(const MoeFlags& flags, train::TrainingConfig& c,
                     std::vector<std::string>& errors);

// The shape flags alone, into a ModelConfig (`trident plan`'s model), and their resolution
// as apply_moe_flags's: the pattern from layer_freq unless pattern_from_hf, and a shape flag
// without --num-experts refused by name.
MoeFlags add_moe_shape_flags(CLI::App& app, MoeConfig& m, std::string& layer_freq);
void apply_moe_shape_flags(const MoeFlags& flags, ModelConfig& m, const std::string& layer_freq,
                           bool pattern_from_hf, std::vector<std::string>& errors);

}  // namespace trident::cli
