#pragma once
// The rank grid in Megatron's order (Megatron-Core's RankGenerator, order "tp-cp-ep-dp-pp"):
// tensor-parallel ranks adjacent (fastest), then context parallel, then data parallel, then
// pipeline (slowest), so a tensor-parallel group sits on one node:
//   rank = tp + t * (cp + c * (dp + d * pp))
// Context parallelism (context_parallel/context_parallel.h) adds two groups besides the cp
// group: the cp ranks of a data-parallel replica hold the same weights, so the ranks over which
// replicated weights' gradients are reduced (and the distributed optimizer shards) are the
// d x c ranks of the same (tp, pp): Megatron's data-parallel group "with context parallel".
// The data-parallel group proper (d ranks, same tp, cp and pp) deals the samples.
// Pure data: every rank computes every group the same way, and it can be printed.
// Expert parallelism (EP, MoE) regroups the t x d ranks of each pipeline stage as Megatron's
// expert RankGenerator does (order tp-ep-dp-pp, world = ETP x EP x EDP x p): the position
// i = tp + t * dp of a rank in its stage is (expert tensor rank i % ETP, expert rank
// (i / ETP) % EP, expert-data rank i / (ETP x EP)). With ETP = t (the default) that is
// (tp, dp % EP, dp / EP): an expert group is EP consecutive data-parallel indices of one
// tensor rank. With ETP = 1 the tensor ranks join the expert groups: at t = 2, EP = 2 the
// two tensor ranks of a data-parallel rank are an expert group.
#include <iosfwd>
#include <string>
#include <vector>

namespace trident::distributed {

struct GridCoords {
  int tp = 0, dp = 0, pp = 0, cp = 0;
};

class ProcessGrid {
 public:
  // world must be a multiple of t * c * p, expert_tensor (ETP; 0: t) must divide t and
  // ETP x EP divide t x d (validated before this is built).
  ProcessGrid(int world, int tensor, int pipeline, int expert = 1, int expert_tensor = 0,
              int context = 1);
  int world() const { return world_; }
  int tensor_size() const { return t_; }
  int data_size() const { return d_; }
  int context_size() const { return c_; }
  int pipeline_size() const { return p_; }
  int expert_size() const { return ep_; }
  int expert_tensor_size() const { return etp_; }
  int expert_data_size() const { return t_ * c_ * d_ / (etp_ * ep_); }
  GridCoords coords(int rank) const;
  // "rank 5 (t 1, c 0, d 0, p 1)": how pictures of the run name a rank's row.
  std::string rank_label(int rank) const;
  // rank_label of every rank, in rank order.
  std::vector<std::string> rank_labels() const;
  int rank_of(GridCoords c) const { return c.tp + t_ * (c.cp + c_ * (c.dp + d_ * c.pp)); }
  std::vector<int> tensor_group(int rank) const;
  std::vector<int> data_group(int rank) const;
  std::vector<int> pipeline_group(int rank) const;
  // The c ranks holding the other chunks of the same sequences (same tp, dp, pp), in cp order.
  std::vector<int> context_group(int rank) const;
  // The d x c ranks holding the same weights (same tp, pp), ordered cp + c * dp: Megatron's
  // data-parallel group with context parallel. The data group itself at c = 1.
  std::vector<int> data_context_group(int rank) const;
  // The ranks holding the other experts of this rank's layers (same expert tensor rank,
  // expert-data rank and pp), which its tokens go to and come back from; and those holding
  // the same experts (same expert tensor rank, expert rank and pp), over which the experts'
  // gradients are summed.
  std::vector<int> expert_group(int rank) const;
  std::vector<int> expert_data_group(int rank) const;
  // Which group of that kind a rank is in (the colour for MPI_Comm_split).
  int tensor_group_index(int rank) const;
  int data_group_index(int rank) const;
  int pipeline_group_index(int rank) const;
  int context_group_index(int rank) const;
  int data_context_group_index(int rank) const;
  int expert_group_index(int rank) const;
  int expert_data_group_index(int rank) const;
  // This rank's expert coordinates: its rank in its expert group and its expert-data group.
  int expert_rank(int rank) const { return stage_position(rank) / etp_ % ep_; }
  int expert_data_rank(int rank) const { return stage_position(rank) / (etp_ * ep_); }
  // The t x p ranks of one model copy (one data-parallel replica's cp rank): its index.
  int model_group_index(int rank) const { return coords(rank).cp + c_ * coords(rank).dp; }
  // Ranks per group kind, with node names; warns when a tensor group spans nodes.
  void print(std::ostream& os, const std::vector<std::string>& node_of_rank) const;
  // The first tensor group whose ranks sit on more than one node, described for an error
  // message; empty when every tensor group stays on one node (MT-NLG's mapping: t inside a
  // node, where its all-reduces run over shared memory, d and p across).
  std::string tensor_group_across_nodes(const std::vector<std::string>& node_of_rank) const;

 private:
  // i = tp + t * (cp + c * dp): the rank's place in its pipeline stage, which the expert grid
  // regroups (MoE is refused at c > 1, where EP = 1 leaves one-rank expert groups).
  int stage_position(int rank) const { return rank % (t_ * c_ * d_); }
  // The rank at expert coordinates (expert tensor rank, expert rank, expert-data rank) of
  // stage pp.
  int expert_grid_rank(int etp, int ep, int edp, int pp) const {
    return etp + etp_ * (ep + ep_ * edp) + t_ * c_ * d_ * pp;
  }

  int world_, t_, p_, c_, d_, ep_, etp_;
};

}  // namespace trident::distributed
