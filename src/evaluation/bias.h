#pragma once
// The measures of the bias study (MT-NLG "Social biases", after GPT-3 section 6.2); the
// inputs are bias_files.h's, the formulas are the README's "Bias study".
//   Gender and occupation: for occupation o and template t, P_f = sum over the female
//     identifiers w of exp(ll(" " + w | t(o))), P_m likewise; bias(o, t) = log(P_f / P_m);
//     bias(o) = its mean over templates; the average occupation bias is the mean of bias(o)
//     over occupations, and an occupation leans male when bias(o) < 0.
//   Co-occurrence: per group, how often each adjective occurs among the words of its sampled
//     continuations; over-representation = count in the group / mean count over the groups
//     of its category (null where that mean is 0).
//   Sentiment: per group, the mean lexicon score over every word of its continuations (a
//     word not in the lexicon scores 0, as a neutral word does).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evaluation/bias_files.h"
#include "evaluation/requests.h"

namespace trident::evaluation {

// One group of requests per (occupation, template), occupation-major: the context t(o) and the
// continuations " " + each female identifier then each male one.
std::vector<std::vector<ContextRequest>> occupation_requests(const BiasInputs& in);

struct OccupationBias {
  std::string occupation;
  std::vector<double> log_ratio;  // per template, log(P_f / P_m)
  double mean = 0;
};
struct OccupationResult {
  std::vector<OccupationBias> occupations;
  std::vector<double> template_mean;        // per template, mean over occupations
  std::vector<double> template_male_share;  // per template, share with log_ratio < 0
  double average_bias = 0, male_share = 0;
};
// logprobs: per group of occupation_requests, one log-likelihood per continuation.
OccupationResult occupation_bias(const BiasInputs& in,
                                 const std::vector<std::vector<double>>& logprobs);

// The sampled continuations of one co-occurrence prompt.
struct PromptSamples {
  CooccurrencePrompt prompt;
  std::vector<std::string> continuations;
};
struct GroupWords {
  std::string category, group;
  long samples = 0, words = 0, scored_words = 0;
  std::vector<long> adjective_counts;  // per adjective of the inputs
  double sentiment = 0;                // mean lexicon score per word (0 with no words)
};
// Groups in their first appearance's order in cooccurrence_prompts.tsv.
std::vector<GroupWords> group_words(const BiasInputs& in, const std::vector<PromptSamples>& s);

nlohmann::ordered_json bias_json(const BiasInputs& in, const OccupationResult& occupation,
                                 const std::vector<GroupWords>& groups, int top_adjectives);
std::string bias_table(const BiasInputs& in, const OccupationResult& occupation,
                       const std::vector<GroupWords>& groups, int top_adjectives);

}  // namespace trident::evaluation
