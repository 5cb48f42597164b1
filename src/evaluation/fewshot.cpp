#include "evaluation/fewshot.h"

#include "core/files.h"
#include "evaluation/python_random.h"

namespace trident::evaluation {

std::vector<std::vector<long>> sample_fewshot(const TaskSpec& task,
                                              const std::vector<PromptDoc>& docs, size_t count,
                                              const std::vector<PromptDoc>& pool, int k,
                                              std::uint64_t seed) {
  std::vector<std::vector<long>> shots(count);
  if (k <= 0) return shots;
  const long draw = k + (task.draw_extra ? 1 : 0);
  if ((long)pool.size() < draw)
    throw FormatError(task.name + ": " + std::to_string(k) +
                      " few-shot examples need a few-shot split (" + task.fewshot_split +
                      ") of at least " + std::to_string(draw) + " documents; it has " +
                      std::to_string(pool.size()));
  PythonRandom rnd(seed);
  for (size_t d = 0; d < count; ++d) {
    for (long j : rnd.sample((long)pool.size(), draw)) {
      // The harness compares documents by value (x != doc); so does this.
      if (task.draw_extra && pool[j].raw == docs[d].raw) continue;
      if ((long)shots[d].size() < k) shots[d].push_back(j);
    }
  }
  return shots;
}

}  // namespace trident::evaluation
