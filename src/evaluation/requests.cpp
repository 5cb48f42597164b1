#include "evaluation/requests.h"

#include <algorithm>
#include <stdexcept>

#include "evaluation/text_ops.h"

namespace trident::evaluation {

namespace {
constexpr const char* kFewshotDelimiter = "\n\n";
}  // namespace

std::string fewshot_prefix(const TaskSpec& task, const std::vector<const PromptDoc*>& shots) {
  std::string prefix;
  for (const PromptDoc* s : shots) {
    if (task.multiple_input)
      prefix += s->choices[s->gold] + task.target_delimiter + s->target;
    else if (task.type == OutputType::kMultipleChoice)
      prefix += s->text + task.target_delimiter + s->choices[s->gold];
    else
      prefix += s->text + task.target_delimiter + s->target;
    prefix += kFewshotDelimiter;
  }
  return prefix;
}

std::vector<ContextRequest> doc_requests(const TaskSpec& task, const PromptDoc& doc,
                                         const std::string& prefix) {
  std::vector<ContextRequest> out;
  if (task.type == OutputType::kLoglikelihood) {
    out.push_back({prefix + doc.text, doc.target});
  } else if (task.multiple_input) {
    for (const std::string& c : doc.choices)
      out.push_back({prefix + c, task.target_delimiter + doc.target});
  } else if (task.type == OutputType::kMultipleChoice) {
    for (const std::string& c : doc.choices)
      out.push_back({prefix + doc.text, task.target_delimiter + c});
  }
  return out;
}

TokenRequest encode_pair(const Encoder& encode, const std::string& context,
                         const std::string& continuation, int prefix_token) {
  TokenRequest r;
  if (context.empty()) {
    r.continuation = encode(continuation);
    if (r.continuation.empty()) throw std::invalid_argument("the continuation is empty");
    if (r.continuation[0] != prefix_token) {
      r.context = {prefix_token};
    } else {
      r.context = {r.continuation[0]};
      r.continuation.erase(r.continuation.begin());
    }
    return r;
  }
  const std::string ctx = python_rstrip(context);
  const std::string cont = context.substr(ctx.size()) + continuation;
  const std::vector<int> whole = encode(ctx + cont);
  r.context = encode(ctx);
  const size_t n = std::min(r.context.size(), whole.size());
  r.continuation.assign(whole.begin() + (long)n, whole.end());
  if (r.continuation.empty()) throw std::invalid_argument("the continuation encodes to no tokens");
  return r;
}

std::vector<TokenRequest> rolling_windows(const std::vector<int>& tokens, int prefix_token,
                                          int max_length) {
  std::vector<TokenRequest> windows;
  const long n = (long)tokens.size(), L = max_length;
  if (n == 0) return windows;
  // The first window predicts tokens[0, first) from [EOT] + tokens[0, first - 1).
  const long first = std::min(L, n);
  TokenRequest w;
  w.context = {prefix_token};
  w.continuation.assign(tokens.begin(), tokens.begin() + first);
  windows.push_back(w);
  // Later windows predict up to L new tokens; the input is the L tokens before each
  // window's end, made disjoint: context = what precedes the predicted tokens.
  for (long predicted = first; predicted < n;) {
    const long count = std::min(n - predicted, L), end = predicted + count;
    TokenRequest r;
    const long input_begin = end - L - 1;  // >= 0 as predicted >= L here
    r.context.assign(tokens.begin() + input_begin, tokens.begin() + (end - count));
    r.continuation.assign(tokens.begin() + (end - count), tokens.begin() + end);
    windows.push_back(std::move(r));
    predicted = end;
  }
  return windows;
}

}  // namespace trident::evaluation
