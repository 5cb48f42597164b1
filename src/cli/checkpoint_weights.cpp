#include "cli/checkpoint_weights.h"

#include <algorithm>
#include <cstdint>
#include <ostream>

#include "checkpoint/checkpoint.h"
#include "io/hf_gpt2.h"

namespace trident::cli {

namespace {

engine::RankModelOptions one_process(engine::RankModelOptions o) {
  o.layout.model.seq_length = std::min(o.layout.model.max_positions(), 64);
  o.layout.split = {o.layout.model.num_layers};
  o.schedules = {o.schedule};
  return o;
}

}  // namespace

OneProcessModel::OneProcessModel(engine::RankModelOptions o)
    : options(one_process(std::move(o))),
      groups(distributed::make_single_rank_groups()),
      model(engine::build_rank_model(options, *groups.tensor, *groups.pipeline, *groups.data)) {}

Parameters load_checkpoint_weights(const std::string& load, ModelConfig* config,
                                   std::ostream& log) {
  engine::RankModelOptions o;
  const nlohmann::ordered_json manifest =
      checkpoint::read_manifest(checkpoint::latest_checkpoint(load));
  o.layout.model = checkpoint::manifest_model(manifest);
  // LoRA: the checkpoint holds the adapters; the base comes from where it records.
  if (o.layout.model.lora.enabled()) {
    checkpoint::check_lora_base(manifest["lora_base"], load);  // before its weights are read
    o.load_hf = o.layout.model.lora.base_hf;
    if (o.load_hf.empty()) o.seed = manifest["lora_base"]["seed"].get<std::uint64_t>();
  }
  OneProcessModel one(std::move(o));
  const checkpoint::RunRecord run{one.options.layout, one.options.seed, {}, 1};
  engine::RankContext rank = one.rank();
  checkpoint::load(load, run, one.model, rank, log, checkpoint::LoadMode::kWeightsOnly);
  *config = one.options.layout.model;
  return one.gathered();
}

Parameters load_hf_directory_weights(const std::string& load_hf, ModelConfig* config) {
  engine::RankModelOptions o;
  o.layout.model = io::read_hf_config(load_hf);
  o.load_hf = load_hf;
  OneProcessModel one(std::move(o));
  *config = one.options.layout.model;
  return one.gathered();
}

}  // namespace trident::cli
