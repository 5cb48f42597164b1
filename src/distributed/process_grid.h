#pragma once
// The rank grid in Megatron's order: tensor-parallel ranks adjacent (fastest), then data
// parallel, then pipeline (slowest), so a tensor-parallel group sits on one node:
//   rank = tp + t * (dp + d * pp)
// Pure data: every rank computes every group the same way, and it can be printed.
// Expert parallelism (EP, MoE) splits each data-parallel group once more, as Megatron's
// expert RankGenerator does with ETP = t (order tp-ep-dp-pp): a data-parallel index dp is
// (expert rank dp % EP, expert-data rank dp / EP), so an expert group is EP consecutive
// data-parallel indices and an expert-data group the indices with equal dp % EP.
#include <iosfwd>
#include <string>
#include <vector>

namespace trident::distributed {

struct GridCoords {
  int tp = 0, dp = 0, pp = 0;
};

class ProcessGrid {
 public:
  // world must be a multiple of t * p, and d of expert (validated before this is built).
  ProcessGrid(int world, int tensor, int pipeline, int expert = 1);
  int world() const { return world_; }
  int tensor_size() const { return t_; }
  int data_size() const { return d_; }
  int pipeline_size() const { return p_; }
  int expert_size() const { return ep_; }
  int expert_data_size() const { return d_ / ep_; }
  GridCoords coords(int rank) const;
  int rank_of(GridCoords c) const { return c.tp + t_ * (c.dp + d_ * c.pp); }
  std::vector<int> tensor_group(int rank) const;
  std::vector<int> data_group(int rank) const;
  std::vector<int> pipeline_group(int rank) const;
  // The ranks holding the other experts of this rank's layers (same tp and pp), which its
  // tokens go to and come back from; and those holding the same experts (same tp, pp and
  // dp % EP), over which the experts' gradients are summed.
  std::vector<int> expert_group(int rank) const;
  std::vector<int> expert_data_group(int rank) const;
  // Which group of that kind a rank is in (the colour for MPI_Comm_split).
  int tensor_group_index(int rank) const;
  int data_group_index(int rank) const;
  int pipeline_group_index(int rank) const;
  int expert_group_index(int rank) const;
  int expert_data_group_index(int rank) const;
  // The t x p ranks of one data-parallel replica (one model copy): its data-parallel index.
  int model_group_index(int rank) const { return coords(rank).dp; }
  // Ranks per group kind, with node names; warns when a tensor group spans nodes.
  void print(std::ostream& os, const std::vector<std::string>& node_of_rank) const;
  // The first tensor group whose ranks sit on more than one node, described for an error
  // message; empty when every tensor group stays on one node (MT-NLG's mapping: t inside a
  // node, where its all-reduces run over shared memory, d and p across).
  std::string tensor_group_across_nodes(const std::vector<std::string>& node_of_rank) const;

 private:
  int world_, t_, p_, d_, ep_;
};

}  // namespace trident::distributed
