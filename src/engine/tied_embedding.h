#pragma once
// The tied word embedding lives twice when p > 1: as the first stage's input embedding and
// as the last stage's output layer. Megatron's finalize_model_grads sums the two gradients
// before the step, so both copies update identically.
#include <vector>

#include "comm/communicator.h"
#include "model/gpt_model.h"

namespace trident::engine {

// Sums the tied word-embedding gradient of the first stage (chunk 0 of pipeline rank 0) and
// of the last stage's copy (last chunk of rank p - 1). Nothing to do for p = 1 or an untied
// output layer.
void sync_tied_embedding(std::vector<GPTModel*>& chunks, comm::Communicator& pipeline);

}  // namespace trident::engine
