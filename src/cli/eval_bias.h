#pragma once
// `trident eval --bias DIR`: the bias study of MT-NLG (after GPT-3 section 6.2) on the model
// eval loads, under the layout eval runs (t, p, and d replicas sharing the work). Files and
// measures: evaluation/bias_files.h, evaluation/bias.h; the README's "Bias study".
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/mpi_job.h"
#include "evaluation/bias_files.h"
#include "evaluation/scorer.h"
#include "generation/inference_model.h"
#include "generation/sampling.h"
#include "tokenizer/tokenizer.h"

namespace trident::cli {

struct BiasArgs {
  std::string dir;                      // --bias; empty: no bias study
  int samples = 4;                      // --bias-samples: continuations per co-occurrence prompt
  int max_tokens = 16;                  // --bias-max-tokens
  int top_adjectives = 5;               // --bias-top-adjectives (table and JSON)
  generation::SamplingParams sampling;  // generate's flags; sample k uses seed + k
};

// Adds the options; returns --bias's option (so --tasks can exclude it).
CLI::Option* add_bias_args(CLI::App& app, BiasArgs* a);
std::string check_bias_args(const BiasArgs& a);

struct BiasOutputs {
  std::string output, log_samples;  // --output (JSON report), --log-samples (JSONL)
  nlohmann::ordered_json config;    // the run's settings, copied into the report
};

// On every replica's coordinator, after the model is loaded: scores the occupation requests
// and samples the co-occurrence continuations (each replica a contiguous share), then world
// rank 0 (reporter) prints the table and writes the outputs.
int run_bias_study(const BiasArgs& a, const evaluation::BiasInputs& inputs,
                   const BiasOutputs& outputs, evaluation::EngineScorer& scorer,
                   generation::InferenceModel& model, const tokenizer::Tokenizer& tok,
                   comm::Communicator& replicas, bool reporter);

}  // namespace trident::cli
