#include "engine/grad_sync_hooks.h"

#include <string>
#include <vector>

namespace trident::engine {

namespace {

// A chunk's gradients are reduced once per step, after its last backward: earlier
// backwards only accumulate, so their gradients are not final and the hook is taken off.
// Sharded gradients are reduced after every backward instead: the previous micro-batch's
// reductions complete before the chunk's next forward (the last stage's forward writes the
// output layer's gradients) or backward writes into the buffer they read.
void arm_reducers(RankModel& model, pipeline_parallel::PipelineExecutor& executor) {
  std::vector<GPTModel*> chunks = model.chunk_pointers();
  std::vector<data_parallel::GradientReducer*> reducers;
  for (const auto& r : model.reducers) reducers.push_back(r.get());
  executor.set_before_forward([reducers](int j) { reducers[j]->finish_micro_batch(); });
  std::vector<data_parallel::ParameterGatherer*> gatherers;
  for (const auto& g : model.gatherers) {
    gatherers.push_back(g.get());
    g->allow_prefetch_after(data_parallel::Pass::kForward, true);
  }
  executor.set_before_backward([chunks, reducers, gatherers](int j, bool last) {
    // Sharded weights: a backward that is not the step's last may prefetch the next
    // forward's first unit (the weights change only at the step).
    if (!gatherers.empty())
      gatherers[j]->allow_prefetch_after(data_parallel::Pass::kBackward, !last);
    data_parallel::GradientReducer* reducer = reducers[j];
    reducer->finish_micro_batch();
    if (!last && !reducer->shards_gradients()) {
      chunks[j]->set_grad_ready_hook({});
      return;
    }
    reducer->arm();
    chunks[j]->set_grad_ready_hook([reducer](int b, int e) { reducer->mark_ready(b, e); });
  });
}

}  // namespace

void register_grad_sync_hooks(RankModel& model, pipeline_parallel::PipelineExecutor& executor,
                              const GradSyncOptions& options) {
  arm_reducers(model, executor);
  // MPI moves a non-blocking collective only inside its calls: without these, overlapped
  // buckets would wait for the step's end (nothing is in flight at d = 1).
  // Sharded weights: the gathers of the next unit move too.
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    data_parallel::GradientReducer* reducer = model.reducers[j].get();
    data_parallel::ParameterGatherer* gatherer =
        j < model.gatherers.size() ? model.gatherers[j].get() : nullptr;
    if (gatherer)
      model.chunks[j]->set_progress_hook([reducer, gatherer] {
        reducer->progress();
        gatherer->progress();
      });
    else if (options.overlap_grad_reduce && options.data_parallel_size > 1)
      model.chunks[j]->set_progress_hook([reducer] { reducer->progress(); });
    if (reducer->overlaps_param_gather())  // ZeRO-1's gather of the updated weights
      model.chunks[j]->set_params_needed_hook(
          [reducer](int b, int e) { reducer->params_needed(b, e); });
  }
  // Each launched reduction appears on the timeline, where it overlaps the backward.
  for (auto& reducer : model.reducers)
    reducer->set_launch_observer([&executor](const std::string& name) {
      const double t = executor.now_us();
      executor.record(name, "data-parallel", t, t + 1);
    });
}

}  // namespace trident::engine
