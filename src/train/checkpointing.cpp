#include "train/checkpointing.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "io/hf_gpt2.h"
#include "io/hf_tokenizer.h"
#include "train/run_record.h"
#include "train/training_run.h"

namespace trident::train {

namespace fs = std::filesystem;

namespace {

// --finetune takes only the weights; otherwise the whole state, the run settings checked.
checkpoint::LoadMode load_mode(const TrainingConfig& c) {
  if (c.finetune) return checkpoint::LoadMode::kWeightsOnly;
  return c.override_checkpoint_config ? checkpoint::LoadMode::kResumeOverride
                                      : checkpoint::LoadMode::kResume;
}

// Testing (--inject-fault-save N): world rank 0 dies inside the run's N-th save.
checkpoint::SaveFault fault_of_save(const TrainingConfig& c, long save, int world_rank) {
  if (save != c.inject_fault_save || world_rank != 0) return checkpoint::SaveFault::kNone;
  return c.inject_fault_save_point == "mid-commit" ? checkpoint::SaveFault::kMidCommit
                                                   : checkpoint::SaveFault::kBeforeCommit;
}

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

// What checkpoint::load is given: --load, or iteration --ckpt-step under its directory.
std::string checkpoint_to_load(const TrainingConfig& c) {
  if (c.ckpt_step < 0) return c.load;
  return checkpoint::iteration_checkpoint(checkpoint::checkpoint_root(c.load), c.ckpt_step);
}

// How this run's learning-rate schedule differs from the checkpoint's, one line each.
std::vector<std::string> lr_schedule_changes(const TrainingConfig& c,
                                             const nlohmann::ordered_json& manifest) {
  if (!manifest.contains("run")) return {};
  return checkpoint::run_differences(manifest["run"], lr_schedule_settings(c));
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

}  // namespace

std::vector<std::string> load_path_errors(const TrainingConfig& c) {
  std::vector<std::string> errors;
  if (c.ckpt_step < -1) errors.push_back("--ckpt-step must be >= 0");
  if (c.load.empty()) {
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

void resume_from_checkpoint(TrainingRun& run, bool resumable, StartupClock& startup) {
  const TrainingConfig& c = run.config;
  if (!c.load.empty() && !resumable && !c.finetune)
    run.log << "no checkpoint under " << c.load << " yet: starting from the initialisation\n";
  // Fine-tuning needs a checkpoint: without one, load says why it cannot start.
  if (!resumable && !c.finetune) return;
  startup.begin("checkpoint load");
  const std::string path = checkpoint_to_load(c);
  const checkpoint::LoadMode mode = load_mode(c);
  checkpoint::RunRecord record = run_record(c);
  if (mode == checkpoint::LoadMode::kResume && c.override_opt_param_scheduler) {
    const nlohmann::ordered_json manifest =
        checkpoint::read_manifest(checkpoint::latest_checkpoint(path));
    for (const std::string& d : lr_schedule_changes(c, manifest))
      run.log << "warning: --override-opt-param-scheduler: " << d << " (this run's is used)\n";
    leave_out_lr_schedule(c, record);
  }
  const checkpoint::TrainingState st = checkpoint::load(
      path, record, run.model, run.rank, run.log, mode, [&](double f) { startup.progress(f); });
  run.first_iteration = st.iteration + 1;
  run.progress = {st.consumed_samples, st.evaluations, st.lr_schedule_samples};
}

void save_checkpoint(TrainingRun& run, long iteration) {
  const TrainingConfig& c = run.config;
  const TrainingProgress& p = run.progress;
  const checkpoint::SaveFault fault =
      fault_of_save(c, ++run.checkpoints_saved, run.rank.world_rank);
  run.model.finish_param_gather();
  checkpoint::save(c.save, run_record(c), run.model,
                   {iteration, p.consumed_samples, p.evaluations, p.lr_schedule_samples}, run.rank,
                   run.log, {c.keep_checkpoints, fault});
}

void export_hf_model(TrainingRun& run) {
  const TrainingConfig& c = run.config;
  Parameters whole = engine::gather_rank_model(run.model, c.rank_layout(), *run.rank.groups->tensor,
                                               *run.rank.groups->pipeline);
  if (run.rank.world_rank == 0) {
    io::save_hf_model(c.save_hf, c.model, whole);
    // GPT-2's tokenizer goes with it; HF's GPT-2 directory has no place for a SentencePiece one.
    if (c.tokenizer.given() && !c.tokenizer.sentencepiece())
      io::save_hf_gpt2_tokenizer(c.save_hf, c.tokenizer.vocab_file, c.tokenizer.merge_file,
                                 c.model.max_positions());
  }
  run.log << "saved HuggingFace GPT-2 model to " << c.save_hf << "\n";
}

}  // namespace trident::train
