#include "train/resume_rules.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "checkpoint/lifecycle.h"
#include "checkpoint/manifest.h"
#include "train/run_record.h"

namespace trident::train {

namespace fs = std::filesystem;

namespace {

// Whether two paths name the same directory (either may not exist yet).
bool same_directory(const std::string& a, const std::string& b) {
  auto normal = [](const std::string& p) {
    std::error_code ec;
    fs::path n = fs::weakly_canonical(fs::absolute(p), ec).lexically_normal();
    return n.has_filename() ? n : n.parent_path();
  };
  return normal(a) == normal(b);
}

// --ckpt-step N: iteration N must be under the checkpoint directory, and where --load names
// an iteration directory, it must be that one.
void check_ckpt_step(const TrainingConfig& c, checkpoint::LoadPathKind kind,
                     std::vector<std::string>& errors) {
  const std::string step = "--ckpt-step " + std::to_string(c.ckpt_step);
  const std::string wanted = checkpoint::iteration_dir(c.ckpt_step);
  if (kind == checkpoint::LoadPathKind::kIterationDir) {
    fs::path p(c.load);
    if (!p.has_filename()) p = p.parent_path();
    if (p.filename() != wanted)
      errors.push_back(step + " asks for " + wanted + ", --load names " + c.load);
    return;
  }
  try {
    checkpoint::iteration_checkpoint(checkpoint::checkpoint_root(c.load), c.ckpt_step);
  } catch (const checkpoint::CheckpointError& e) {
    errors.push_back(step + ": " + e.what());
  }
}

}  // namespace

// How this run's learning-rate schedule differs from the checkpoint's, one line each.
std::vector<std::string> lr_schedule_changes(const TrainingConfig& c,
                                             const nlohmann::ordered_json& manifest) {
  if (!manifest.contains("run")) return {};
  return checkpoint::run_differences(manifest["run"], lr_schedule_settings(c));
}

// What checkpoint::load is given: --load, or iteration --ckpt-step under its directory.
std::string checkpoint_to_load(const TrainingConfig& c) {
  if (c.ckpt_step < 0) return c.load;
  return checkpoint::iteration_checkpoint(checkpoint::checkpoint_root(c.load), c.ckpt_step);
}

// --override-opt-param-scheduler: the load compares everything but the schedule.
void leave_out_lr_schedule(const TrainingConfig& c, checkpoint::RunRecord& record) {
  const std::vector<checkpoint::RunSetting> schedule = lr_schedule_settings(c);
  std::vector<checkpoint::RunSetting> kept;
  for (checkpoint::RunSetting& s : record.settings)
    if (std::none_of(schedule.begin(), schedule.end(),
                     [&](const checkpoint::RunSetting& l) { return l.key == s.key; }))
      kept.push_back(std::move(s));
  record.settings = std::move(kept);
}

void default_load_to_save(TrainingConfig& c) {
  if (c.save.empty() || (!c.load.empty() && !c.finetune)) return;
  if (!checkpoint::has_checkpoint(c.save)) return;
  c.load = c.save;
  c.finetune = false;  // the fine-tuning run's own checkpoint carries on from where it was
  c.load_defaulted_to_save = true;
}

std::vector<std::string> load_path_errors(const TrainingConfig& c) {
  std::vector<std::string> errors;
  if (c.ckpt_step < -1) errors.push_back("--ckpt-step must be >= 0");
  if (c.load.empty()) {
    // A restart must never take damage for "no checkpoint yet" and train over it.
    if (!c.save.empty() && checkpoint::classify_load_path(c.save) ==
                               checkpoint::LoadPathKind::kIncompleteCheckpointDir)
      errors.push_back("--save " + c.save + ": " +
                       checkpoint::describe(checkpoint::LoadPathKind::kIncompleteCheckpointDir) +
                       "; refusing to train over them (remove them, or --save elsewhere)");
    if (c.ckpt_step >= 0) errors.push_back("--ckpt-step needs --load");
    if (c.override_opt_param_scheduler)
      errors.push_back("--override-opt-param-scheduler needs --load");
    return errors;
  }
  const checkpoint::LoadPathKind kind = checkpoint::classify_load_path(c.load);
  const bool empty =
      kind == checkpoint::LoadPathKind::kMissing || kind == checkpoint::LoadPathKind::kNoCheckpoint;
  if (empty && !c.finetune && !c.save.empty() && same_directory(c.load, c.save)) {
    if (c.ckpt_step >= 0)
      errors.push_back("--ckpt-step " + std::to_string(c.ckpt_step) + ": --load " + c.load +
                       " holds no checkpoint yet");
    return errors;  // a first start: it trains from the initialisation and saves there
  }
  if (!checkpoint::has_checkpoint(c.load)) {
    errors.push_back("--load " + c.load + ": not a checkpoint (" + checkpoint::describe(kind) +
                     "); " + checkpoint::expected_load_path() +
                     (empty && !c.finetune ? " (only the --save directory may hold none yet: a "
                                             "job's first start, trained from the initialisation)"
                                           : ""));
    return errors;
  }
  if (c.ckpt_step >= 0) check_ckpt_step(c, kind, errors);
  return errors;
}

std::vector<std::string> resume_errors(const TrainingConfig& c) {
  if (c.load.empty() || c.finetune || c.override_checkpoint_config || !has_checkpoint_to_resume(c))
    return {};
  nlohmann::ordered_json manifest;
  try {
    const std::string dir = checkpoint::latest_checkpoint(checkpoint_to_load(c));
    manifest = checkpoint::read_manifest(dir);
    checkpoint::RunRecord record = run_record(c);
    if (c.override_opt_param_scheduler) leave_out_lr_schedule(c, record);
    std::ostringstream notes;  // the load prints them
    checkpoint::check_run_settings(manifest, (fs::path(dir) / "manifest.json").string(),
                                   record.settings, checkpoint::LoadMode::kResume, notes);
  } catch (const checkpoint::CheckpointError& e) {
    std::string message = e.what();
    if (!c.override_opt_param_scheduler && !lr_schedule_changes(c, manifest).empty())
      message +=
          "\n  (--override-opt-param-scheduler resumes with this run's learning-rate "
          "schedule)";
    return {message};
  }
  return {};
}

bool has_checkpoint_to_resume(const TrainingConfig& c) {
  return !c.load.empty() && checkpoint::has_checkpoint(c.load);
}

}  // namespace trident::train
