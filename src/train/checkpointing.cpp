#include "train/checkpointing.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "io/hf_gpt2.h"
#include "io/hf_llama.h"
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

// Testing (--inject-fault-save N): inside the run's N-th save, world rank 0 dies or stalls
// writing; or the last writer of the last (tensor, pipeline) position, another rank than 0
// where there are several, fails writing: its data-parallel rank 0, or its last
// data-parallel rank when the optimizer is sharded (every data-parallel rank writes).
checkpoint::SaveFault fault_of_save(const TrainingConfig& c, long save,
                                    const engine::RankContext& rank) {
  using checkpoint::SaveFault;
  if (save != c.inject_fault_save) return SaveFault::kNone;
  const std::string& point = c.inject_fault_save_point;
  if (point == "write-error") {
    const distributed::ProcessGroups& g = *rank.groups;
    const int writer = c.distributed_optimizer() ? g.data->size() - 1 : 0;
    const bool last_writer = g.data->rank() == writer && g.tensor->rank() == g.tensor->size() - 1 &&
                             g.pipeline->rank() == g.pipeline->size() - 1;
    return last_writer ? SaveFault::kWriteError : SaveFault::kNone;
  }
  if (rank.world_rank != 0) return SaveFault::kNone;
  if (point == "stall-write") return SaveFault::kStallWriting;
  return point == "mid-commit" ? SaveFault::kMidCommit : SaveFault::kBeforeCommit;
}

}  // namespace

void resume_from_checkpoint(TrainingRun& run, bool resumable, StartupClock& startup) {
  const TrainingConfig& c = run.config;
  if (!c.load.empty() && !resumable && !c.finetune)
    run.log << "no checkpoint under " << c.load << " yet: starting from the initialisation\n";
  // Fine-tuning needs a checkpoint: without one, load says why it cannot start.
  if (!resumable && !c.finetune) return;
  if (c.load_defaulted_to_save)
    run.log << "resuming from --save " << c.save
            << ", which holds this run's checkpoint (--load defaults to --save)\n";
  startup.begin("checkpoint load");
  const std::string path = checkpoint_to_load(c);
  if (checkpoint::classify_load_path(path) == checkpoint::LoadPathKind::kCheckpointDirWithoutLatest)
    run.log << "warning: " << path << " has no `latest` (a first save that died before "
            << "writing it, or a removed file): resuming from its newest complete iteration, "
            << checkpoint::latest_checkpoint(path) << "\n";
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
  run.model.release_gathered_values();  // sharded weights: back to this rank's shard
  run.first_iteration = st.iteration + 1;
  run.progress = {st.consumed_samples, st.evaluations, st.lr_schedule_samples};
}

void save_checkpoint(TrainingRun& run, long iteration) {
  const TrainingConfig& c = run.config;
  const TrainingProgress& p = run.progress;
  const checkpoint::SaveFault fault = fault_of_save(c, ++run.checkpoints_saved, run.rank);
  run.model.finish_param_gather();
  const checkpoint::TrainingState state{iteration, p.consumed_samples, p.evaluations,
                                        p.lr_schedule_samples};
  // A sharded optimizer (ZeRO-3's weights included) is saved shard by shard: every rank writes
  // its own range, which no forward or backward changes while an asynchronous copy reads it.
  if (!c.async_save) {
    checkpoint::save(c.save, run_record(c), run.model, state, run.rank, run.log,
                     {c.keep_checkpoints, fault});
    return;
  }
  if (!run.async_saver) run.async_saver = std::make_unique<checkpoint::AsyncSaver>();
  run.async_saver->save(c.save, run_record(c), run.model, state, run.rank, run.log,
                        {c.keep_checkpoints, fault});
}

void finish_checkpoint_saves(TrainingRun& run) {
  if (run.async_saver) run.async_saver->finish(run.rank, run.log);
}

namespace {
// --save-hf-dtype, else BF16 for a bf16 run or one that started from a BF16 directory (the
// fp32 master weights rounded to nearest even), else F32.
io::StoredDtype export_dtype(const TrainingConfig& c) {
  if (!c.save_hf_dtype.empty())
    return c.save_hf_dtype == "bf16" ? io::StoredDtype::kBF16 : io::StoredDtype::kF32;
  const bool bf16_source =
      !c.load_hf.empty() && io::hf_weights_dtype(c.load_hf) == io::StoredDtype::kBF16;
  return c.bf16 || bf16_source ? io::StoredDtype::kBF16 : io::StoredDtype::kF32;
}
}  // namespace

void export_hf_model(TrainingRun& run) {
  const TrainingConfig& c = run.config;
  run.model.gather_all_values();  // sharded weights: for this moment only
  Parameters whole =
      engine::gather_rank_model(run.model, c.rank_layout(), *run.rank.groups->tensor,
                                *run.rank.groups->pipeline, run.rank.groups->expert.get());
  run.model.release_gathered_values();
  if (run.rank.world_rank == 0) {
    io::save_hf_model(c.save_hf, c.model, whole, false, export_dtype(c));
    // GPT-2's tokenizer goes with it, or a HuggingFace tokenizer.json; HF's GPT-2 directory
    // has no place for a SentencePiece one.
    if (c.tokenizer.given() && c.tokenizer.huggingface())
      io::save_hf_tokenizer_json(c.save_hf, c.tokenizer.tokenizer_model);
    else if (c.tokenizer.given() && !c.tokenizer.sentencepiece())
      io::save_hf_gpt2_tokenizer(c.save_hf, c.tokenizer.vocab_file, c.tokenizer.merge_file,
                                 c.model.max_positions());
  }
  run.log << "saved HuggingFace model to " << c.save_hf << "\n";
}

}  // namespace trident::train
