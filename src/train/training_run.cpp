#include "train/training_run.h"

#include <omp.h>

#include "core/startup_clock.h"
#include "engine/grad_sync_hooks.h"
#include "train/checkpointing.h"
#include "train/memory_check.h"
#include "train/run_pictures.h"
#include "train/startup_report.h"

namespace trident::train {

TrainingRun::TrainingRun(const TrainingConfig& c, const engine::RankContext& r, std::ostream& l)
    : config(c), rank(r), log(l) {
  if (c.threads > 0) omp_set_num_threads(c.threads);
  refuse_unaddressable(c);  // before the layout's print counts the parameters in a long
  print_run_layout(c, rank, log);
  // Before the first large allocation: a run that cannot fit is refused, not killed.
  check_memory(c, rank, log);
  comm::Communicator& dp = *rank.groups->data;
  StartupClock startup(log);
  model = engine::build_rank_model(c.rank_model_options(), *rank.groups->tensor,
                                   *rank.groups->pipeline, dp, &startup, rank.groups->expert.get(),
                                   rank.groups->expert_data.get(), rank.groups->context.get());
  startup.begin("memory plan");
  print_rank_model(c, model, dp.size(), log);
  startup.begin("peak measurement");
  peak_tflops = peak_tflops_of_rank(c, rank, log);
  build_executor();
  startup.begin("data indices");
  data = make_training_data(c, log);
  const bool resumable = has_checkpoint_to_resume(c);
  training_log = std::make_unique<TrainingLog>(c, rank, resumable && !c.finetune, log);
  write_run_description(*this);
  evaluation_traffic = snapshot_collectives(*rank.groups);
  for (auto& entry : evaluation_traffic) entry.second = {};
  resume_from_checkpoint(*this, resumable, startup);
  if (c.async_save) {  // (--async-save needs --save)
    startup.begin("snapshot buffers");
    async_saver = std::make_unique<checkpoint::AsyncSaver>();
    async_saver->reserve(model, rank);
  }
  startup.finish();
}

void TrainingRun::build_executor() {
  const TrainingConfig& c = config;
  std::vector<pipeline_parallel::PipelineStage*> stages;
  for (GPTModel* chunk : model.chunk_pointers()) stages.push_back(chunk);
  const bool slow = rank.world_rank == c.inject_slow_rank;
  executor = std::make_unique<pipeline_parallel::PipelineExecutor>(
      model.schedule, stages, *rank.groups->pipeline, *rank.groups->tensor, c.micro_batch_size,
      c.rank_layout().local_seq(), c.model.hidden_size,
      pipeline_parallel::ExecutorOptions{c.scatter_gather, rank.world_rank,
                                         slow ? c.inject_slow_forward_ms : 0.0,
                                         c.sequence_parallel_active()});
  // Data parallelism: gradients of a chunk's last backward in the step are reduced bucket by
  // bucket while backward continues (--overlap-grad-reduce).
  engine::register_grad_sync_hooks(
      model, *executor, {rank.groups->data->size(), c.overlap_grad_reduce, c.overlap_param_gather});
}

}  // namespace trident::train
