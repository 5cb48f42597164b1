#include "evaluation/evaluator.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "evaluation/fewshot.h"

namespace trident::evaluation {

EvalPlan plan_evaluation(const EvalConfig& config, const Encoder& encode, int eot, int max_length) {
  EvalPlan plan;
  std::vector<TaskSpec> specs;
  for (const TaskRun& run : config.runs) specs.push_back(find_task(run.task));
  for (size_t r = 0; r < specs.size(); ++r) {
    const TaskSpec& spec = specs[r];
    TaskPlan t;
    t.num_fewshot = config.runs[r].num_fewshot;
    t.task = load_task(spec, config.task_dir, t.num_fewshot);
    const long n = (long)t.task.docs.size();
    t.evaluated = config.limit >= 0 ? std::min(config.limit, n) : n;
    t.shots = sample_fewshot(spec, t.task.docs, (size_t)t.evaluated, t.task.fewshot, t.num_fewshot,
                             config.fewshot_seed);
    const int task_index = (int)plan.tasks.size();
    for (long d = 0; d < t.evaluated; ++d) {
      const PromptDoc& doc = t.task.docs[d];
      const std::string where = t.task.eval_path + ":" + std::to_string(doc.line) + ": ";
      if (spec.type == OutputType::kRollingLoglikelihood) {
        t.strings.push_back({});
        for (TokenRequest& w : rolling_windows(encode(doc.target), eot, max_length)) {
          plan.groups.push_back({std::move(w)});
          plan.owners.push_back({task_index, d});
        }
        continue;
      }
      std::vector<const PromptDoc*> shots;
      for (long j : t.shots[d]) shots.push_back(&t.task.fewshot[j]);
      t.strings.push_back(doc_requests(spec, doc, fewshot_prefix(spec, shots)));
      Group group;
      for (const ContextRequest& r : t.strings.back()) {
        try {
          group.push_back(encode_pair(encode, r.context, r.continuation, eot));
        } catch (const std::invalid_argument& e) {
          throw FormatError(where + e.what());
        }
      }
      plan.groups.push_back(std::move(group));
      plan.owners.push_back({task_index, d});
    }
    plan.tasks.push_back(std::move(t));
  }
  return plan;
}

namespace {

// Scores travel between replicas as raw bytes in int broadcasts: bit for bit what the
// replica computed.
void pack(const std::vector<std::vector<Score>>& scores, std::vector<int>* out) {
  for (const std::vector<Score>& g : scores) {
    out->push_back((int)g.size());
    for (const Score& s : g) {
      int bits[2];
      std::memcpy(bits, &s.logprob, sizeof bits);
      out->insert(out->end(), {bits[0], bits[1], s.greedy ? 1 : 0});
    }
  }
}

}  // namespace

std::vector<std::vector<Score>> score_replicas(EngineScorer& scorer,
                                               const std::vector<Group>& groups,
                                               comm::Communicator& replicas) {
  const long d = replicas.size(), r = replicas.rank(), n = (long)groups.size();
  auto first = [&](long k) { return n * k / d; };
  std::vector<Group> mine(groups.begin() + first(r), groups.begin() + first(r + 1));
  std::vector<std::vector<Score>> own = scorer.score(mine);
  if (d == 1) return own;
  std::vector<std::vector<Score>> all;
  for (long k = 0; k < d; ++k) {
    std::vector<int> payload;
    if (k == r) pack(own, &payload);
    int size = (int)payload.size();
    replicas.broadcast(&size, 1, (int)k);
    payload.resize(size);
    replicas.broadcast(payload.data(), size, (int)k);
    if (r != 0) continue;
    size_t at = 0;
    for (long g = first(k); g < first(k + 1); ++g) {
      std::vector<Score> scores(payload[at++]);
      for (Score& s : scores) {
        std::memcpy(&s.logprob, &payload[at], sizeof s.logprob);
        s.greedy = payload[at + 2] != 0;
        at += 3;
      }
      all.push_back(std::move(scores));
    }
  }
  return r == 0 ? all : own;
}

std::vector<TaskOutcome> finish(const EvalConfig& config, const EvalPlan& plan,
                                const std::vector<std::vector<Score>>& scores) {
  std::vector<std::vector<std::vector<Score>>> per_doc(plan.tasks.size());
  for (size_t t = 0; t < plan.tasks.size(); ++t) per_doc[t].resize(plan.tasks[t].evaluated);
  for (size_t g = 0; g < scores.size(); ++g) {
    std::vector<Score>& doc = per_doc[plan.owners[g].task][plan.owners[g].doc];
    doc.insert(doc.end(), scores[g].begin(), scores[g].end());
  }
  std::vector<TaskOutcome> out;
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    const TaskPlan& tp = plan.tasks[t];
    TaskOutcome o;
    o.spec = tp.task.spec;
    o.num_fewshot = tp.num_fewshot;
    o.original = (long)tp.task.docs.size();
    o.effective = tp.evaluated;
    o.metrics = task_metrics(o.spec, tp.task.docs, per_doc[t], config.bootstrap_iters);
    out.push_back(std::move(o));
  }
  return out;
}

void write_log_samples(const std::string& path, const EvalPlan& plan,
                       const std::vector<std::vector<Score>>& scores) {
  std::ofstream f(path);
  if (!f) throw FormatError(path + ": cannot write");
  std::vector<long> window(plan.tasks.size(), 0), last_doc(plan.tasks.size(), -1);
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const EvalPlan::Owner& o = plan.owners[g];
    const TaskPlan& tp = plan.tasks[o.task];
    window[o.task] = last_doc[o.task] == o.doc ? window[o.task] + 1 : 0;
    last_doc[o.task] = o.doc;
    for (size_t i = 0; i < plan.groups[g].size(); ++i) {
      nlohmann::ordered_json j = {
          {"task", tp.task.spec.name}, {"doc_id", o.doc}, {"n-shot", tp.num_fewshot}};
      const bool rolling = tp.task.spec.type == OutputType::kRollingLoglikelihood;
      j["index"] = rolling ? (size_t)window[o.task] : i;
      if (!rolling) {
        j["context"] = tp.strings[o.doc][i].context;
        j["continuation"] = tp.strings[o.doc][i].continuation;
      }
      j["context_tokens"] = plan.groups[g][i].context;
      j["continuation_tokens"] = plan.groups[g][i].continuation;
      j["logprob"] = scores[g][i].logprob;
      j["is_greedy"] = scores[g][i].greedy;
      f << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  }
}

}  // namespace trident::evaluation
