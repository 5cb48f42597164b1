#include "distributed/process_grid.h"

#include <ostream>

namespace trident::distributed {

ProcessGrid::ProcessGrid(int world, int tensor, int pipeline, int expert, int expert_tensor,
                         int context)
    : world_(world),
      t_(tensor),
      p_(pipeline),
      c_(context),
      d_(world / (tensor * context * pipeline)),
      ep_(expert),
      etp_(expert_tensor > 0 ? expert_tensor : tensor) {}

GridCoords ProcessGrid::coords(int rank) const {
  const int below_tp = rank / t_;
  return {rank % t_, below_tp / c_ % d_, below_tp / (c_ * d_), below_tp % c_};
}

std::string ProcessGrid::rank_label(int rank) const {
  const GridCoords c = coords(rank);
  return "rank " + std::to_string(rank) + " (t " + std::to_string(c.tp) + ", c " +
         std::to_string(c.cp) + ", d " + std::to_string(c.dp) + ", p " + std::to_string(c.pp) + ")";
}

std::vector<std::string> ProcessGrid::rank_labels() const {
  std::vector<std::string> labels;
  for (int r = 0; r < world_; ++r) labels.push_back(rank_label(r));
  return labels;
}

std::vector<int> ProcessGrid::tensor_group(int rank) const {
  GridCoords c = coords(rank);
  std::vector<int> g;
  for (int i = 0; i < t_; ++i) g.push_back(rank_of({i, c.dp, c.pp, c.cp}));
  return g;
}

std::vector<int> ProcessGrid::data_group(int rank) const {
  GridCoords c = coords(rank);
  std::vector<int> g;
  for (int i = 0; i < d_; ++i) g.push_back(rank_of({c.tp, i, c.pp, c.cp}));
  return g;
}

std::vector<int> ProcessGrid::context_group(int rank) const {
  GridCoords c = coords(rank);
  std::vector<int> g;
  for (int i = 0; i < c_; ++i) g.push_back(rank_of({c.tp, c.dp, c.pp, i}));
  return g;
}

std::vector<int> ProcessGrid::data_context_group(int rank) const {
  GridCoords c = coords(rank);
  std::vector<int> g;
  for (int dp = 0; dp < d_; ++dp)
    for (int cp = 0; cp < c_; ++cp) g.push_back(rank_of({c.tp, dp, c.pp, cp}));
  return g;
}

std::vector<int> ProcessGrid::pipeline_group(int rank) const {
  GridCoords c = coords(rank);
  std::vector<int> g;
  for (int i = 0; i < p_; ++i) g.push_back(rank_of({c.tp, c.dp, i, c.cp}));
  return g;
}

std::vector<int> ProcessGrid::expert_group(int rank) const {
  const int etp = stage_position(rank) % etp_, edp = expert_data_rank(rank);
  std::vector<int> g;
  for (int e = 0; e < ep_; ++e) g.push_back(expert_grid_rank(etp, e, edp, coords(rank).pp));
  return g;
}

std::vector<int> ProcessGrid::expert_data_group(int rank) const {
  const int etp = stage_position(rank) % etp_, ep = expert_rank(rank);
  std::vector<int> g;
  for (int x = 0; x < expert_data_size(); ++x)
    g.push_back(expert_grid_rank(etp, ep, x, coords(rank).pp));
  return g;
}

int ProcessGrid::tensor_group_index(int rank) const {
  GridCoords c = coords(rank);
  return c.cp + c_ * (c.dp + d_ * c.pp);
}

int ProcessGrid::data_group_index(int rank) const {
  GridCoords c = coords(rank);
  return c.tp + t_ * (c.cp + c_ * c.pp);
}

int ProcessGrid::pipeline_group_index(int rank) const {
  GridCoords c = coords(rank);
  return c.tp + t_ * (c.cp + c_ * c.dp);
}

int ProcessGrid::context_group_index(int rank) const {
  GridCoords c = coords(rank);
  return c.tp + t_ * (c.dp + d_ * c.pp);
}

int ProcessGrid::data_context_group_index(int rank) const {
  GridCoords c = coords(rank);
  return c.tp + t_ * c.pp;
}

int ProcessGrid::expert_group_index(int rank) const {
  const int etp = stage_position(rank) % etp_;
  return etp + etp_ * (expert_data_rank(rank) + expert_data_size() * coords(rank).pp);
}

int ProcessGrid::expert_data_group_index(int rank) const {
  const int etp = stage_position(rank) % etp_;
  return etp + etp_ * (expert_rank(rank) + ep_ * coords(rank).pp);
}

namespace {
void print_groups(std::ostream& os, const char* kind, int count,
                  const std::vector<std::vector<int>>& groups) {
  os << "  " << kind << " groups (" << count << "):";
  for (const auto& g : groups) {
    os << " [";
    for (size_t i = 0; i < g.size(); ++i) os << (i ? "," : "") << g[i];
    os << "]";
  }
  os << "\n";
}
}  // namespace

void ProcessGrid::print(std::ostream& os, const std::vector<std::string>& node_of_rank) const {
  if (c_ > 1)
    os << "process grid: tensor " << t_ << " x context " << c_ << " x data " << d_ << " x pipeline "
       << p_ << " (rank = tp + t * (cp + c * (dp + d * pp)))";
  else
    os << "process grid: tensor " << t_ << " x data " << d_ << " x pipeline " << p_
       << " (rank = tp + t * (dp + d * pp))";
  if (ep_ > 1 && etp_ == t_)
    os << ", expert " << ep_ << " x expert-data " << expert_data_size() << " (dp = ep + EP * edp)";
  else if (ep_ > 1)
    os << ", expert tensor " << etp_ << " x expert " << ep_ << " x expert-data "
       << expert_data_size() << " (tp + t * dp = etp + ETP * (ep + EP * edp))";
  os << "\n";
  std::vector<std::vector<int>> tensor, data, pipe, context, data_context;
  for (int r = 0; r < world_; ++r) {
    const GridCoords c = coords(r);
    if (c.tp == 0) tensor.push_back(tensor_group(r));
    if (c.dp == 0) data.push_back(data_group(r));
    if (c.pp == 0) pipe.push_back(pipeline_group(r));
    if (c.cp == 0) context.push_back(context_group(r));
    if (c.cp == 0 && c.dp == 0) data_context.push_back(data_context_group(r));
  }
  print_groups(os, "tensor", (int)tensor.size(), tensor);
  if (c_ > 1) print_groups(os, "context", (int)context.size(), context);
  print_groups(os, "data", (int)data.size(), data);
  if (c_ > 1) print_groups(os, "data x context", (int)data_context.size(), data_context);
  print_groups(os, "pipeline", (int)pipe.size(), pipe);
  if (ep_ > 1) {
    std::vector<std::vector<int>> expert, expert_data;
    for (int r = 0; r < world_; ++r) {
      if (expert_rank(r) == 0) expert.push_back(expert_group(r));
      if (expert_data_rank(r) == 0) expert_data.push_back(expert_data_group(r));
    }
    print_groups(os, "expert", (int)expert.size(), expert);
    print_groups(os, "expert-data", (int)expert_data.size(), expert_data);
  }
  if (node_of_rank.size() == (size_t)world_) {
    os << "  nodes:";
    for (int r = 0; r < world_; ++r) os << " " << r << "@" << node_of_rank[r];
    os << "\n";
    const std::string across = tensor_group_across_nodes(node_of_rank);
    if (!across.empty()) os << "  warning: " << across << "; tensor parallelism wants one node\n";
  }
}

std::string ProcessGrid::tensor_group_across_nodes(
    const std::vector<std::string>& node_of_rank) const {
  if (node_of_rank.size() != (size_t)world_) return "";
  for (int first = 0; first < world_; first += t_) {
    const std::vector<int> g = tensor_group(first);
    for (int r : g)
      if (node_of_rank[r] != node_of_rank[first])
        return "tensor group starting at rank " + std::to_string(first) + " spans nodes (rank " +
               std::to_string(first) + " on " + node_of_rank[first] + ", rank " +
               std::to_string(r) + " on " + node_of_rank[r] + ")";
  }
  return "";
}

}  // namespace trident::distributed
