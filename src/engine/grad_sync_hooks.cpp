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
// Sharded expert gradients (ZeRO-2/3, an expert-data group of more than one rank) likewise:
// when the chunk reports a layer's dense gradients final, the layer's experts' are too (they
// are formed in the same backward of the layer), and the expert reducer is told. An expert
// buffer whose gradients are whole is reduced at the step (engine/optimizer_step.cpp).
void arm_reducers(RankModel& model, pipeline_parallel::PipelineExecutor& executor) {
  std::vector<GPTModel*> chunks = model.chunk_pointers();
  std::vector<data_parallel::GradientReducer*> reducers, experts;
  std::vector<data_parallel::ParameterGatherer*> gatherers;  // per chunk: dense, experts'
  std::vector<ExpertSpan> spans;
  for (size_t j = 0; j < chunks.size(); ++j) {
    reducers.push_back(model.reducers[j].get());
    data_parallel::GradientReducer* e =
        j < model.expert_reducers.size() ? model.expert_reducers[j].get() : nullptr;
    experts.push_back(e && e->shards_gradients() ? e : nullptr);
    spans.push_back(experts.back() ? expert_span(*chunks[j]) : ExpertSpan{});
    gatherers.push_back(j < model.gatherers.size() ? model.gatherers[j].get() : nullptr);
    gatherers.push_back(expert_gatherer(model, j));
  }
  for (data_parallel::ParameterGatherer* g : gatherers)
    if (g) g->allow_prefetch_after(data_parallel::Pass::kForward, true);
  executor.set_before_forward([reducers, experts](int j) {
    reducers[j]->finish_micro_batch();
    if (experts[j]) experts[j]->finish_micro_batch();
  });
  executor.set_before_backward([chunks, reducers, experts, gatherers, spans](int j, bool last) {
    // Sharded weights: a backward that is not the step's last may prefetch the next
    // forward's first unit (the weights change only at the step).
    for (int k : {2 * j, 2 * j + 1})
      if (gatherers[k]) gatherers[k]->allow_prefetch_after(data_parallel::Pass::kBackward, !last);
    data_parallel::GradientReducer *reducer = reducers[j], *expert = experts[j];
    reducer->finish_micro_batch();
    if (expert) expert->finish_micro_batch(), expert->arm();
    if (!last && !reducer->shards_gradients()) {
      chunks[j]->set_grad_ready_hook({});
      return;
    }
    reducer->arm();
    if (!expert)
      return chunks[j]->set_grad_ready_hook([reducer](int b, int e) { reducer->mark_ready(b, e); });
    chunks[j]->set_grad_ready_hook([reducer, expert, span = spans[j]](int b, int e) {
      reducer->mark_ready(b, e);
      const auto [lo, hi] = span(b, e);
      if (lo < hi) expert->mark_ready(lo, hi);
    });
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
    data_parallel::GradientReducer* experts =
        j < model.expert_reducers.size() ? model.expert_reducers[j].get() : nullptr;
    if (experts && experts->shards_gradients())  // ZeRO-2/3 of the expert buffer
      model.chunks[j]->set_progress_hook(
          [reducer, gatherer, experts, expert_gatherer = expert_gatherer(model, j)] {
            reducer->progress();
            experts->progress();
            for (data_parallel::ParameterGatherer* g : {gatherer, expert_gatherer})
              if (g) g->progress();
          });
    else if (gatherer)
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
