#include "cli/generate_command.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "cli/inference_args.h"
#include "cli/mpi_job.h"
#include "cli/parse_args.h"
#include "core/files.h"
#include "generation/generator.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_classes.h"

namespace trident::cli {

namespace {

struct GenerateArgs {
  InferenceArgs inference;
  std::vector<std::string> prompts;
  std::string prompt_file;
  generation::GenerationRequest request;  // everything but the prompt
  bool json = false;
  bool timing = false;
};

void add_generate_args(CLI::App& app, GenerateArgs* a) {
  add_inference_args(app, &a->inference);
  generation::GenerationRequest& r = a->request;
  generation::SamplingParams& s = r.sampling;
  s.seed = 1234;
  const char* P = "Prompts";
  app.add_option("--prompt", a->prompts, "a prompt (repeatable)")->group(P);
  app.add_option("--prompt-file", a->prompt_file,
                 "one prompt per line, or JSONL lines {\"prompt\": ...}")
      ->group(P);
  const char* G = "Generation";
  app.add_option("--tokens-to-generate", r.tokens_to_generate, "new tokens per prompt")
      ->group(G)
      ->capture_default_str();
  app.add_flag("--greedy", s.greedy, "argmax decoding (the default is sampling)")->group(G);
  app.add_option("--temperature", s.temperature, "softmax temperature (0: greedy)")
      ->group(G)
      ->capture_default_str();
  app.add_option("--top-k", s.top_k, "sample among the k most likely tokens (0: all)")
      ->group(G)
      ->capture_default_str();
  app.add_option("--top-p", s.top_p, "nucleus sampling mass (1: off)")
      ->group(G)
      ->capture_default_str();
  app.add_option("--seed", s.seed, "sampling seed (draws depend only on it and the position)")
      ->group(G)
      ->capture_default_str();
  app.add_option("--stop", r.stop, "stop string (repeatable): the text ends before it")->group(G);
  app.add_flag("--stop-on-eol", r.stop_on_eol, "end after the first newline")->group(G);
  app.add_flag("--logprobs", r.logprobs, "log-probabilities of prompt and new tokens")->group(G);
  app.add_flag("--json", a->json, "one JSON object per prompt: text, tokens, logprobs")->group(G);
  app.add_flag("--timing", a->timing, "print prefill and decode tokens/s (stderr, JSON)")->group(G);
}

std::vector<std::string> read_prompt_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw FormatError(path + ": cannot open");
  std::vector<std::string> prompts;
  std::string line;
  for (long n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(n);
    if (!tokenizer::is_valid_utf8(line)) throw FormatError(where + ": not valid UTF-8");
    if (line[0] != '{') {
      prompts.push_back(line);
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) throw FormatError(where + ": a line starting with { is not JSON");
    const char* key = j.contains("prompt") ? "prompt" : "text";
    if (!j.is_object() || !j.contains(key) || !j[key].is_string())
      throw FormatError(where + ": a JSON line needs a string \"prompt\" (or \"text\")");
    prompts.push_back(j[key].get<std::string>());
  }
  return prompts;
}

void print_result(const std::string& prompt, const generation::GenerationResult& r, bool json,
                  bool logprobs) {
  if (!json) {
    std::cout << prompt << r.text << "\n";
    return;
  }
  nlohmann::ordered_json j = {{"prompt", prompt},
                              {"text", r.text},
                              {"tokens", r.tokens},
                              {"prompt_tokens", r.prompt},
                              {"finish_reason", r.finish_reason}};
  if (logprobs) {
    j["logprobs"] = r.logprobs;
    j["prompt_logprobs"] = r.prompt_logprobs;
  }
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_timing(const generation::GeneratorStats& s) {
  auto rate = [](long n, double sec) { return sec > 0 ? n / sec : 0.0; };
  nlohmann::ordered_json j = {{"steps", s.steps},
                              {"prefill_tokens", s.prefill_tokens},
                              {"prefill_seconds", s.prefill_seconds},
                              {"prefill_tokens_per_s", rate(s.prefill_tokens, s.prefill_seconds)},
                              {"decode_tokens", s.decode_tokens},
                              {"decode_seconds", s.decode_seconds},
                              {"decode_tokens_per_s", rate(s.decode_tokens, s.decode_seconds)},
                              {"mixed_tokens", s.mixed_tokens},
                              {"mixed_seconds", s.mixed_seconds}};
  std::cerr << "timing: " << j.dump() << "\n";
}

int coordinate(const GenerateArgs& a, generation::InferenceModel& model) {
  const std::unique_ptr<tokenizer::Tokenizer> built =
      build_inference_tokenizer(a.inference, model.vocab());
  const tokenizer::Tokenizer& tok = *built;
  std::vector<std::string> prompts = a.prompts;
  if (!a.prompt_file.empty())
    for (std::string& p : read_prompt_file(a.prompt_file)) prompts.push_back(std::move(p));
  if (prompts.empty()) throw FormatError("give --prompt TEXT or --prompt-file F");
  std::vector<generation::GenerationRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!tokenizer::is_valid_utf8(prompts[i]))
      throw FormatError("prompt " + std::to_string(i + 1) + " is not valid UTF-8");
    generation::GenerationRequest r = a.request;
    r.prompt = tok.encode(prompts[i]);
    if (r.prompt.empty()) r.prompt = {tok.eod()};  // an empty prompt starts a document
    const std::string why = generation::validate(r, model);
    if (!why.empty()) throw FormatError("prompt " + std::to_string(i + 1) + ": " + why);
    requests.push_back(std::move(r));
  }
  generation::Generator generator(model, &tok);
  std::vector<generation::GenerationResult> results = generate_all(generator, requests);
  model.stop();
  for (size_t i = 0; i < results.size(); ++i)
    print_result(prompts[i], results[i], a.json, a.request.logprobs);
  if (a.timing) print_timing(generator.stats());
  return 0;
}

}  // namespace

int generate_main(const std::vector<std::string>& args) {
  comm::MpiRuntime mpi(nullptr, nullptr);
  CLI::App app("trident generate: continue prompts with a trained model", "trident generate");
  GenerateArgs a;
  add_generate_args(app, &a);
  int code = 0;
  if (!parse_quietly_off_rank_0(mpi, [&] { return parse_args(app, args, &code); })) return code;
  const std::string errors = check_inference_args(a.inference, mpi.world_size());
  if (!errors.empty()) {
    if (mpi.world_rank() == 0) std::cerr << "trident generate:\n" << errors;
    return 2;
  }
  return run_job(mpi, "trident generate", [&]() -> int {
    const generation::InferenceOptions& o = a.inference.model;
    RankSetup setup(mpi, o.tensor_model_parallel_size, o.pipeline_model_parallel_size,
                    launch_options(a.inference, "trident generate"));
    apply_inference_runtime(a.inference, setup.context.nodes, mpi.world_rank());
    std::ostringstream discard;
    std::ostream& log = mpi.world_rank() == 0 ? std::cerr : discard;
    generation::InferenceModel model(o, setup.context, log);
    if (!model.coordinator()) {
      model.follow();
      return 0;
    }
    log << "memory plan of rank 0 (KV cache: " << model.max_batch() << " slots x "
        << model.max_sequence() << " positions):\n";
    model.memory_plan().print(log);
    return coordinate(a, model);
  });
}

}  // namespace trident::cli
