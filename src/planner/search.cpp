#include "planner/search.h"

#include <algorithm>
#include <cstdio>

#include "context_parallel/rules.h"

namespace trident::planner {

namespace {

std::vector<int> divisors(long n, long at_most) {
  std::vector<int> out;
  for (long k = 1; k <= std::min(n, at_most); ++k)
    if (n % k == 0) out.push_back((int)k);
  return out;
}

std::vector<int> choices(int fixed, std::vector<int> all) {
  if (fixed <= 0) return all;
  return std::find(all.begin(), all.end(), fixed) != all.end() ? std::vector<int>{fixed}
                                                               : std::vector<int>{};
}

// Tensor sizes that divide a node (so a tensor group never crosses one) and the heads.
std::vector<int> tensor_sizes(const IterationModel& model, const SearchOptions& o) {
  std::vector<int> out;
  const int heads = model.workload().model.num_attention_heads;
  for (int t : divisors(model.cluster().devices_per_node, o.num_devices))
    if (heads % t == 0 && (o.tensor <= 0 || o.tensor == t)) out.push_back(t);
  return out;
}

std::vector<Recompute> recompute_choices(const SearchOptions& o) {
  if (o.recompute) return {*o.recompute};
  return {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
}

std::vector<data_parallel::ShardingStrategy> sharding_choices(const SearchOptions& o, int d) {
  using data_parallel::ShardingStrategy;
  if (o.sharding) return {*o.sharding};
  if (d < 2) return {ShardingStrategy::kNoShard};
  return {ShardingStrategy::kNoShard, ShardingStrategy::kOptim, ShardingStrategy::kOptimGrads,
          ShardingStrategy::kOptimGradsParams};
}

// An on/off dimension: the user's setting, else both where it can matter (off elsewhere).
std::vector<bool> switch_choices(const std::optional<bool>& fixed, bool can_matter) {
  if (fixed) return {*fixed};
  return can_matter ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

// Expert-parallel sizes: 1 for a dense model; for an MoE model the given one, else every
// divisor of d that divides the experts.
std::vector<int> expert_choices(const SearchOptions& o, const ModelConfig& m, int d) {
  if (!m.moe.enabled()) return {1};
  std::vector<int> out;
  for (int ep : choices(o.expert, divisors(d, d)))
    if (m.moe.num_experts % ep == 0) out.push_back(ep);
  return out;
}

// Every layout of t x c x p ranks per replica and d replicas.
template <typename Visit>
void for_each_replica_layout(const SearchOptions& o, const Workload& w, int t, int c, int p, int d,
                             Visit visit) {
  const int layers = w.model.num_layers;
  if (w.global_batch % d) return;
  for (int b : choices(o.micro_batch, divisors(w.global_batch / d, o.max_micro_batch)))
    for (int v : divisors(layers / p, layers)) {
      if (v > 1 && p == 1) continue;
      if (o.layers_per_virtual_stage > 0 && layers / p != v * o.layers_per_virtual_stage) continue;
      for (Recompute r : recompute_choices(o))
        // The distributed optimizer and ZeRO shard over the d x c replicas.
        for (data_parallel::ShardingStrategy shard : sharding_choices(o, d * c))
          for (bool sp : switch_choices(o.sequence_parallel, t > 1))
            for (bool zb : switch_choices(o.zero_bubble, p > 1 && v == 1))
              for (int ep : expert_choices(o, w.model, d)) {
                Layout l{t, p, d, b, v, r, shard, sp, zb, ep, c, o.cp_comm_type};
                if (layout_violations(l, w).empty()) visit(l);
              }
    }
}

// Context-parallel sizes for t: the given one, else 1 and (when `with_cp`) every divisor of
// n / t whose split the sequence allows (the other rules are layout_violations').
std::vector<int> context_choices(const SearchOptions& o, const ModelConfig& m, int t,
                                 bool with_cp) {
  if (o.context > 0) return {o.context};
  std::vector<int> out;
  for (int c : divisors(o.num_devices / t, o.num_devices / t))
    if (c == 1 || (with_cp && m.seq_length % (2 * c) == 0)) out.push_back(c);
  return out;
}

template <typename Visit>
void for_each_layout(const IterationModel& model, const SearchOptions& o, bool with_cp,
                     Visit visit) {
  const Workload& w = model.workload();
  const int layers = w.model.num_layers;
  for (int t : tensor_sizes(model, o))
    for (int c : context_choices(o, w.model, t, with_cp))
      for (int p : choices(o.pipeline, divisors(layers, o.num_devices / ((long)t * c)))) {
        if (o.num_devices % ((long)t * c * p)) continue;
        const int d = (int)(o.num_devices / ((long)t * c * p));
        for_each_replica_layout(o, w, t, c, p, d, visit);
      }
}

// Device counts above n to try, smallest first: every count up to a node, then whole nodes
// (one by one up to 4 nodes, then doubling, so the search stays quick on big clusters).
std::vector<long> larger_device_counts(long n, const Cluster& c) {
  std::vector<long> out;
  const long node = c.devices_per_node;
  for (long k = n + 1; k < node && k <= c.num_devices(); ++k) out.push_back(k);
  for (long nodes = 1; nodes <= c.nodes; nodes = nodes < 4 ? nodes + 1 : nodes * 2)
    if (nodes * node > n) out.push_back(nodes * node);
  if (out.empty() || out.back() != c.num_devices()) {
    if (c.num_devices() > n) out.push_back(c.num_devices());
  }
  return out;
}

// The layouts of `o` (c > 1 only when `with_cp` or given), memory first: only those that fit
// are simulated and timed.
void search_into(IterationModel& model, const SearchOptions& o, bool with_cp,
                 SearchResult& result) {
  const double capacity = model.cluster().device.memory_gib * (1L << 30);
  for_each_layout(model, o, with_cp, [&](const Layout& l) {
    ++result.evaluated;
    Prediction p;
    p.layout = l;
    p.memory = model.device_memory(l);
    if (p.memory.total() > capacity) {
      result.over_memory.push_back(p);
      return;
    }
    ++result.timed;
    result.fitting.push_back(model.predict(l));
  });
}

}  // namespace

SearchResult search_layouts(IterationModel& model, const SearchOptions& o) {
  SearchResult result;
  // Short sequences: c > 1 only when nothing fits without it (kContextSearchSeq).
  const bool long_sequence = model.workload().model.seq_length >= kContextSearchSeq;
  search_into(model, o, long_sequence, result);
  if (result.fitting.empty() && !long_sequence && o.context == 0) {
    result = {};
    search_into(model, o, true, result);
  }
  std::stable_sort(result.fitting.begin(), result.fitting.end(),
                   [](const auto& a, const auto& b) { return a.time.total() < b.time.total(); });
  std::stable_sort(
      result.over_memory.begin(), result.over_memory.end(),
      [](const auto& a, const auto& b) { return a.memory.total() < b.memory.total(); });
  return result;
}

std::vector<std::string> request_violations(const IterationModel& model, const SearchOptions& o) {
  std::vector<std::string> errors;
  const Cluster& c = model.cluster();
  const int heads = model.workload().model.num_attention_heads;
  if (o.num_devices < 1 || o.num_devices > c.num_devices())
    errors.push_back("--num-devices (" + std::to_string(o.num_devices) + ") must be in [1, " +
                     std::to_string(c.num_devices()) + "], the devices of " + c.source);
  if (o.tensor > c.devices_per_node)
    errors.push_back("--tensor-model-parallel-size (" + std::to_string(o.tensor) +
                     ") must fit one node (" + std::to_string(c.devices_per_node) +
                     " devices): tensor parallelism stays inside a node");
  else if (o.tensor > 0 && c.devices_per_node % o.tensor)
    errors.push_back("--tensor-model-parallel-size (" + std::to_string(o.tensor) +
                     ") must divide a node's " + std::to_string(c.devices_per_node) +
                     " devices, or some tensor groups would cross nodes");
  if (o.tensor > 0 && heads % o.tensor) {
    std::string fits;
    for (int t : divisors(c.devices_per_node, c.devices_per_node))
      if (heads % t == 0) fits += (fits.empty() ? "" : ", ") + std::to_string(t);
    errors.push_back("--num-attention-heads (" + std::to_string(heads) +
                     ") is not divisible by --tensor-model-parallel-size (" +
                     std::to_string(o.tensor) +
                     "); sizes that divide both the heads and a node: " + fits);
  }
  auto at_least_one = [&](long value, const char* flag, long unset = 0) {
    if (value < 1 && value != unset)
      errors.push_back(std::string(flag) + " must be >= 1 (got " + std::to_string(value) + ")");
  };
  at_least_one(o.tensor, "--tensor-model-parallel-size");
  at_least_one(o.pipeline, "--pipeline-model-parallel-size");
  at_least_one(o.micro_batch, "--micro-batch-size");
  at_least_one(o.layers_per_virtual_stage, "--num-layers-per-virtual-pipeline-stage");
  at_least_one(o.max_micro_batch, "--max-micro-batch-size", -1);
  at_least_one(o.expert, "--expert-model-parallel-size");
  at_least_one(o.context, "--context-parallel-size");
  const MoeConfig& moe = model.workload().model.moe;
  if (o.expert > 1 && !moe.enabled())
    errors.push_back("--expert-model-parallel-size needs --num-experts");
  else if (o.expert > 1 && moe.num_experts % o.expert)
    errors.push_back("--num-experts (" + std::to_string(moe.num_experts) +
                     ") must be divisible by --expert-model-parallel-size (" +
                     std::to_string(o.expert) + ")");
  // A given c against the model (a2a's heads per tensor rank only when t is given too).
  if (o.context > 1)
    context_parallel::check_context_parallel(model.workload().model, o.tensor, o.context,
                                             o.cp_comm_type, errors);
  const long fixed = (long)std::max(o.tensor, 1) * std::max(o.context, 1) * std::max(o.pipeline, 1);
  if (o.num_devices >= 1 && o.num_devices % fixed)
    errors.push_back("--num-devices (" + std::to_string(o.num_devices) +
                     ") must be divisible by t x c x p (" + std::to_string(fixed) + ")");
  return errors;
}

namespace {

std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1L << 30));
  return buf;
}

std::string why_nothing(const IterationModel& model, const SearchOptions& o,
                        const SearchResult& result) {
  if (result.evaluated == 0)
    return "no layout of " + std::to_string(o.num_devices) +
           " devices satisfies the divisibility rules (layers by p, global batch by b x d, "
           "heads by t, micro-batches by p when interleaved)";
  const Prediction& nearest = result.over_memory.front();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f GiB", model.cluster().device.memory_gib);
  return "nothing fits in " + std::string(buf) + " per device: of " +
         std::to_string(result.evaluated) + " valid layouts of " + std::to_string(o.num_devices) +
         " devices the smallest, " + nearest.layout.describe() + ", needs " +
         gib_text(nearest.memory.total());
}

// The heads allow fewer tensor sizes than a node would: say which.
std::string heads_note(const IterationModel& model) {
  const int heads = model.workload().model.num_attention_heads;
  const std::vector<int> node = divisors(model.cluster().devices_per_node, 1 << 30);
  std::string allowed;
  int count = 0;
  for (int t : node)
    if (heads % t == 0) allowed += (count++ ? ", " : "") + std::to_string(t);
  if (count == (int)node.size()) return "";
  return "; --num-attention-heads (" + std::to_string(heads) + ") allows only t = " + allowed +
         " of a node's " + std::to_string(model.cluster().devices_per_node) + " devices";
}

std::string fitting_text(long n, const Prediction& p, const std::string& how) {
  return "; " + how + " it would fit on " + std::to_string(n) + " devices (--num-devices " +
         std::to_string(n) + "): " + p.layout.describe() + ", " + gib_text(p.memory.total()) +
         " per device (one replica takes " +
         std::to_string((long)p.layout.tensor * p.layout.context * p.layout.pipeline) + ")";
}

}  // namespace

std::string explain_no_fit(IterationModel& model, const SearchOptions& o,
                           const SearchResult& result) {
  std::string why = why_nothing(model, o, result) + heads_note(model);
  // A dimension the user fixed may be what rules everything out.
  SearchOptions free = o;
  free.tensor = free.pipeline = free.micro_batch = free.layers_per_virtual_stage = free.expert = 0;
  free.context = 0;
  free.recompute.reset();
  free.sharding.reset();
  const bool fixed =
      free.tensor != o.tensor || free.pipeline != o.pipeline || free.micro_batch != o.micro_batch ||
      free.layers_per_virtual_stage != o.layers_per_virtual_stage || free.expert != o.expert ||
      free.context != o.context || o.recompute || o.sharding;
  if (fixed) {
    SearchResult r = search_layouts(model, free);
    if (!r.fitting.empty())
      return why +
             fitting_text(o.num_devices, r.fitting.front(), "without the layout flags given,");
  }
  // Otherwise the fewest devices that fit.
  for (long n : larger_device_counts(o.num_devices, model.cluster())) {
    SearchOptions more = o;
    more.num_devices = n;
    SearchResult r = search_layouts(model, more);
    if (!r.fitting.empty())
      return why + fitting_text(n, r.fitting.front(), "fewer devices than it needs:");
  }
  return why + "; no device count of " + model.cluster().source +
         " fits it (fewer layers, a smaller hidden size, or devices with more memory would)";
}

}  // namespace trident::planner
