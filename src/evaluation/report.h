#pragma once
// Results as lm-evaluation-harness prints and saves them: the markdown table (Tasks, Version,
// Filter, n-shot, Metric, higher-is-better arrow, Value, ±, Stderr; metrics sorted by name)
// and the JSON layout {"results": {task: {"alias", "metric,none", "metric_stderr,none"}},
// "versions", "n-shot", "higher_is_better", "n-samples", "config"}.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evaluation/evaluator.h"

namespace trident::evaluation {

nlohmann::ordered_json results_json(const std::vector<TaskOutcome>& outcomes,
                                    const nlohmann::ordered_json& config);
std::string results_table(const std::vector<TaskOutcome>& outcomes);

}  // namespace trident::evaluation
