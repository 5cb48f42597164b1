#pragma once
// Reassembles the one-process model from tensor-parallel shards (for export and for
// comparing runs): every rank all-gathers its slices and places them by global index.
#include "comm/communicator.h"
#include "config/model_config.h"
#include "parameters/parameters.h"

namespace trident {

// A one-rank copy of the model's values (or gradients), on every rank; of its LoRA adapters
// when `params` holds them (ParameterLayout::holds_lora_adapters).
// `placement` is the pipeline chunk the parameters belong to (the whole model by default).
Parameters gather_to_single_rank(const Parameters& params, const ModelConfig& config,
                                 comm::Communicator& tp, bool gradients = false,
                                 ChunkPlacement placement = {});

// Largest |difference| between this rank's replicated parameters (LayerNorms, row-parallel
// biases, position embeddings) and tensor-parallel rank 0's; 0 when they are identical.
double replicated_parameter_drift(const Parameters& params, comm::Communicator& tp);

}  // namespace trident
