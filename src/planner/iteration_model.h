#pragma once
// The time and memory of one training iteration of a layout, from first principles and the
// cluster file only (no per-configuration constants):
// - compute: each GEMM's FLOPs on one device at the cluster's size-dependent efficiency,
//   the attention core and the element-wise kernels (src/planner/layer_costs.h);
// - tensor parallelism: the layers' all-reduces (2 forward, 2 backward, 2 more when a
//   layer is recomputed) on the ring model over the node's links;
// - expert parallelism (MoE): each MoE layer's dispatch and combine all-to-alls over the
//   expert group, with the tokens spread evenly over the experts;
// - context parallelism: each rank computes seq / c tokens of every sample (its 1/c of the
//   causal attention), and its attention exchanges keys and values over the cp group
//   (src/planner/context_comm.h: the ring's sends overlapped with the attention tiles);
//   gradients are reduced, and the distributed optimizer and ZeRO shard, over d x c ranks;
// - pipeline parallelism: the boundary sends (1/t of the tensor with scatter/gather, then an
//   all-gather inside the tensor group), and the bubble from simulating trident's own
//   schedule lists (src/pipeline_parallel), not from a formula;
// - data parallelism: the collectives of the layout's sharding strategy, ZeRO-0 to 3
//   (src/planner/sharding.h), less what overlaps with the backward and forward passes;
// - the optimizer: AdamW streams its state through memory once per step;
// - memory: the chunk memory plans trident prints before step 1 (src/model/chunk_memory),
//   with the micro-batches in flight taken from the same schedule lists, every sharding
//   strategy's buffers (ZeRO-3's sharded weights and gathered units included) sized by
//   training's own engine::planned_rank_memory.
#include <map>
#include <tuple>
#include <vector>

#include "engine/rank_layout.h"
#include "model/chunk_memory.h"
#include "planner/cluster.h"
#include "planner/layout.h"
#include "planner/sharding.h"

namespace trident::planner {

struct TimeBreakdown {       // seconds per iteration on the critical (slowest) pipeline stage
  double compute = 0;        // matrix products
  double other_kernels = 0;  // the attention core and the element-wise kernels
  double tensor_comm = 0;
  double expert_comm = 0;   // the MoE dispatch and combine all-to-alls (expert parallelism)
  double context_comm = 0;  // context parallelism's attention traffic, exposed
  double pipeline_comm = 0;
  double bubble = 0;
  double data_comm = 0;         // exposed
  double data_comm_hidden = 0;  // overlapped with backward / forward (not in total)
  double optimizer = 0;
  double total() const {
    return compute + other_kernels + tensor_comm + expert_comm + context_comm + pipeline_comm +
           bubble + data_comm + optimizer;
  }
};

struct MemoryBreakdown {  // bytes on the fullest device (an end stage, or the one with most layers)
  double weights = 0;     // fp32 values and the 16-bit copy
  double gradients = 0;
  double optimizer = 0;  // Adam moments (sharded with the distributed optimizer)
  double activations = 0;
  double scratch = 0;
  double communication = 0;  // pipeline send copies, MPI temporaries (engine/rank_buffers.h)
  double runtime = 0;        // the process itself: code, MPI, the allocator (calibrated)
  int stage = 0;
  double total() const {
    return weights + gradients + optimizer + activations + scratch + communication + runtime;
  }
};

// The parameters of one pipeline rank, and what ZeRO-3 gathers there per micro-batch (its
// chunks' units: the embedding, each layer, the final norm with an untied output layer).
struct StageParameters {
  double floats = 0;
  UnitGathers gathers;
  // Under the distributed optimizer with a tied output layer on a pipeline: the end chunks'
  // gradient bucket holding the word embedding, reduced once after the two stages' sum.
  double held_back_floats = 0;
  // Expert parallelism: the expert buffer (this rank's E/EP experts), reduced over the
  // expert-data group.
  double expert_floats = 0;
};

struct Prediction {
  Layout layout;
  std::vector<int> split;  // layers per virtual stage, as training splits them by default
  TimeBreakdown time;
  MemoryBreakdown memory;
  double bubble_fraction = 0;      // simulated idle / busy time of the schedule
  double data_parallel_bytes = 0;  // sent by each rank per iteration in data parallelism
  double context_bytes = 0;        // sent by each rank per iteration in context parallelism
  double model_flops = 0;          // the paper's FLOPs of one iteration
  double tflops_per_device = 0;
  double peak_fraction = 0;
  bool fits = false;
};

class IterationModel {
 public:
  IterationModel(Cluster cluster, Workload workload);
  // The layout must be valid (layout_violations empty).
  Prediction predict(const Layout& layout);
  MemoryBreakdown device_memory(const Layout& layout);
  // Idle over busy time of the schedule's slowest rank, simulated with backward = ratio x
  // forward (1F1B, or interleaved when v > 1) ...
  double simulated_bubble(int p, int v, int m, double backward_ratio);
  // ... or for any schedule, with its B and W apart for a zero-bubble one (W: weight_ratio x
  // forward, B: backward_ratio x forward). The planner itself simulates each layout with its
  // own chunks' times (the last stage's output layer included).
  double simulated_bubble(const pipeline_parallel::ScheduleConfig& s, double backward_ratio,
                          double weight_ratio);
  // The layout as training builds it (engine/rank_layout.h), so chunk options and a rank's
  // buffers come from the same functions as training's.
  engine::RankLayout rank_layout(const Layout& layout) const;
  // Every buffer pipeline stage `stage`'s ranks hold: one plan per chunk, then the rank's
  // buffers besides them — the plans training prints for such a rank.
  std::vector<MemoryPlan> stage_plans(const Layout& layout, int stage);
  StageParameters stage_parameters(const Layout& layout, int stage);
  const Cluster& cluster() const { return cluster_; }
  const Workload& workload() const { return workload_; }

 private:
  // One micro-batch through one model chunk: its layers, plus the output layer and loss on
  // the last virtual stage.
  struct ChunkTime {
    double forward = 0, backward = 0;              // matrix products
    double other_forward = 0, other_backward = 0;  // attention core, element-wise kernels,
                                                   // weight-gradient accumulation
    double tensor_forward = 0, tensor_backward = 0;
    double pipeline = 0;                               // per direction
    double expert_forward = 0, expert_backward = 0;    // the MoE layers' all-to-alls
    double context_forward = 0, context_backward = 0;  // cp attention traffic, exposed
    double context_bytes = 0;                          // ... sent, both passes
    double weight = 0;  // the layers' weight-gradient products (W of a zero-bubble schedule)
    double forward_total() const {
      return forward + other_forward + tensor_forward + expert_forward + context_forward + pipeline;
    }
    double backward_total() const {
      return backward + other_backward + tensor_backward + expert_backward + context_backward +
             pipeline;
    }
  };
  ChunkTime chunk_time(const Layout& l, int layers, bool post_process) const;
  // Context parallelism's traffic of `layers` dense layers, into ct.
  void add_context_comm(const Layout& l, int layers, ChunkTime& ct) const;
  // Every rank's schedule on the simulated clock, each chunk at its own times: its layers
  // under the split training runs (engine::default_split), the last virtual stage with the
  // output layer (the embedding's gather is too small to count).
  struct PipelineRun {
    std::vector<ChunkTime> chunks;  // per virtual stage j * p + s
    double makespan = 0;
    std::vector<double> busy;  // per stage
    int critical = 0;          // the busiest stage
    const ChunkTime& chunk(const Layout& l, int stage, int j) const {
      return chunks[j * l.pipeline + stage];
    }
  };
  PipelineRun run_pipeline(const Layout& l, int microbatches) const;
  MemoryBreakdown stage_memory(const Layout& l, int stage);
  double model_flops(const Layout& l) const;
  // The data-parallel collectives' bytes and time and the optimizer's time, into out (whose
  // memory, the fullest stage, is known): forward / backward, one micro-batch's seconds.
  void add_data_parallel(const Layout& l, int mb, double forward, double backward, Prediction& out);
  const engine::ScheduleNeeds& schedule_needs(const pipeline_parallel::ScheduleConfig& s,
                                              int stage);
  const LayoutSizes& sizes_of(int tensor, const ChunkPlacement& placement, int expert);

  Cluster cluster_;
  Workload workload_;
  std::map<std::tuple<int, int, int, int, long, long>, double> bubbles_;
  std::map<std::tuple<int, int, int, int, int>, engine::ScheduleNeeds> needs_;
  std::map<std::tuple<int, int, int, bool, bool, int>, LayoutSizes> layout_sizes_;
};

}  // namespace trident::planner
