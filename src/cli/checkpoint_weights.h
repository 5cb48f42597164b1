#pragma once
// A checkpoint's (or an HF directory's) weights as the one-process model holds them, for the
// commands that run or write the whole model on one rank (convert, score).
#include <iosfwd>
#include <string>

#include "config/model_config.h"
#include "distributed/process_groups.h"
#include "engine/rank_context.h"
#include "engine/rank_model.h"
#include "parameters/parameters.h"

namespace trident::cli {

// The whole model on this one process, with the grid and groups it refers to: built from
// `options` with a short sequence and one sample, as only its parameters matter (convert,
// score). Neither copied nor moved, since the model holds references to the groups.
struct OneProcessModel {
  explicit OneProcessModel(engine::RankModelOptions options);
  OneProcessModel(const OneProcessModel&) = delete;
  OneProcessModel& operator=(const OneProcessModel&) = delete;

  engine::RankContext rank() { return {0, &grid, &groups, {"local"}}; }
  Parameters& parameters() { return model.chunks[0]->parameters(); }
  // The weights in the one-process layout, gathered as the checkpoint export does.
  Parameters gathered() {
    return engine::gather_rank_model(model, options.layout, *groups.tensor, *groups.pipeline);
  }

  engine::RankModelOptions options;
  distributed::ProcessGrid grid{1, 1, 1};
  distributed::ProcessGroups groups;
  engine::RankModel model;
};

// The weights of the latest checkpoint under `load` (any layout it was saved under), in the
// one-process model's layout (a LoRA checkpoint's adapters merged into the base it records);
// *config receives the model it records. Throws CheckpointError
// naming what is wrong with the checkpoint. The load's messages go to log.
Parameters load_checkpoint_weights(const std::string& load, ModelConfig* config, std::ostream& log);

// The same for a HuggingFace model directory (--load-hf): its weights in the one-process
// model's layout; *config receives the model its config.json describes. Throws FormatError
// naming the file and the rule.
Parameters load_hf_directory_weights(const std::string& load_hf, ModelConfig* config);

}  // namespace trident::cli
