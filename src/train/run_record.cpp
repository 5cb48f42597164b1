#include "train/run_record.h"

#include <filesystem>
#include <sstream>

#include "data/dataset_builder.h"

namespace trident::train {

namespace fs = std::filesystem;

namespace {

// Blend weights normalised and prefixes absolute, so that the same data given as "1 a 1 b"
// or "2 a 2 b", or from another working directory, reads the same.
std::string data_description(const TrainingConfig& c) {
  if (c.mock_data) return "mock";
  if (c.data_path.empty()) return "none";
  std::vector<data::WeightedPrefix> inputs = data::parse_data_path(c.data_path);
  double total = 0;
  for (const data::WeightedPrefix& p : inputs) total += p.weight;
  std::ostringstream out;
  for (const data::WeightedPrefix& p : inputs)
    out << (&p == &inputs.front() ? "" : " ") << p.weight / total << " "
        << fs::absolute(p.prefix).lexically_normal().string();
  return out.str();
}

}  // namespace

// The schedule as it runs, in samples (lr_schedule()): a resume compares what the flags come
// to, so a decay length that defaulted to --train-iters changes with it and is caught, while
// the same schedule given as iterations or as samples is the same run.
std::vector<checkpoint::RunSetting> lr_schedule_settings(const TrainingConfig& c) {
  const optim::LrSchedule lr = c.lr_schedule();
  std::vector<checkpoint::RunSetting> s = {
      {"lr", "--lr", c.lr},
      {"min_lr", "--min-lr", c.min_lr},
      {"lr_decay_style", "--lr-decay-style", c.lr_decay_style},
      {"lr_schedule_warmup_samples",
       "--lr-warmup-iters/-samples/-fraction (the warm-up in samples)", lr.warmup_steps},
      {"lr_schedule_decay_samples",
       "--lr-decay-iters/-samples (the decay length in samples; by default the training length)",
       lr.decay_steps}};
  // WSD's annealing only where it runs: another style's manifest stays as it was (and a
  // change of style is caught by lr_decay_style).
  if (lr.style == optim::DecayStyle::kWsd) {
    s.push_back({"lr_wsd_decay_style", "--lr-wsd-decay-style",
                 c.lr_wsd_decay_style.empty() ? "exponential" : c.lr_wsd_decay_style});
    s.push_back({"lr_schedule_wsd_decay_samples",
                 "--lr-wsd-decay-iters/-samples (the annealing in samples)", lr.wsd_decay_steps});
  }
  return s;
}

namespace {

// Not here on purpose: t, p, d, virtual stages and the distributed optimizer (a checkpoint
// loads under any layout), threads, and --train-iters (a run may be extended; where that
// moves the LR decay, the schedule's samples differ).
std::vector<checkpoint::RunSetting> run_settings(const TrainingConfig& c) {
  std::vector<checkpoint::RunSetting> s = {
      {"seed", "--seed", c.seed},
      {"global_batch_size", "--global-batch-size", c.effective_global_batch()},
      {"micro_batch_size", "--micro-batch-size", c.micro_batch_size},
      {"seq_length", "--seq-length", c.model.seq_length},
      {"data_path", "--data-path", data_description(c)}};
  for (checkpoint::RunSetting& lr : lr_schedule_settings(c)) s.push_back(std::move(lr));
  s.push_back({"rampup_batch_size", "--rampup-batch-size", c.rampup_batch_size});
  if (!c.mock_data) s.push_back({"split", "--split", c.split});  // mock data has no split
  return s;
}

}  // namespace

checkpoint::RunRecord run_record(const TrainingConfig& c) {
  checkpoint::RunRecord run;
  run.layout = c.rank_layout();
  run.seed = c.seed;
  // Training without data (none given, not mock) has nothing to compare on resume.
  if (c.mock_data || !c.data_path.empty()) run.settings = run_settings(c);
  run.global_batch = c.effective_global_batch();
  run.tokenizer = checkpoint::tokenizer_record(c.tokenizer);  // copied into every checkpoint
  return run;
}

}  // namespace trident::train
