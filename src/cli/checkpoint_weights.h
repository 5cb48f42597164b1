#pragma once
// A checkpoint's (or an HF directory's) weights as the one-process model holds them, for the
// commands that run or write the whole model on one rank (convert, score).
#include <iosfwd>
#include <string>

#include "config/model_config.h"
#include "parameters/parameters.h"

namespace trident::cli {

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
