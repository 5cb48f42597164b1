#include "evaluation/scorer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>

namespace trident::evaluation {

PreparedRequest prepare_request(const TokenRequest& r, int max_length) {
  std::vector<int> seq = r.context;
  seq.insert(seq.end(), r.continuation.begin(), r.continuation.end());
  if ((long)seq.size() > (long)max_length + 1) seq.erase(seq.begin(), seq.end() - (max_length + 1));
  PreparedRequest p;
  p.input.assign(seq.begin(), seq.end() - 1);
  const size_t n = std::min(r.continuation.size(), p.input.size());
  p.targets.assign(seq.end() - (long)n, seq.end());
  return p;
}

namespace {

// A run of tokens fed to one slot from position `start`; rows from `first_scored` on predict
// `targets` (the request's score), earlier rows only fill the cache.
struct Pass {
  int start = 0;
  std::vector<int> tokens;
  int first_scored = 0;
  std::vector<int> targets;
  int request = -1;  // -1: a shared prefix
};

struct Job {
  size_t group = 0;
  std::vector<int> requests;  // indices in the group
  std::vector<Pass> passes;
  size_t pass = 0;
  int offset = 0;
};

Job make_job(size_t group, const std::vector<PreparedRequest>& prepared,
             const std::vector<int>& requests, bool share) {
  Job job;
  job.group = group;
  job.requests = requests;
  size_t shared = 0;
  if (share && requests.size() > 1) {
    shared = std::numeric_limits<size_t>::max();
    const std::vector<int>& a = prepared[requests[0]].input;
    for (int r : requests) {
      const PreparedRequest& p = prepared[r];
      size_t common = 0;
      while (common < a.size() && common < p.input.size() && a[common] == p.input[common]) ++common;
      shared = std::min({shared, common, p.input.size() - p.targets.size()});
    }
  }
  if (shared > 0)
    job.passes.push_back({0,
                          std::vector<int>(prepared[requests[0]].input.begin(),
                                           prepared[requests[0]].input.begin() + shared),
                          (int)shared,
                          {},
                          -1});
  for (size_t k = 0; k < requests.size(); ++k) {
    const PreparedRequest& p = prepared[requests[k]];
    Pass pass;
    pass.start = (int)shared;
    pass.tokens.assign(p.input.begin() + (long)shared, p.input.end());
    pass.first_scored = (int)(p.input.size() - p.targets.size() - shared);
    pass.targets = p.targets;
    pass.request = (int)k;
    job.passes.push_back(std::move(pass));
  }
  return job;
}

struct RowResult {
  double logprob;
  bool greedy;
};

RowResult score_row(const float* logits, int vocab, int target) {
  float best = logits[0];
  int arg = 0;
  for (int v = 1; v < vocab; ++v)
    if (logits[v] > best) best = logits[v], arg = v;
  double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(logits[v] - best);  // float exp, double sum
  return {(double)logits[target] - best - std::log(sum), arg == target};
}

// The jobs of every group: one per group when its requests share their context, else one
// per request.
std::deque<Job> make_jobs(const std::vector<std::vector<PreparedRequest>>& prepared, bool share) {
  std::deque<Job> queue;
  for (size_t g = 0; g < prepared.size(); ++g) {
    if (prepared[g].empty()) continue;
    if (share) {
      std::vector<int> all(prepared[g].size());
      for (size_t k = 0; k < all.size(); ++k) all[k] = (int)k;
      queue.push_back(make_job(g, prepared[g], all, true));
    } else {
      for (size_t k = 0; k < prepared[g].size(); ++k)
        queue.push_back(make_job(g, prepared[g], {(int)k}, false));
    }
  }
  return queue;
}

}  // namespace

EngineScorer::EngineScorer(generation::InferenceModel& model, bool share_context)
    : model_(model), share_(share_context) {}

std::vector<std::vector<Score>> EngineScorer::score(const std::vector<Group>& groups) {
  const auto started = std::chrono::steady_clock::now();
  const int L = model_.max_sequence(), vocab = model_.vocab();
  std::vector<std::vector<Score>> out(groups.size());
  std::vector<std::vector<PreparedRequest>> prepared(groups.size());
  const long requests_before = stats_.requests;
  for (size_t g = 0; g < groups.size(); ++g) {
    out[g].assign(groups[g].size(), Score{});
    for (const TokenRequest& r : groups[g]) {
      prepared[g].push_back(prepare_request(r, L));
      stats_.requests += 1;
      stats_.request_tokens += (long)prepared[g].back().input.size();
    }
  }
  std::deque<Job> queue = make_jobs(prepared, share_);
  const long total = stats_.requests - requests_before;
  long done = 0;  // requests whose every pass has run
  std::vector<std::optional<Job>> slots(model_.max_batch());
  struct Piece {
    int slot, offset, count, rows;
  };
  struct Row {
    const float* logits;
    int target;
    Job* job;
    int request;
  };
  for (;;) {
    std::vector<generation::Segment> segments;
    std::vector<Piece> pieces;
    int budget = model_.max_step_tokens(), row_budget = model_.max_logit_rows();
    for (int s = 0; s < (int)slots.size() && budget > 0; ++s) {
      if (!slots[s] && !queue.empty()) {
        slots[s] = std::move(queue.front());
        queue.pop_front();
      }
      if (!slots[s]) continue;
      Job& job = *slots[s];
      const Pass& pass = job.passes[job.pass];
      const int o = job.offset;
      int n = std::min((int)pass.tokens.size() - o, budget);
      int rows = std::max(0, o + n - std::max(o, pass.first_scored));
      if (rows > row_budget) {
        n = std::max(0, pass.first_scored - o) + row_budget;
        rows = row_budget;
      }
      if (n <= 0) continue;
      segments.push_back({s, pass.start + o,
                          std::vector<int>(pass.tokens.begin() + o, pass.tokens.begin() + o + n),
                          rows});
      pieces.push_back({s, o, n, rows});
      budget -= n, row_budget -= rows;
      stats_.fed_tokens += n;
    }
    if (segments.empty()) break;
    const float* logits = model_.step(segments);
    ++stats_.steps;
    std::vector<Row> rows;
    for (const Piece& p : pieces) {
      Job& job = *slots[p.slot];
      const Pass& pass = job.passes[job.pass];
      for (int r = 0; r < p.rows; ++r) {
        const int position = p.offset + p.count - p.rows + r;
        rows.push_back({logits, pass.targets[position - pass.first_scored], &job, pass.request});
        logits += vocab;
      }
    }
    std::vector<RowResult> results(rows.size());
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)rows.size(); ++i)
      results[i] = score_row(rows[i].logits, vocab, rows[i].target);
    // Summed in position order, one request at a time: the same sums whatever the batching.
    for (size_t i = 0; i < rows.size(); ++i) {
      Score& score = out[rows[i].job->group][rows[i].job->requests[rows[i].request]];
      score.logprob += results[i].logprob;
      score.greedy = score.greedy && results[i].greedy;
    }
    for (const Piece& p : pieces) {
      Job& job = *slots[p.slot];
      job.offset += p.count;
      if (job.offset == (int)job.passes[job.pass].tokens.size()) {
        job.offset = 0;
        if (++job.pass == job.passes.size())
          done += (long)job.requests.size(), slots[p.slot].reset();
      }
    }
    if (progress_) progress_(done, total);
  }
  stats_.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

}  // namespace trident::evaluation
