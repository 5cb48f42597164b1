#include "train/run_summary.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "checkpoint/lifecycle.h"
#include "core/progress.h"
#include "train/training_run.h"

namespace trident::train {

namespace fs = std::filesystem;

namespace {

std::string loss_text(double loss) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.6E (ppl %.6E)", loss, std::exp(loss));
  return buf;
}

std::string absolute(const std::string& path) {
  std::error_code error;
  fs::path p = fs::absolute(path, error);
  if (error) return path;
  p = p.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "ckpt/" names ckpt
  return p.string();
}

// The tokenizer flags of the run, paths absolute: what generate and eval must be given.
std::string tokenizer_flags(const tokenizer::TokenizerOptions& t) {
  if (t.reads_model() && t.given())
    return " --tokenizer-type " + shell_quote(t.tokenizer_type) + " --tokenizer-model " +
           shell_quote(absolute(t.tokenizer_model));
  if (t.given())
    return " --vocab-file " + shell_quote(absolute(t.vocab_file)) + " --merge-file " +
           shell_quote(absolute(t.merge_file));
  return "";
}

// Without tokenizer flags, generate and eval take GPT-2's files: only a model of GPT-2's
// vocabulary (or larger) can use them.
bool has_text_tokenizer(const TrainingConfig& c) {
  constexpr int kGpt2Vocab = 50257;
  return c.tokenizer.given() || c.model.vocab_size >= kGpt2Vocab;
}

// The executable of this process, for commands that can be pasted as they are.
std::string executable_path() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? std::string("trident") : self.string();
}

}  // namespace

std::string shell_quote(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789_-+=./:,@%") == std::string::npos;
  if (plain) return text;
  std::string quoted = "'";
  for (char ch : text) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

std::string format_run_summary(const RunSummary& s) {
  const long iterations = s.last_iteration - s.first_iteration + 1;
  char buf[160];
  std::string out = "run summary:\n";
  out += "  wall time: " + format_duration(s.wall_seconds) + " (training steps " +
         format_duration(s.train_seconds) + ")\n";
  if (iterations > 0)
    std::snprintf(buf, sizeof buf, "  iterations: %ld (%ld to %ld of %ld)\n", iterations,
                  s.first_iteration, s.last_iteration, s.train_iters);
  else  // resumed from a checkpoint of the last iteration
    std::snprintf(buf, sizeof buf, "  iterations: none (the checkpoint was at %ld of %ld)\n",
                  s.first_iteration - 1, s.train_iters);
  out += buf;
  if (!s.stopped_early.empty())
    out +=
        "  stopped early: " + s.stopped_early +
        (s.checkpoint.empty() ? std::string("\n")
                              : "; run again without --load (it defaults to --save) to resume\n");
  std::snprintf(buf, sizeof buf, "  tokens trained: %ld (%.0f tokens/s)\n", s.tokens,
                s.train_seconds > 0 ? (double)s.tokens / s.train_seconds : 0.0);
  out += buf;
  if (!std::isnan(s.train_loss)) out += "  final train loss: " + loss_text(s.train_loss) + "\n";
  if (!std::isnan(s.validation_loss))
    out += "  validation loss: " + loss_text(s.validation_loss) + "\n";
  if (!std::isnan(s.test_loss)) out += "  test loss: " + loss_text(s.test_loss) + "\n";
  out += "  checkpoint: " + (s.checkpoint.empty() ? "none (no --save)" : s.checkpoint) + "\n";
  if (!s.hf_model.empty()) out += "  HuggingFace model: " + s.hf_model + "\n";
  return out;
}

std::vector<std::string> next_commands(const TrainingConfig& c, const std::string& trident) {
  std::vector<std::string> out;
  const std::string exe = shell_quote(trident);
  const std::string model = !c.save.empty()      ? " --load " + shell_quote(absolute(c.save))
                            : !c.save_hf.empty() ? " --load-hf " + shell_quote(absolute(c.save_hf))
                                                 : "";
  if (model.empty()) return out;
  const std::string tokenizer = tokenizer_flags(c.tokenizer);
  if (has_text_tokenizer(c)) {
    // The prompt and its continuation must fit the model's positions.
    const int continuation = std::min(64, c.model.seq_length / 2);
    out.push_back(exe + " generate" + model + tokenizer + " --prompt 'In the beginning'" +
                  " --tokens-to-generate " + std::to_string(continuation));
    out.push_back(exe + " eval" + model + tokenizer + " --tasks kjv_cloze");
  }
  if (!c.save.empty() && c.save_hf.empty())
    out.push_back(exe + " convert --load " + shell_quote(absolute(c.save)) + " --save-hf " +
                  shell_quote(absolute(c.save) + "_hf"));
  return out;
}

void print_run_summary(const TrainingRun& run, RunSummary s) {
  if (run.rank.world_rank != 0) return;
  const TrainingConfig& c = run.config;
  if (const auto& last = run.training_log->last_interval()) s.train_loss = last->loss;
  if (const auto& last = run.training_log->last_validation()) s.validation_loss = last->loss;
  if (!c.save.empty())
    s.checkpoint =
        (fs::path(absolute(c.save)) /
         checkpoint::iteration_dir(s.stopped_early.empty() ? s.train_iters : s.last_iteration))
            .string();
  if (!c.save_hf.empty()) s.hf_model = absolute(c.save_hf);
  run.log << format_run_summary(s);
  const std::vector<std::string> next = next_commands(c, executable_path());
  if (!next.empty()) run.log << "next:\n";
  for (const std::string& command : next) run.log << "  " << command << "\n";
  if ((!c.save.empty() || !c.save_hf.empty()) && !has_text_tokenizer(c))
    run.log << "  (generate and eval need the tokenizer the data was made with: --vocab-file "
               "and --merge-file, or --tokenizer-model)\n";
  run.log << std::flush;
}

}  // namespace trident::train
