#pragma once
// The harness's per-document metrics and their aggregation:
//   acc, acc_norm      mean over documents; stderr = sample stddev / sqrt(n)
//   likelihood_diff, pct_stereotype (CrowS-Pairs): means as acc, lower is better
//   perplexity         exp(-mean log-likelihood); stderr by bootstrap (random.choices
//                      resamples, 1000 per random.Random(chunk) seed, as the harness draws)
//   word_perplexity    exp(-sum ll / sum words); byte_perplexity exp(-sum ll / sum bytes);
//   bits_per_byte      -sum ll / sum bytes / ln 2; these three have no stderr ("N/A").
#include <optional>
#include <string>
#include <vector>

#include "evaluation/scorer.h"
#include "evaluation/task.h"

namespace trident::evaluation {

struct MetricValue {
  std::string name;
  double value = 0;
  std::optional<double> stderr_value;  // none: "N/A"
  bool higher_is_better = true;
};

double mean(const std::vector<double>& xs);
double sample_stddev(const std::vector<double>& xs);
double bootstrap_perplexity_stderr(const std::vector<double>& lls, long iters);

// One document's requests' scores -> its metric items, aggregated over the documents.
std::vector<MetricValue> task_metrics(const TaskSpec& task, const std::vector<PromptDoc>& docs,
                                      const std::vector<std::vector<Score>>& scores,
                                      long bootstrap_iters);

}  // namespace trident::evaluation
