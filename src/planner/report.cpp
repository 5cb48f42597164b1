#include "planner/report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "context_parallel/rules.h"
#include "planner/paper_model.h"

namespace trident::planner {

namespace {

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

std::string seconds_text(double s) {
  return s >= 1      ? format("%.2f s", s)
         : s >= 1e-3 ? format("%.1f ms", s * 1e3)
                     : format("%.0f us", s * 1e6);
}

// The shares of the iteration, largest first: "gemm 71%, bubble 9%, kernels 8%, ...".
std::string where_time_goes(const TimeBreakdown& t) {
  std::vector<std::pair<double, const char*>> parts = {
      {t.compute, "gemm"},   {t.other_kernels, "kernels"}, {t.bubble, "bubble"},
      {t.tensor_comm, "tp"}, {t.pipeline_comm, "pp"},      {t.data_comm, "dp"},
      {t.expert_comm, "ep"}, {t.context_comm, "cp"},       {t.optimizer, "optimizer"}};
  std::stable_sort(parts.begin(), parts.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [value, name] : parts)
    if (value / t.total() >= 0.005)
      out += (out.empty() ? "" : ", ") + std::string(name) +
             format(" %.0f%%", 100 * value / t.total());
  return out;
}

// "none", "zero-1", "zero-2", "zero-3".
std::string sharding_column(data_parallel::ShardingStrategy s) {
  const std::string name = sharding_short_name(s);
  return name.empty() ? "none" : name;
}

std::string bytes_text(double bytes) {
  return bytes >= 1e9 ? format("%.2f GB", bytes / 1e9) : format("%.1f MB", bytes / 1e6);
}

}  // namespace

void print_plan_table(std::ostream& os, const std::vector<Prediction>& plans, size_t top) {
  char line[512];
  std::snprintf(line, sizeof line,
                "%4s  %3s %3s %3s %4s %3s %3s %-9s %-8s %-3s %-3s  %10s %8s %6s %10s %7s  %s\n",
                "#", "t", "c", "p", "d", "b", "v", "recompute", "sharding", "sp", "zb", "time/iter",
                "TFLOP/s", "%peak", "mem/dev", "bubble", "where the time goes");
  os << line;
  for (size_t i = 0; i < std::min(top, plans.size()); ++i) {
    const Prediction& p = plans[i];
    const Layout& l = p.layout;
    std::snprintf(
        line, sizeof line,
        "%4zu  %3d %3d %3d %4d %3d %3d %-9s %-8s %-3s %-3s  %10s %8.3g %5.1f%% %6.2f GiB %6.1f%%  "
        "%s\n",
        i + 1, l.tensor, l.context, l.pipeline, l.data, l.micro_batch, l.virtual_stages,
        recompute_name(l.recompute).c_str(), sharding_column(l.sharding).c_str(),
        l.sequence_parallel ? "yes" : "no", l.zero_bubble ? "yes" : "no",
        seconds_text(p.time.total()).c_str(), p.tflops_per_device, 100 * p.peak_fraction,
        p.memory.total() / (1L << 30), 100 * p.bubble_fraction, where_time_goes(p.time).c_str());
    os << line;
  }
}

void print_rank_mapping(std::ostream& os, const Layout& l, const Cluster& c) {
  const long n = l.devices(), node = c.devices_per_node;
  const long nodes = (n + node - 1) / node;
  os << "rank-to-node mapping (Megatron's order: tensor ranks adjacent, then context, then data, "
        "then pipeline; "
     << nodes << " node" << (nodes > 1 ? "s" : "") << " of " << node << "):\n";
  auto range = [](const char* what, long a, long b) {
    std::string s = what;
    s += a == b ? " " : "s ";
    s += std::to_string(a);
    if (a != b) s += '-' + std::to_string(b);
    return s;
  };

  auto describe = [&](long k) {
    const long first = k * node, last = std::min(n, first + node) - 1;
    auto stage = [&](long r) { return r / ((long)l.tensor * l.replicas()); };
    auto replica = [&](long r) { return r / ((long)l.tensor * l.context) % l.data; };
    return "  node " + std::to_string(k) + ": ranks " + std::to_string(first) + "-" +
           std::to_string(last) + " = " + range("stage", stage(first), stage(last)) + ", " +
           range("replica", replica(first), replica(last)) + "\n";
  };
  for (long k = 0; k < std::min(nodes, 3L); ++k) os << describe(k);
  if (nodes > 4) os << "  ...\n";
  if (nodes > 3) os << describe(nodes - 1);
  const long tp_dp = (long)l.tensor * l.replicas();
  const bool dp_inside = tp_dp <= node;
  const char* pp_text = l.pipeline == 1 ? "there is one stage"
                        : n <= node     ? "pipeline neighbours share a node"
                        : tp_dp < node  ? "pipeline neighbours share a node except across node "
                                          "boundaries"
                                        : "pipeline neighbours are on different nodes";
  os << "  tensor groups of " << l.tensor << " stay inside a node; ";
  if (l.context > 1)
    os << "context-parallel groups of " << l.context
       << ((long)l.tensor * l.context <= node ? " stay inside a node" : " cross nodes") << "; ";
  os << "data-parallel groups of " << l.data << (dp_inside ? " stay inside a node" : " cross nodes")
     << "; " << pp_text << "\n";
}

void print_training_time(std::ostream& os, const Prediction& best, const Workload& w,
                         double tokens) {
  const ModelConfig& m = w.model;
  GptShape shape{m.num_layers, m.hidden_size, m.padded_vocab_size(best.layout.tensor),
                 m.seq_length};
  const double P = paper_parameter_count(shape), day = 86400;
  const double paper = paper_training_seconds(tokens, P, (double)best.layout.devices(),
                                              best.tflops_per_device * 1e12);
  const double iterations = tokens / ((double)w.global_batch * m.seq_length);
  const double own = iterations * best.time.total();
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "training %.3g tokens (%.0f iterations of %ld x %d tokens): %.1f days by the "
                "paper's 8TP/(nX) (P = %.4g, n = %ld, X = %.3g TFLOP/s), %.1f days by the model "
                "(iterations x %s)\n",
                tokens, iterations, w.global_batch, m.seq_length, paper / day, P,
                best.layout.devices(), best.tflops_per_device, own / day,
                seconds_text(best.time.total()).c_str());
  os << buf;
  if (best.layout.recompute != Recompute::kFull)
    os << "  (the paper's 8TP counts the FLOPs of full recomputation; this plan does not "
          "recompute whole layers, so it runs about 6TP and the paper's estimate is high)\n";
}

void print_breakdown(std::ostream& os, const Prediction& p) {
  const TimeBreakdown& t = p.time;
  const MemoryBreakdown& m = p.memory;
  const double gib = 1L << 30;
  std::string expert =
      t.expert_comm > 0 ? " + expert all-to-alls " + seconds_text(t.expert_comm) : "";
  if (p.layout.context > 1)
    expert += " + exposed context-parallel attention traffic " + seconds_text(t.context_comm) +
              " (" + context_parallel::cp_comm_type_name(p.layout.cp_comm_type) + ": " +
              bytes_text(p.context_bytes) + " sent per rank)";
  char buf[1400];
  std::snprintf(
      buf, sizeof buf,
      "best plan, %s:\n"
      "  time per iteration %s = matrix products %s + attention core and element-wise "
      "kernels %s + tensor-parallel collectives %s%s + "
      "pipeline sends %s + bubble %s (%.1f%% of the schedule, simulated) + exposed "
      "data-parallel collectives %s (%s: %s sent per rank, %s hidden under backward/forward) + "
      "optimizer %s\n"
      "  memory per device (stage %d) %.2f GiB = weights %.2f + gradients %.2f + Adam "
      "moments %.2f + activations %.2f + scratch %.2f + communication %.2f + runtime %.2f GiB\n",
      p.layout.describe().c_str(), seconds_text(t.total()).c_str(), seconds_text(t.compute).c_str(),
      seconds_text(t.other_kernels).c_str(), seconds_text(t.tensor_comm).c_str(), expert.c_str(),
      seconds_text(t.pipeline_comm).c_str(), seconds_text(t.bubble).c_str(),
      100 * p.bubble_fraction, seconds_text(t.data_comm).c_str(),
      data_parallel::sharding_strategy_name(p.layout.sharding),
      bytes_text(p.data_parallel_bytes).c_str(), seconds_text(t.data_comm_hidden).c_str(),
      seconds_text(t.optimizer).c_str(), m.stage, m.total() / gib, m.weights / gib,
      m.gradients / gib, m.optimizer / gib, m.activations / gib, m.scratch / gib,
      m.communication / gib, m.runtime / gib);
  os << buf;
  if (p.layout.pipeline > 1) {
    os << "  pipeline split (training's without a split flag): layers per "
       << (p.layout.virtual_stages > 1 ? "virtual " : "") << "stage";
    for (int n : p.split) os << " " << n;
    os << "\n";
  }
}

std::string plans_json(const std::vector<Prediction>& plans, size_t top) {
  nlohmann::json out = {{"plans", nlohmann::json::array()}};
  for (size_t i = 0; i < std::min(top, plans.size()); ++i) {
    const Prediction& p = plans[i];
    out["plans"].push_back(
        {{"tensor", p.layout.tensor},
         {"context", p.layout.context},
         {"cp_comm_type", context_parallel::cp_comm_type_name(p.layout.cp_comm_type)},
         {"context_parallel_bytes", p.context_bytes},
         {"context_parallel_exposed_s", p.time.context_comm},
         {"pipeline", p.layout.pipeline},
         {"data", p.layout.data},
         {"micro_batch", p.layout.micro_batch},
         {"virtual", p.layout.virtual_stages},
         {"recompute", recompute_name(p.layout.recompute)},
         {"distributed_optimizer", p.layout.distributed_optimizer()},
         {"data_parallel_sharding_strategy",
          data_parallel::sharding_strategy_name(p.layout.sharding)},
         {"data_parallel_bytes", p.data_parallel_bytes},
         {"sequence_parallel", p.layout.sequence_parallel},
         {"expert_model_parallel_size", p.layout.expert},
         {"expert_all_to_all_s", p.time.expert_comm},
         {"pipeline_schedule", pipeline_parallel::schedule_name(p.layout.schedule())},
         {"time_per_iteration_s", p.time.total()},
         {"tflops_per_device", p.tflops_per_device},
         {"memory_per_device_gib", p.memory.total() / (1L << 30)},
         {"bubble", p.bubble_fraction}});
  }
  return out.dump(2);
}

}  // namespace trident::planner
