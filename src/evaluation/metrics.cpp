#include "evaluation/metrics.h"

#include <cmath>
#include <stdexcept>

#include "evaluation/python_random.h"
#include "evaluation/text_ops.h"

namespace trident::evaluation {

double mean(const std::vector<double>& xs) {
  double sum = 0;  // left to right, as Python's sum()
  for (double x : xs) sum += x;
  return sum / (double)xs.size();
}

double sample_stddev(const std::vector<double>& xs) {
  const double mu = mean(xs);
  double sum = 0;
  for (double x : xs) sum += (x - mu) * (x - mu);
  return std::sqrt(sum / (double)(xs.size() - 1));
}

double bootstrap_perplexity_stderr(const std::vector<double>& lls, long iters) {
  const long chunk = std::min<long>(1000, iters), n = (long)lls.size();
  std::vector<double> replicates, draw(n);
  for (long c = 0; c < iters / chunk; ++c) {
    PythonRandom rnd((std::uint64_t)c);
    for (long k = 0; k < chunk; ++k) {
      for (long i = 0; i < n; ++i) draw[i] = lls[rnd.choice_index(n)];
      replicates.push_back(std::exp(-mean(draw)));
    }
  }
  return sample_stddev(replicates);
}

namespace {

int argmax(const std::vector<double>& v) {
  int best = 0;  // the first of equal maxima, as numpy
  for (int i = 1; i < (int)v.size(); ++i)
    if (v[i] > v[best] || (std::isnan(v[i]) && !std::isnan(v[best]))) best = i;
  return best;
}

MetricValue mean_metric(const std::string& name, const std::vector<double>& items) {
  MetricValue m{name, mean(items), std::nullopt, true};
  if (items.size() > 1) m.stderr_value = sample_stddev(items) / std::sqrt((double)items.size());
  return m;
}

// One document's value of a multiple-choice metric from its choices' log-likelihoods.
double choice_item(const std::string& metric, const PromptDoc& doc,
                   const std::vector<Score>& scores) {
  std::vector<double> lls, normed;
  for (size_t c = 0; c < scores.size(); ++c) {
    lls.push_back(scores[c].logprob);
    // acc_norm divides by the choice's length in characters (len(str) in Python).
    normed.push_back(scores[c].logprob / (double)code_points(doc.choices[c]));
  }
  // CrowS-Pairs (crows_pairs/utils.py process_results): choice 0 is the more stereotyping
  // sentence, choice 1 the less.
  if (metric == "likelihood_diff") return std::abs(lls[0] - lls[1]);
  if (metric == "pct_stereotype") return lls[0] > lls[1] ? 1.0 : 0.0;
  return argmax(metric == "acc" ? lls : normed) == doc.gold ? 1.0 : 0.0;
}

MetricValue choice_metric(const std::string& metric, const std::vector<PromptDoc>& docs,
                          const std::vector<std::vector<Score>>& scores) {
  std::vector<double> items(scores.size());
  for (size_t d = 0; d < scores.size(); ++d) items[d] = choice_item(metric, docs[d], scores[d]);
  MetricValue m = mean_metric(metric, items);
  // The bias measures: lower is less biased (the harness's higher_is_better: false).
  m.higher_is_better = metric != "likelihood_diff" && metric != "pct_stereotype";
  return m;
}

}  // namespace

std::vector<MetricValue> task_metrics(const TaskSpec& task, const std::vector<PromptDoc>& docs,
                                      const std::vector<std::vector<Score>>& scores,
                                      long bootstrap_iters) {
  std::vector<MetricValue> out;
  const size_t n = scores.size();
  if (task.type == OutputType::kLoglikelihood) {
    std::vector<double> lls(n), acc(n);
    for (size_t d = 0; d < n; ++d) lls[d] = scores[d][0].logprob, acc[d] = scores[d][0].greedy;
    MetricValue ppl{"perplexity", std::exp(-mean(lls)), std::nullopt, false};
    if (n > 1 && bootstrap_iters > 0)
      ppl.stderr_value = bootstrap_perplexity_stderr(lls, bootstrap_iters);
    out.push_back(ppl);
    out.push_back(mean_metric("acc", acc));
  } else if (task.type == OutputType::kMultipleChoice) {
    for (const std::string& m : task.metrics) out.push_back(choice_metric(m, docs, scores));
  } else {
    double ll = 0, words = 0, bytes = 0;
    for (size_t d = 0; d < n; ++d) {
      double doc_ll = 0;
      for (const Score& s : scores[d]) doc_ll += s.logprob;
      ll += doc_ll, words += (double)docs[d].words, bytes += (double)docs[d].bytes;
    }
    out.push_back({"word_perplexity", std::exp(-ll / words), std::nullopt, false});
    out.push_back({"byte_perplexity", std::exp(-ll / bytes), std::nullopt, false});
    out.push_back({"bits_per_byte", -ll / bytes / std::log(2.0), std::nullopt, false});
  }
  return out;
}

}  // namespace trident::evaluation
