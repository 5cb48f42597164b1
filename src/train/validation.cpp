#include "train/validation.h"

#include <cmath>
#include <iomanip>

#include "core/progress.h"
#include "train/metrics.h"

namespace trident::train {

namespace {

// Mean loss over eval_iters global batches starting at sample `first`; each data-parallel
// replica evaluates its slice of every batch, as in training (its cp ranks each their tokens
// of the replica's samples, so the loss sums go over data x context).
double evaluate(TrainingRun& run, const char* what, const data::SampleSource& source, long first,
                long* tokens_out) {
  const TrainingConfig& c = run.config;
  comm::Communicator& dp = *run.rank.groups->replicas;
  const int b = c.micro_batch_size, s = c.model.seq_length, m = c.num_micro_batches();
  const long global_batch = c.effective_global_batch();
  std::vector<int> tokens;
  double total = 0;
  long counted = 0;
  // A long evaluation says how far it has got every 2 s (rank 0's log; others discard it).
  ProgressTicker ticker(2.0);
  for (int e = 0; e < c.eval_iters; ++e) {
    fill_replica_batch(source, first + e * global_batch, c, m, dp.rank(), dp.size(), tokens);
    counted += counted_targets(tokens, s, dp);
    total +=
        run.executor->evaluate([&](int i) { return tokens.data() + (size_t)i * b * (s + 1); }, m);
    if (const double elapsed = ticker.due(e + 1, c.eval_iters); elapsed >= 0)
      run.log << format_progress(what, e + 1, c.eval_iters, "batches", elapsed) << "\n"
              << std::flush;
  }
  run.rank.groups->data->all_reduce(&total, 1, comm::ReduceOp::kSum);
  *tokens_out = counted;  // every token, or under --sft those the loss masks keep
  return *tokens_out ? total / *tokens_out : 0.0;
}

// Before an evaluation that will take a while: what is evaluated and about how long it
// takes (a forward pass is about a third of a training step; Megatron's --eval-iters
// default suits 100k-iteration runs, not a one-iteration smoke test).
void announce_evaluation(const char* what, const TrainingRun& run) {
  const TrainingConfig& c = run.config;
  const long samples = (long)c.eval_iters * c.effective_global_batch();
  const double estimate = run.seconds_per_sample * samples / 3;
  if (estimate < 2) return;
  run.log << "evaluating the " << what << " loss on " << c.eval_iters << " global batches ("
          << samples << " samples of " << c.model.seq_length << " tokens): about " << std::fixed
          << std::setprecision(0) << estimate << " s (--eval-iters sets the batches, 0 skips it)\n"
          << std::flush;
  run.log.unsetf(std::ios::fixed);
  run.log << std::setprecision(6);
}

}  // namespace

void run_validation(TrainingRun& run, long iteration) {
  const TrainingConfig& c = run.config;
  if (c.eval_iters == 0 || !run.data.valid) return;
  run.model.finish_param_gather();
  announce_evaluation("validation", run);
  GroupCollectives before = snapshot_collectives(*run.rank.groups);
  const long first = run.progress.evaluations++ * (long)c.eval_iters * c.effective_global_batch();
  long n = 0;
  double loss = evaluate(run, "validation", *run.data.valid, first, &n);
  run.training_log->validation({iteration, run.progress.consumed_samples, loss, n});
  GroupCollectives after = snapshot_collectives(*run.rank.groups);
  for (size_t i = 0; i < after.size(); ++i)
    run.evaluation_traffic[i].second += (after[i].second -= before[i].second);
}

double run_test(TrainingRun& run) {
  if (run.config.eval_iters == 0 || !run.data.test) return NAN;
  announce_evaluation("test", run);
  long n = 0;
  double loss = evaluate(run, "test", *run.data.test, 0, &n);
  run.log << format_test_line(loss) << "\n";
  return loss;
}

}  // namespace trident::train
