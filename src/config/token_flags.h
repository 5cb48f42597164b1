#pragma once
// A sample's token ids may carry one flag: a target the loss does not count (supervised
// fine-tuning counts only the assistant's tokens, `train --sft`). The id is the same as an
// input; only the model's split of a sample into inputs and targets reads the flag.
namespace trident {

inline constexpr int kUncountedTarget = 1 << 30;  // above every vocabulary

inline int token_id(int flagged) {
  return flagged & ~kUncountedTarget;
}
inline bool counted_target(int flagged) {
  return (flagged & kUncountedTarget) == 0;
}

}  // namespace trident
