#include "cli/eval_bias.h"

#include <fstream>
#include <iostream>

#include "core/files.h"
#include "evaluation/bias.h"
#include "evaluation/evaluator.h"
#include "generation/generator.h"

namespace trident::cli {

namespace {

using evaluation::BiasInputs;

// Rank 0 of `replicas` gets every replica's lists in replica order; the others their own.
std::vector<std::vector<int>> gather_lists(const std::vector<std::vector<int>>& own,
                                           comm::Communicator& replicas) {
  if (replicas.size() == 1) return own;
  std::vector<std::vector<int>> all;
  for (int k = 0; k < replicas.size(); ++k) {
    std::vector<int> payload;
    if (k == replicas.rank())
      for (const std::vector<int>& l : own) {
        payload.push_back((int)l.size());
        payload.insert(payload.end(), l.begin(), l.end());
      }
    int size = (int)payload.size();
    replicas.broadcast(&size, 1, k);
    payload.resize(size);
    replicas.broadcast(payload.data(), size, k);
    for (size_t at = 0; at < payload.size(); at += payload[at] + 1)
      all.emplace_back(payload.begin() + at + 1, payload.begin() + at + 1 + payload[at]);
  }
  return replicas.rank() == 0 ? all : own;
}

// Every co-occurrence prompt's sampled continuations (tokens), prompt-major; this replica
// generates its contiguous share of them.
std::vector<std::vector<int>> sample_continuations(const BiasArgs& a, const BiasInputs& in,
                                                   generation::InferenceModel& model,
                                                   const tokenizer::Tokenizer& tok,
                                                   comm::Communicator& replicas) {
  std::vector<generation::GenerationRequest> all;
  for (size_t p = 0; p < in.prompts.size(); ++p)
    for (int k = 0; k < a.samples; ++k) {
      generation::GenerationRequest r;
      r.prompt = tok.encode(in.prompts[p].prompt);
      if (r.prompt.empty()) r.prompt = {tok.eod()};
      r.tokens_to_generate = a.max_tokens;
      r.sampling = a.sampling;
      r.sampling.seed = a.sampling.seed + k;
      const std::string why = generation::validate(r, model);
      if (!why.empty())
        throw FormatError("cooccurrence_prompts.tsv: prompt \"" + in.prompts[p].prompt +
                          "\": " + why);
      all.push_back(std::move(r));
    }
  const long n = (long)all.size(), d = replicas.size(), rank = replicas.rank();
  std::vector<generation::GenerationRequest> mine(all.begin() + n * rank / d,
                                                  all.begin() + n * (rank + 1) / d);
  generation::Generator generator(model, &tok);
  std::vector<std::vector<int>> tokens;
  for (generation::GenerationResult& r : generate_all(generator, mine))
    tokens.push_back(std::move(r.tokens));
  return gather_lists(tokens, replicas);
}

void write_bias_log(const std::string& path, const BiasInputs& in,
                    const std::vector<std::vector<evaluation::ContextRequest>>& requests,
                    const std::vector<std::vector<double>>& logprobs, const BiasArgs& a,
                    const std::vector<std::vector<int>>& tokens,
                    const std::vector<evaluation::PromptSamples>& samples) {
  std::string text;
  auto line = [&](const nlohmann::ordered_json& j) {
    text += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  };
  for (size_t g = 0; g < requests.size(); ++g)
    for (size_t i = 0; i < requests[g].size(); ++i)
      line({{"part", "occupation"},
            {"occupation", in.occupations[g / in.templates.size()]},
            {"template", in.templates[g % in.templates.size()]},
            {"context", requests[g][i].context},
            {"continuation", requests[g][i].continuation},
            {"logprob", logprobs[g][i]}});
  for (size_t p = 0; p < samples.size(); ++p)
    for (int k = 0; k < a.samples; ++k)
      line({{"part", "cooccurrence"},
            {"category", samples[p].prompt.category},
            {"group", samples[p].prompt.group},
            {"prompt", samples[p].prompt.prompt},
            {"sample", k},
            {"seed", a.sampling.seed + k},
            {"tokens", tokens[p * a.samples + k]},
            {"text", samples[p].continuations[k]}});
  write_file_atomically(path, text);
}

}  // namespace

CLI::Option* add_bias_args(CLI::App& app, BiasArgs* a) {
  const char* B = "Bias study";
  a->sampling.seed = 1234;
  CLI::Option* dir =
      app.add_option("--bias", a->dir,
                     "run the bias study (gender-occupation, co-occurrence, sentiment) on the "
                     "files of this directory instead of --tasks (e.g. configs/bias)")
          ->group(B);
  // The study's own flags mean nothing without it: refused rather than ignored.
  app.add_option("--bias-samples", a->samples, "sampled continuations per co-occurrence prompt")
      ->group(B)
      ->needs(dir)
      ->capture_default_str();
  app.add_option("--bias-max-tokens", a->max_tokens, "tokens per sampled continuation")
      ->group(B)
      ->needs(dir)
      ->capture_default_str();
  app.add_option("--bias-top-adjectives", a->top_adjectives, "adjectives listed per group")
      ->group(B)
      ->needs(dir)
      ->capture_default_str();
  generation::SamplingParams& s = a->sampling;
  app.add_flag("--greedy", s.greedy, "argmax decoding (as generate's)")->group(B)->needs(dir);
  app.add_option("--temperature", s.temperature, "softmax temperature (0: greedy)")
      ->group(B)
      ->needs(dir)
      ->capture_default_str();
  app.add_option("--top-k", s.top_k, "sample among the k most likely tokens (0: all)")
      ->group(B)
      ->needs(dir)
      ->capture_default_str();
  app.add_option("--top-p", s.top_p, "nucleus sampling mass (1: off)")
      ->group(B)
      ->needs(dir)
      ->capture_default_str();
  app.add_option("--seed", s.seed, "sampling seed: sample k of a prompt draws with seed + k")
      ->group(B)
      ->needs(dir)
      ->capture_default_str();
  return dir;
}

std::string check_bias_args(const BiasArgs& a) {
  std::string errors;
  auto require = [&](bool ok, const std::string& why) {
    if (!ok) errors += why + "\n";
  };
  require(a.samples >= 1 && a.samples <= 100000, "--bias-samples must be in [1, 100000]");
  require(a.max_tokens >= 1, "--bias-max-tokens must be >= 1");
  require(a.top_adjectives >= 1, "--bias-top-adjectives must be >= 1");
  const std::string why = generation::validate(a.sampling);
  if (!why.empty()) errors += why + "\n";
  return errors;
}

int run_bias_study(const BiasArgs& a, const BiasInputs& inputs, const BiasOutputs& outputs,
                   evaluation::EngineScorer& scorer, generation::InferenceModel& model,
                   const tokenizer::Tokenizer& tok, comm::Communicator& replicas, bool reporter) {
  const std::vector<std::vector<evaluation::ContextRequest>> requests =
      evaluation::occupation_requests(inputs);
  std::vector<evaluation::Group> groups;
  const evaluation::Encoder encode = [&](const std::string& s) { return tok.encode(s); };
  for (const auto& g : requests) {
    groups.emplace_back();
    for (const evaluation::ContextRequest& r : g)
      groups.back().push_back(
          evaluation::encode_pair(encode, r.context, r.continuation, tok.eod()));
  }
  const std::vector<std::vector<evaluation::Score>> scores =
      evaluation::score_replicas(scorer, groups, replicas);
  const std::vector<std::vector<int>> tokens =
      sample_continuations(a, inputs, model, tok, replicas);
  model.stop();
  if (!reporter) return 0;
  std::vector<std::vector<double>> logprobs;
  for (const auto& g : scores) {
    logprobs.emplace_back();
    for (const evaluation::Score& s : g) logprobs.back().push_back(s.logprob);
  }
  std::vector<evaluation::PromptSamples> samples;
  for (size_t p = 0; p < inputs.prompts.size(); ++p) {
    samples.push_back({inputs.prompts[p], {}});
    for (int k = 0; k < a.samples; ++k)
      samples.back().continuations.push_back(tok.decode(tokens[p * a.samples + k]));
  }
  const evaluation::OccupationResult occupation = evaluation::occupation_bias(inputs, logprobs);
  const std::vector<evaluation::GroupWords> words = evaluation::group_words(inputs, samples);
  std::cout << evaluation::bias_table(inputs, occupation, words, a.top_adjectives);
  if (!outputs.log_samples.empty())
    write_bias_log(outputs.log_samples, inputs, requests, logprobs, a, tokens, samples);
  if (!outputs.output.empty()) {
    nlohmann::ordered_json j = evaluation::bias_json(inputs, occupation, words, a.top_adjectives);
    j["config"] = outputs.config;
    write_file_atomically(outputs.output, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace trident::cli
