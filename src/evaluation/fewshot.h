#pragma once
// Few-shot examples as the harness samples them: one random.Random(seed) per task, advanced
// document after document in file order; each document takes random.sample(pool, k), or
// k + 1 with the document itself dropped (then the first k kept) where the task draws extra.
// Repeatable from the seed; a document is never its own example.
#include <cstdint>
#include <vector>

#include "evaluation/task.h"

namespace trident::evaluation {

// For each of the first `count` documents, the pool indices of its k examples, in order.
// Throws FormatError when the pool is too small.
std::vector<std::vector<long>> sample_fewshot(const TaskSpec& task,
                                              const std::vector<PromptDoc>& docs, size_t count,
                                              const std::vector<PromptDoc>& pool, int k,
                                              std::uint64_t seed);

}  // namespace trident::evaluation
