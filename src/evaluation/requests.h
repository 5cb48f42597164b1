#pragma once
// What a document asks of the model, as lm-evaluation-harness builds it.
//
// Strings: the context is the few-shot prefix (each example as its question, the target
// delimiter " ", its answer and the few-shot delimiter "\n\n") then the document's question;
// a multiple-choice continuation is " " + choice; Winogrande's contexts are the prefix plus
// each filled-in sentence start, its continuation " " + the rest; LAMBADA's continuation is
// its target " word" (no delimiter added, so its examples read "...  word").
//
// Tokens (HFLM's _encode_pair): trailing whitespace of the context moves to the
// continuation; the context is encoded alone and the continuation is what encoding the
// whole adds after it; an empty context becomes the end-of-text token. Rolling
// log-likelihood: windows of the model's length over [EOT] + text, each token predicted once,
// the last window's context reaching back a full length (get_rolling_token_windows +
// make_disjoint_window, context_len 1).
#include <functional>
#include <string>
#include <vector>

#include "evaluation/task.h"

namespace trident::evaluation {

struct ContextRequest {
  std::string context, continuation;
};

std::string fewshot_prefix(const TaskSpec& task, const std::vector<const PromptDoc*>& shots);
// Loglikelihood and multiple-choice documents (rolling ones have none).
std::vector<ContextRequest> doc_requests(const TaskSpec& task, const PromptDoc& doc,
                                         const std::string& prefix);

struct TokenRequest {
  std::vector<int> context, continuation;
};
using Encoder = std::function<std::vector<int>(const std::string&)>;

// Throws std::invalid_argument when the continuation encodes to nothing.
TokenRequest encode_pair(const Encoder& encode, const std::string& context,
                         const std::string& continuation, int prefix_token);
std::vector<TokenRequest> rolling_windows(const std::vector<int>& tokens, int prefix_token,
                                          int max_length);

}  // namespace trident::evaluation
