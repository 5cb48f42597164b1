#pragma once
// The end of a run on rank 0: what it took (wall time, iterations, tokens, tokens/s), where
// it ended (the last train, validation and test losses, the checkpoint and HuggingFace
// directories), and the commands that use what it wrote, with its real paths.
#include <cmath>
#include <string>
#include <vector>

#include "train/training_config.h"

namespace trident::train {

struct TrainingRun;

struct RunSummary {
  double wall_seconds = 0;   // since the run began, set-up and evaluations included
  double train_seconds = 0;  // inside the training steps
  long first_iteration = 1, last_iteration = 0, train_iters = 0;
  long tokens = 0;  // trained by this run (a resumed run's earlier ones not counted)
  double train_loss = NAN, validation_loss = NAN, test_loss = NAN;  // NaN: none
  std::string checkpoint;     // the last saved iteration's directory ("" when none)
  std::string hf_model;       // the --save-hf directory ("" when none)
  std::string stopped_early;  // why the run stopped before train_iters ("" when it did not)
};

// The summary's lines, each ending in a newline.
std::string format_run_summary(const RunSummary& s);

// `text` as one POSIX shell word (quoted only when it has to be).
std::string shell_quote(const std::string& text);

// The commands worth running next on what the run saved: generate and eval (when the model
// has a tokenizer they can use: the one given, or GPT-2's for a vocabulary of its size),
// and convert (a checkpoint and no --save-hf). `trident` is the executable to name; paths
// are made absolute. Empty when nothing was saved.
std::vector<std::string> next_commands(const TrainingConfig& c, const std::string& trident);

// Rank 0 prints the summary (losses from the run's log, paths from the config) and the next
// commands; `s` brings the times, iterations and tokens.
void print_run_summary(const TrainingRun& run, RunSummary s);

}  // namespace trident::train
