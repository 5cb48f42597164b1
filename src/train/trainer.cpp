#include "train/trainer.h"

#include <cmath>
#include <ostream>

#include "model/flops.h"
#include "train/checkpointing.h"
#include "train/log_interval.h"
#include "train/report.h"
#include "train/samples.h"
#include "train/train_step.h"
#include "train/training_run.h"
#include "train/validation.h"

namespace trident::train {

namespace {

bool due(long iteration, long interval) {
  return interval > 0 && iteration % interval == 0;
}

// After the last step: the final checkpoint, the reports on what the run's parallelism
// cost, the last validation and the test loss, the HuggingFace export, the closing reports.
void finish_training(TrainingRun& run, long last_saved) {
  const TrainingConfig& c = run.config;
  if (!c.save.empty() && last_saved != run.train_iters) save_checkpoint(run, run.train_iters);
  run.model.finish_param_gather();
  // Taken before the final evaluations, whose traffic is then not training's either.
  const GroupCollectives training = training_collectives(run);
  report_parallel_overlap(run);
  run_validation(run, run.train_iters);
  run_test(run);
  if (!c.save_hf.empty()) export_hf_model(run);
  report_end_of_run(run, training);
}

}  // namespace

int run_training(const TrainingConfig& c, const engine::RankContext& rank, std::ostream& log) {
  TrainingRun run(c, rank, log);
  const int seq = c.model.seq_length, padded_vocab = run.model.chunks[0]->padded_vocab();
  LogInterval interval;
  long last_saved = -1;
  for (long it = run.first_iteration; it <= run.train_iters; ++it) {
    const StepResult step = train_step(run, it);
    interval.add(step, seq,
                 training_flops_per_iteration(c.model, step.global_batch, seq, padded_vocab));
    if (!std::isfinite(step.loss_sum)) {
      log << "error: loss is not finite at iteration " << it << "\n";
      return 3;
    }
    if (it % c.log_interval == 0 || it == run.train_iters)
      run.training_log->interval(interval.take(run, it, step));
    if (due(it, c.eval_interval) && it != run.train_iters) run_validation(run, it);
    if (due(it, c.sample_interval)) print_sample(run, it);
    if (!c.save.empty() && due(it, c.save_interval)) save_checkpoint(run, it), last_saved = it;
  }
  finish_training(run, last_saved);
  return 0;
}

}  // namespace trident::train
