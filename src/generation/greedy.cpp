#include "generation/greedy.h"

#include <algorithm>

namespace trident {

void greedy_generate(GPTModel& model, std::vector<int>& tokens, int count) {
  const int window = model.max_seq();
  std::vector<int> input;
  for (int i = 0; i < count; ++i) {
    int len = std::min<int>((int)tokens.size(), window);
    input.assign(tokens.end() - len, tokens.end());
    input.push_back(0);  // a target is required; its loss is ignored
    model.forward(input.data(), 1, len);
    const float* logits = model.logits_row(len - 1);
    int vocab = model.config().vocab_size;
    tokens.push_back((int)(std::max_element(logits, logits + vocab) - logits));
  }
}

}  // namespace trident
