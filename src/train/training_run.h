#pragma once
// One rank's training run, set up (torchtitan's Trainer.__init__): the rank's model, the
// pipeline executor with the data-parallel hooks, the data, the log, and the progress
// restored from a checkpoint. The step (train/train_step.h), validation, checkpointing and
// the reports read and advance what it holds.
#include <memory>
#include <ostream>
#include <vector>

#include "checkpoint/async_save.h"
#include "config/batch_schedule.h"
#include "engine/rank_context.h"
#include "engine/rank_model.h"
#include "optim/lr_scheduler.h"
#include "pipeline_parallel/executor.h"
#include "pipeline_parallel/timeline.h"
#include "train/report.h"
#include "train/training_config.h"
#include "train/training_data.h"
#include "train/training_log.h"

namespace trident::train {

// Where the run stands after its latest iteration: what a checkpoint saves beside the
// iteration number.
struct TrainingProgress {
  long consumed_samples = 0;
  long evaluations = 0;  // validations run (each reads the next batches of the split)
  // Samples the learning-rate schedule has advanced: skipped (fp16 overflow) steps do not
  // move it, as in Megatron.
  long lr_schedule_samples = 0;
};

struct TrainingRun {
  // Builds everything in the order the log shows it, timing the phases before step 1.
  TrainingRun(const TrainingConfig& config, const engine::RankContext& rank, std::ostream& log);

  const TrainingConfig& config;
  const engine::RankContext& rank;
  std::ostream& log;  // rank 0's output; a discarding stream elsewhere
  const optim::LrSchedule lr_schedule = config.lr_schedule();
  const GlobalBatchSchedule batch_schedule = config.batch_schedule();
  const long train_iters = config.total_train_iters();

  engine::RankModel model;
  // Held by pointer: the data-parallel hooks keep its address.
  std::unique_ptr<pipeline_parallel::PipelineExecutor> executor;
  TrainingData data;
  std::unique_ptr<TrainingLog> training_log;
  double peak_tflops = 0;  // of this rank, for MFU

  long first_iteration = 1;  // after a resumed checkpoint's
  TrainingProgress progress;
  long checkpoints_saved = 0;  // by this run (--inject-fault-save counts them)

  // Measurements the steps leave for the reports and the validation announcements.
  std::vector<int> batch_tokens;  // this replica's micro-batches of the current step
  std::vector<pipeline_parallel::TraceEvent> last_step_events, timeline;
  DataParallelWaits data_parallel_waits;
  double seconds_per_sample = 0;  // of the latest step
  // What evaluations sent: not training traffic, so kept out of the collectives report.
  GroupCollectives evaluation_traffic;
  // --async-save: the background writer (made by the first save). Last, so that it is
  // destroyed first: its destructor waits for the write in flight.
  std::unique_ptr<checkpoint::AsyncSaver> async_saver;

 private:
  void build_executor();
};

}  // namespace trident::train
