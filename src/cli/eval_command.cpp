#include "cli/eval_command.h"

#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "cli/eval_bias.h"
#include "cli/inference_args.h"
#include "cli/mpi_job.h"
#include "cli/parse_args.h"
#include "core/files.h"
#include "core/install_paths.h"
#include "core/progress.h"
#include "evaluation/evaluator.h"
#include "evaluation/report.h"
#include "evaluation/suite.h"
#include "tokenizer/tokenizer.h"

namespace trident::cli {

namespace {

struct EvalArgs {
  InferenceArgs inference;
  evaluation::EvalConfig config;
  std::string tasks = "kjv_cloze";
  int num_fewshot = 0;
  std::string suite;  // --suite: a name under configs/eval, or a file
  std::string output, log_samples;
  int batch_size = 16;
  int max_step_tokens = 2048;
  bool separate = false;  // --no-shared-context
  bool timing = false;
  BiasArgs bias;
};

void add_eval_args(CLI::App& app, EvalArgs* a) {
  add_inference_args(app, &a->inference);
  evaluation::EvalConfig& c = a->config;
  const char* E = "Evaluation";
  CLI::Option* tasks =
      app.add_option(
             "--tasks", a->tasks,
             "comma-separated: lambada_openai, piqa, hellaswag, winogrande, boolq, arc_easy, "
             "arc_challenge, race, wikitext, kjv_cloze, mc:NAME, text:PATH")
          ->group(E)
          ->capture_default_str();
  c.task_dir = installed_path("data/tasks");  // beside the binary, whatever the directory
  app.add_option("--task-dir", c.task_dir, "task data: <task-dir>/<task>/<split>.jsonl")
      ->group(E)
      ->capture_default_str();
  CLI::Option* shots =
      app.add_option("--num-fewshot", a->num_fewshot, "examples before each document")
          ->group(E)
          ->capture_default_str();
  CLI::Option* suite =
      app.add_option("--suite", a->suite,
                     "a paper's table instead of --tasks: every task at each column's shot count, "
                     "beside the published numbers (mt-nlg, or a suite file; see README)")
          ->group(E);
  suite->excludes(tasks)->excludes(shots);
  app.add_option("--fewshot-seed", c.fewshot_seed, "few-shot sampling seed (the harness's 1234)")
      ->group(E)
      ->capture_default_str();
  app.add_option("--limit", c.limit, "first N documents of each task (-1: all)")
      ->group(E)
      ->capture_default_str();
  app.add_option("--bootstrap-iters", c.bootstrap_iters, "resamples for perplexity stderr")
      ->group(E)
      ->capture_default_str();
  app.add_option("--batch-size", a->batch_size, "documents scored at once (KV-cache slots)")
      ->group(E)
      ->capture_default_str();
  app.add_option("--max-step-tokens", a->max_step_tokens, "tokens per forward step")
      ->group(E)
      ->capture_default_str();
  app.add_flag("--no-shared-context", a->separate,
               "score every choice with its own context pass (for comparison)")
      ->group(E);
  app.add_option("--output", a->output,
                 "write the results JSON here (harness layout; with --bias the bias report)")
      ->group(E);
  app.add_option("--log-samples", a->log_samples,
                 "write every request and its score (JSONL; with --bias also the continuations)")
      ->group(E);
  app.add_flag("--timing", a->timing, "print requests/s and tokens/s (stderr, JSON)")->group(E);
  // The bias study is not a task: it samples continuations and reports its own measures.
  CLI::Option* bias = add_bias_args(app, &a->bias);
  tasks->excludes(bias);
  suite->excludes(bias);
}

std::string check_eval_args(const EvalArgs& a) {
  std::string errors;
  auto require = [&](bool ok, const std::string& why) {
    if (!ok) errors += why + "\n";
  };
  require(!a.tasks.empty(), "--tasks must name at least one task");
  require(a.num_fewshot >= 0 && a.num_fewshot <= 1000, "--num-fewshot must be in [0, 1000]");
  require(a.config.limit >= -1, "--limit must be >= 0 (or -1: all)");
  require(a.config.bootstrap_iters >= 0, "--bootstrap-iters must be >= 0");
  require(a.batch_size >= 1 && a.batch_size <= 4096, "--batch-size must be in [1, 4096]");
  require(a.max_step_tokens >= 16 && a.max_step_tokens <= (1 << 20),
          "--max-step-tokens must be in [16, 1048576]");
  if (!a.bias.dir.empty()) errors += check_bias_args(a.bias);
  return errors;
}

// --tasks a,b,c at --num-fewshot k.
std::vector<evaluation::TaskRun> task_runs(const std::string& list, int num_fewshot) {
  std::vector<evaluation::TaskRun> out;
  std::stringstream ss(list);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) out.push_back({t, num_fewshot});
  return out;
}

// --suite NAME is configs/eval/NAME.json beside the installation; anything with a '/' or a
// .json ending is a file.
std::string suite_path(const std::string& suite) {
  const bool file = suite.find('/') != std::string::npos ||
                    (suite.size() > 5 && suite.compare(suite.size() - 5, 5, ".json") == 0);
  return file ? suite : installed_path("configs/eval/" + suite + ".json");
}

// A scoring that runs past 5 s says every 5 s how far it has got (stderr, world rank 0: its
// replica's share of the requests).
void report_progress(evaluation::EngineScorer& scorer, int replicas) {
  auto ticker = std::make_shared<ProgressTicker>(5.0);
  const std::string what =
      replicas > 1 ? "eval (replica 0 of " + std::to_string(replicas) + ")" : std::string("eval");
  scorer.on_progress([ticker, what](long done, long total) {
    if (const double elapsed = ticker->due(done, total); elapsed >= 0)
      std::cerr << format_progress(what, done, total, "requests scored", elapsed) << std::endl;
  });
}

nlohmann::ordered_json run_config(const EvalArgs& a) {
  const generation::InferenceOptions& o = a.inference.model;
  return {{"model", o.load.empty() ? o.load_hf : o.load},
          {"num_fewshot", a.suite.empty() ? nlohmann::ordered_json(a.num_fewshot)
                                          : nlohmann::ordered_json("per suite cell")},
          {"fewshot_seed", a.config.fewshot_seed},
          {"limit", a.config.limit < 0 ? nlohmann::ordered_json(nullptr)
                                       : nlohmann::ordered_json(a.config.limit)},
          {"bootstrap_iters", a.config.bootstrap_iters},
          {"bf16", o.bf16},
          {"harness_definitions", "lm-evaluation-harness 0.4.13.dev0 (4e7e0d4)"}};
}

nlohmann::ordered_json bias_config(const EvalArgs& a) {
  const generation::SamplingParams& s = a.bias.sampling;
  return {{"model",
           a.inference.model.load.empty() ? a.inference.model.load_hf : a.inference.model.load},
          {"bias_dir", a.bias.dir},
          {"samples", a.bias.samples},
          {"max_tokens", a.bias.max_tokens},
          {"greedy", s.is_greedy()},
          {"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"seed", s.seed},
          {"bf16", a.inference.model.bf16}};
}

int coordinate(EvalArgs& a, generation::InferenceModel& model, const RankSetup& setup,
               bool reporter, const evaluation::BiasInputs* bias, const evaluation::Suite* suite) {
  const std::unique_ptr<tokenizer::Tokenizer> built =
      build_inference_tokenizer(a.inference, model.vocab());
  const tokenizer::Tokenizer& tok = *built;
  if (bias) {
    evaluation::EngineScorer scorer(model, !a.separate);
    return run_bias_study(a.bias, *bias, {a.output, a.log_samples, bias_config(a)}, scorer, model,
                          tok, *setup.groups.data, reporter);
  }
  evaluation::EvalPlan plan = evaluation::plan_evaluation(
      a.config, [&](const std::string& s) { return tok.encode(s); }, tok.eod(),
      model.max_sequence());
  evaluation::EngineScorer scorer(model, !a.separate);
  if (reporter) report_progress(scorer, setup.groups.data->size());
  std::vector<std::vector<evaluation::Score>> scores =
      evaluation::score_replicas(scorer, plan.groups, *setup.groups.data);
  model.stop();
  if (a.timing) {
    const evaluation::ScorerStats& s = scorer.stats();
    nlohmann::ordered_json j = {{"replica", setup.groups.data->rank()},
                                {"requests", s.requests},
                                {"request_tokens", s.request_tokens},
                                {"fed_tokens", s.fed_tokens},
                                {"steps", s.steps},
                                {"seconds", s.seconds},
                                {"requests_per_s", s.requests / std::max(s.seconds, 1e-9)},
                                {"tokens_per_s", s.request_tokens / std::max(s.seconds, 1e-9)}};
    std::cerr << "timing: " << j.dump() << std::endl;
  }
  if (!reporter) return 0;
  const std::vector<evaluation::TaskOutcome> outcomes = evaluation::finish(a.config, plan, scores);
  std::cout << evaluation::results_table(outcomes);
  if (suite)
    std::cout << "\n" << suite->title << "\n\n" << evaluation::suite_table(*suite, outcomes);
  if (!a.log_samples.empty()) evaluation::write_log_samples(a.log_samples, plan, scores);
  if (!a.output.empty()) {
    nlohmann::ordered_json j = suite ? evaluation::suite_json(*suite, outcomes)
                                     : evaluation::results_json(outcomes, run_config(a));
    if (suite) j["config"] = run_config(a);
    write_file_atomically(a.output, j.dump(2) + "\n");
  }
  return 0;
}

// What the run reads besides the model: the bias study's files or a suite.
struct EvalInputs {
  std::unique_ptr<evaluation::BiasInputs> bias;
  std::unique_ptr<evaluation::Suite> suite;
};

// Names, files and output paths are checked before any model is loaded: a typo costs nothing.
EvalInputs read_inputs(EvalArgs& a) {
  EvalInputs in;
  if (!a.bias.dir.empty()) {
    in.bias = std::make_unique<evaluation::BiasInputs>(evaluation::load_bias_inputs(a.bias.dir));
  } else if (!a.suite.empty()) {
    in.suite = std::make_unique<evaluation::Suite>(evaluation::load_suite(suite_path(a.suite)));
    a.config.runs = evaluation::suite_runs(*in.suite);
  } else {
    for (const evaluation::TaskRun& r : a.config.runs) evaluation::find_task(r.task);
  }
  if (!a.output.empty()) check_output_file(a.output, "--output");
  if (!a.log_samples.empty()) check_output_file(a.log_samples, "--log-samples");
  return in;
}

}  // namespace

int eval_main(const std::vector<std::string>& args) {
  comm::MpiRuntime mpi(nullptr, nullptr);
  CLI::App app("trident eval: zero/few-shot tasks scored as lm-evaluation-harness scores them",
               "trident eval");
  EvalArgs a;
  add_eval_args(app, &a);
  int code = 0;
  if (!parse_quietly_off_rank_0(mpi, [&] { return parse_args(app, args, &code); })) return code;
  const std::string errors =
      check_inference_args(a.inference, mpi.world_size(), true) + check_eval_args(a);
  if (!errors.empty()) {
    if (mpi.world_rank() == 0) std::cerr << "trident eval:\n" << errors;
    return 2;
  }
  a.config.runs = task_runs(a.tasks, a.num_fewshot);
  return run_job(mpi, "trident eval", [&]() -> int {
    const EvalInputs inputs = read_inputs(a);
    generation::InferenceOptions o = a.inference.model;
    o.max_batch = a.batch_size;
    o.prefill_chunk = std::max(1, a.max_step_tokens - a.batch_size);
    o.max_logit_rows = std::max(1, a.max_step_tokens / 2);
    o.decode_panels = false;  // scoring runs long steps; the decode copy would only cost memory
    RankSetup setup(mpi, o.tensor_model_parallel_size, o.pipeline_model_parallel_size,
                    launch_options(a.inference, "trident eval"));
    apply_inference_runtime(a.inference, setup.context.nodes, mpi.world_rank());
    std::ostringstream discard;
    generation::InferenceModel model(o, setup.context, discard);
    if (!model.coordinator()) {
      model.follow();
      return 0;
    }
    return coordinate(a, model, setup, mpi.world_rank() == 0, inputs.bias.get(),
                      inputs.suite.get());
  });
}

}  // namespace trident::cli
