#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "core/progress.h"
#include "kernels/peak.h"
#include "model/flops.h"
#include "train/checkpointing.h"
#include "train/early_stop.h"
#include "train/heartbeat.h"
#include "train/log_interval.h"
#include "train/report.h"
#include "train/run_summary.h"
#include "train/samples.h"
#include "train/startup_report.h"
#include "train/train_step.h"
#include "train/training_run.h"
#include "train/validation.h"

namespace trident::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool due(long iteration, long interval) {
  return interval > 0 && iteration % interval == 0;
}

// After the last step: the final checkpoint, the reports on what the run's parallelism
// cost, the last validation and the test loss, the HuggingFace export, the closing reports
// and the summary with the next commands.
void finish_training(TrainingRun& run, long last_saved, RunSummary summary,
                     Clock::time_point started) {
  const TrainingConfig& c = run.config;
  if (!c.save.empty() && last_saved != run.train_iters) save_checkpoint(run, run.train_iters);
  run.model.finish_param_gather();
  // Taken before the final evaluations, whose traffic is then not training's either.
  const GroupCollectives training = training_collectives(run);
  report_parallel_overlap(run);
  run_validation(run, run.train_iters);
  summary.test_loss = run_test(run);
  if (!c.save_hf.empty()) export_hf_model(run);
  report_end_of_run(run, training);
  finish_checkpoint_saves(run);  // --async-save: the last save, written meanwhile
  summary.wall_seconds = seconds_since(started);
  print_run_summary(run, summary);
}

// A stop before train_iters (train/early_stop.h): the checkpoint of `iteration`, unless the
// save interval just wrote it, and the summary. No final validation, test or export: the
// run is not over, and its resume does them.
void stop_early(TrainingRun& run, long iteration, long last_saved, const std::string& reason,
                RunSummary summary, Clock::time_point started) {
  const TrainingConfig& c = run.config;
  run.log << "stopping after iteration " << iteration << " of " << run.train_iters << ": " << reason
          << "\n";
  if (c.save.empty())
    run.log << "warning: no --save: the run stops without a checkpoint\n";
  else if (last_saved != iteration)
    save_checkpoint(run, iteration);
  finish_checkpoint_saves(run);  // --async-save: the stop waits until the save is committed
  run.model.finish_param_gather();
  summary.stopped_early = reason;
  summary.wall_seconds = seconds_since(started);
  print_run_summary(run, summary);
}

// fp16, every iteration of the run skipped: the weights are those it started with, and a
// final checkpoint or export would present them as trained. Says why and what to change.
int refuse_untrained(TrainingRun& run, long iterations, long last_saved) {
  const TrainingConfig& c = run.config;
  const double scale = run.model.scaler.scale();
  run.model.finish_param_gather();
  finish_checkpoint_saves(run);
  std::ostream& log = run.log;
  log << "error: all " << iterations << " iterations of this run were skipped: the fp16 "
      << "gradients overflowed at every step, at loss scale " << scale;
  if (c.loss_scale > 0)
    log << " (--loss-scale " << c.loss_scale << ", constant). Leave out --loss-scale for "
        << "dynamic loss scaling, or give a smaller --loss-scale.\n";
  else
    log << " (dynamic, from --initial-loss-scale " << c.initial_loss_scale
        << "). A smaller --initial-loss-scale, or more iterations, lets it find a scale "
        << "that does not overflow.\n";
  log << "error: the weights are those the run started with";
  if (last_saved > 0)
    log << "; the --save-interval checkpoints (the latest: iteration " << last_saved
        << ") hold them, untrained";
  if (!c.save.empty() && last_saved != run.train_iters) log << "; no final checkpoint written";
  if (!c.save_hf.empty()) log << "; no --save-hf export written";
  log << ".\n" << std::flush;
  return kExitEveryStepSkipped;
}

// A measured peak that this interval outran is measured again, over more windows (see
// recheck_peak_tflops), and the line's MFU taken against the higher of the two. A peak given
// by --peak-tflops is the user's and stands.
void recheck_peak(TrainingRun& run, IterationStats& s) {
  if (run.config.peak_tflops > 0) return;
  run.peak_tflops = recheck_peak_tflops(run.peak_tflops, s.tflops, [&] {
    char note[200];
    std::snprintf(note, sizeof note,
                  "note: this interval ran at %.3f TFLOP/s, above the measured peak "
                  "(%.3f): measuring it again\n",
                  s.tflops, run.peak_tflops);
    run.log << note;
    return peak_tflops_of_rank(run.config, run.rank, run.log, kernels::kCarefulPeakTrials);
  });
  s.mfu = s.tflops / run.peak_tflops;
}

// --skip-train: the held-out losses of the weights as loaded, logged at the iteration they
// were saved at (0 for --finetune, --load-hf or an initialisation).
int evaluate_only(TrainingRun& run) {
  run.log << "--skip-train: evaluating the weights of iteration " << run.first_iteration - 1
          << " without training\n";
  run_validation(run, run.first_iteration - 1);
  run_test(run);
  run.model.finish_param_gather();
  return 0;
}

}  // namespace

int run_training(const TrainingConfig& c, const engine::RankContext& rank, std::ostream& log,
                 const StopSignals& signals) {
  const Clock::time_point started = Clock::now();
  const EarlyStop early_stop(c, signals, started);
  TrainingRun run(c, rank, log);
  if (c.skip_train) return evaluate_only(run);
  const int seq = c.model.seq_length, padded_vocab = run.model.chunks[0]->padded_vocab();
  LogInterval interval;
  RecentIterations recent;  // for the ETA
  RunSummary summary;
  summary.first_iteration = run.first_iteration, summary.train_iters = run.train_iters;
  summary.last_iteration = run.first_iteration - 1;  // none yet
  Heartbeat heartbeat(log, rank.world_rank == 0 ? c.heartbeat_seconds : 0);
  long last_saved = -1, stepped = 0;  // stepped: iterations that updated the weights
  for (long it = run.first_iteration; it <= run.train_iters; ++it) {
    heartbeat.begin(it);
    const StepResult step = train_step(run, it);
    heartbeat.end(step.seconds);
    recent.add(step.seconds);
    summary.last_iteration = it, summary.train_seconds += step.seconds;
    summary.tokens += step.global_batch * seq;
    stepped += step.skipped ? 0 : 1;
    interval.add(step, seq,
                 training_flops_per_iteration(c.model, step.global_batch, seq, padded_vocab));
    if (!std::isfinite(step.loss_sum)) {
      log << "error: loss is not finite at iteration " << it << "\n";
      return kExitLossNotFinite;
    }
    if (it % c.log_interval == 0 || it == run.train_iters) {
      IterationStats s = interval.take(run, it, step);
      recheck_peak(run, s);
      s.elapsed_s = seconds_since(started), s.eta_s = recent.eta_seconds(run.train_iters - it);
      run.training_log->interval(s);
    }
    if (due(it, c.eval_interval) && it != run.train_iters) run_validation(run, it);
    if (due(it, c.sample_interval)) print_sample(run, it);
    if (!c.save.empty() && due(it, c.save_interval)) save_checkpoint(run, it), last_saved = it;
    const std::string stop = early_stop.after_iteration(it, step.seconds, rank);
    if (!stop.empty() && it < run.train_iters) {
      stop_early(run, it, last_saved, stop, summary, started);
      return 0;
    }
  }
  const long iterations = run.train_iters - run.first_iteration + 1;
  if (c.fp16 && iterations > 0 && stepped == 0)
    return refuse_untrained(run, iterations, last_saved);
  finish_training(run, last_saved, summary, started);
  return 0;
}

}  // namespace trident::train
