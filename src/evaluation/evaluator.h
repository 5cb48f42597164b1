#pragma once
// The evaluation run, in three parts the command strings together:
//   plan_evaluation: tasks -> documents -> few-shot contexts -> request strings -> tokens,
//                    grouped by document (pure given the files and the tokenizer);
//   score_replicas:  each data-parallel replica scores a contiguous slice of the groups and
//                    world rank 0 gathers them, so the result is one process's;
//   finish:          per-task metrics, and the request log (--log-samples).
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "evaluation/metrics.h"
#include "evaluation/requests.h"
#include "evaluation/scorer.h"
#include "evaluation/task_registry.h"

namespace trident::evaluation {

// One task at one shot count. A plain run is every --tasks name at --num-fewshot; a suite
// (--suite) runs a task at several counts, each with its own few-shot draw.
struct TaskRun {
  std::string task;
  int num_fewshot = 0;
};

struct EvalConfig {
  std::vector<TaskRun> runs;
  std::string task_dir = "data/tasks";
  std::uint64_t fewshot_seed = 1234;
  long limit = -1;  // documents per task; -1: all
  long bootstrap_iters = 100000;
};

struct TaskPlan {
  LoadedTask task;
  int num_fewshot = 0;
  long evaluated = 0;                                // documents scored (after --limit)
  std::vector<std::vector<ContextRequest>> strings;  // per document
  std::vector<std::vector<long>> shots;              // few-shot pool indices per document
};

struct EvalPlan {
  std::vector<TaskPlan> tasks;
  std::vector<Group> groups;  // the work, in task then document order
  struct Owner {
    int task;
    long doc;
  };
  std::vector<Owner> owners;  // per group (a rolling document has one group per window)
};

// Throws FormatError for bad task names, files and documents.
EvalPlan plan_evaluation(const EvalConfig& config, const Encoder& encode, int eot, int max_length);

// Coordinators of every replica call this with `replicas` = their data-parallel group (rank =
// replica index); world rank 0 gets every group's scores, the others their own slice only.
std::vector<std::vector<Score>> score_replicas(EngineScorer& scorer,
                                               const std::vector<Group>& groups,
                                               comm::Communicator& replicas);

struct TaskOutcome {
  TaskSpec spec;
  int num_fewshot = 0;
  long original = 0, effective = 0;  // documents in the file, documents scored
  std::vector<MetricValue> metrics;
};
std::vector<TaskOutcome> finish(const EvalConfig& config, const EvalPlan& plan,
                                const std::vector<std::vector<Score>>& scores);

// One JSON line per request: task, doc, n-shot, index, context, continuation (strings; rolling
// windows have none), the tokens, logprob and is_greedy.
void write_log_samples(const std::string& path, const EvalPlan& plan,
                       const std::vector<std::vector<Score>>& scores);

}  // namespace trident::evaluation
