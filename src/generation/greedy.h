#pragma once
// Greedy decoding by re-running the forward pass over a sliding window (no KV cache yet).
#include <vector>

#include "model/gpt_model.h"

namespace trident {

// Appends `count` argmax tokens to `tokens`; the model sees at most its planned sequence.
void greedy_generate(GPTModel& model, std::vector<int>& tokens, int count);

}  // namespace trident
