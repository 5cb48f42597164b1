#include "cli/checkpoint_weights.h"

#include <algorithm>
#include <cstdint>
#include <ostream>

#include "checkpoint/checkpoint.h"
#include "io/hf_gpt2.h"

namespace trident::cli {

Parameters load_checkpoint_weights(const std::string& load, ModelConfig* config,
                                   std::ostream& log) {
  // One rank, the whole model: only the parameters matter (a short sequence, one sample).
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
  o.layout.model.seq_length = std::min(o.layout.model.max_positions(), 64);
  o.layout.split = {o.layout.model.num_layers};
  o.schedules = {o.schedule};
  distributed::ProcessGrid grid(1, 1, 1);
  distributed::ProcessGroups groups = distributed::make_single_rank_groups();
  engine::RankContext rank{0, &grid, &groups, {"local"}};
  engine::RankModel model =
      engine::build_rank_model(o, *groups.tensor, *groups.pipeline, *groups.data);
  const checkpoint::RunRecord run{o.layout, o.seed, {}, 1};
  checkpoint::load(load, run, model, rank, log, checkpoint::LoadMode::kWeightsOnly);
  *config = o.layout.model;
  return engine::gather_rank_model(model, o.layout, *groups.tensor, *groups.pipeline);
}

Parameters load_hf_directory_weights(const std::string& load_hf, ModelConfig* config) {
  engine::RankModelOptions o;
  o.layout.model = io::read_hf_config(load_hf);
  o.layout.model.seq_length = std::min(o.layout.model.max_positions(), 64);
  o.layout.split = {o.layout.model.num_layers};
  o.schedules = {o.schedule};
  o.load_hf = load_hf;
  distributed::ProcessGrid grid(1, 1, 1);
  distributed::ProcessGroups groups = distributed::make_single_rank_groups();
  engine::RankModel model =
      engine::build_rank_model(o, *groups.tensor, *groups.pipeline, *groups.data);
  *config = o.layout.model;
  return engine::gather_rank_model(model, o.layout, *groups.tensor, *groups.pipeline);
}

}  // namespace trident::cli
