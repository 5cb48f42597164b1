#pragma once
// Scoring token requests on an InferenceModel: each request is log p(continuation | context)
// summed over its tokens and whether every continuation token is the argmax (is_greedy).
// Inputs are (context + continuation)[-(L + 1):][:-1] as the harness truncates them (from the
// left, L = the model's positions).
//
// A group's requests (a document's choices) share their context: with sharing on, the
// common prefix of their inputs is prefilled once into a KV-cache slot and each option then
// runs at the positions after it, one after another in that slot (a later option overwrites
// the earlier one's entries; attention only reads positions before a row's own). Many
// groups run at once, one per slot, in steps of up to max_step_tokens tokens; logits are
// asked for continuation rows only.
#include <functional>
#include <vector>

#include "evaluation/requests.h"
#include "generation/inference_model.h"

namespace trident::evaluation {

struct Score {
  double logprob = 0;
  bool greedy = true;
};
using Group = std::vector<TokenRequest>;

struct ScorerStats {
  long requests = 0;
  long request_tokens = 0;  // tokens of the truncated inputs, as if each were run alone
  long fed_tokens = 0;      // tokens the model actually ran
  long steps = 0;
  double seconds = 0;
};

// The input the model sees and the tokens it scores (the last targets.size() rows).
struct PreparedRequest {
  std::vector<int> input, targets;
};
PreparedRequest prepare_request(const TokenRequest& r, int max_length);

class EngineScorer {
 public:
  EngineScorer(generation::InferenceModel& model, bool share_context);
  // Coordinator only. One Score per request, group by group.
  std::vector<std::vector<Score>> score(const std::vector<Group>& groups);
  const ScorerStats& stats() const { return stats_; }
  // Called on the coordinator after each model step of score() with the requests finished so
  // far and the total of that call (for a progress line).
  void on_progress(std::function<void(long done, long total)> progress) {
    progress_ = std::move(progress);
  }

 private:
  generation::InferenceModel& model_;
  bool share_;
  ScorerStats stats_;
  std::function<void(long, long)> progress_;
};

}  // namespace trident::evaluation
