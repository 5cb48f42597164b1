#pragma once
// AdamW over flat parameter buffers, with global gradient-norm clipping. Weight decay
// applies to matrices (and embeddings) only, never to biases or LayerNorm parameters.
#include <vector>

#include "comm/communicator.h"
#include "core/first_touch.h"
#include "parameters/parameters.h"

namespace trident::optim {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float clip_grad = 1.0f;  // 0: no clipping
};

// The part of one chunk's flat buffer a rank accounts for: all of it, or its
// distributed-optimizer shard.
struct GradRange {
  const Parameters* params;
  long begin, end;
};

// The global L2 norm of the gradients, each parameter counted once: sharded tensors are
// summed over the tensor-parallel group, replicated ones taken from this rank, pipeline
// stages summed, the last stage's copy of the tied embedding skipped, and — when ranges are
// distributed-optimizer shards — the shards summed over `data`.
double global_grad_norm(const std::vector<GradRange>& ranges, comm::Communicator& tp,
                        comm::Communicator& pp, comm::Communicator& data);
double global_grad_norm(const std::vector<const Parameters*>& chunks, comm::Communicator& tp,
                        comm::Communicator& pp);

// Expert parallelism (issue 32): the same with the expert buffers' ranges too, each expert
// counted once: their squares summed over `expert_data` (distributed-optimizer shards; a
// one-rank group when every expert-data rank holds the whole reduced gradient) and over
// `expert` (each rank holds E/EP experts), then added to the dense part before the pipeline
// sum. Collective over both groups on every rank, with or without expert ranges.
struct ExpertGroupsForNorm {
  const std::vector<GradRange>& ranges;
  comm::Communicator& expert;
  comm::Communicator& expert_data;
};
double global_grad_norm(const std::vector<GradRange>& ranges, comm::Communicator& tp,
                        comm::Communicator& pp, comm::Communicator& data,
                        const ExpertGroupsForNorm& experts);

// Multiplier that clips a gradient of norm `norm` to `clip` (1 when no clipping applies).
float clip_coefficient(double norm, float clip);

class AdamW {
 public:
  // Moments for floats [begin, end) of a chunk's buffer (its distributed-optimizer shard,
  // or all of it).
  AdamW(const AdamWConfig& config, long begin, long end);
  AdamW(const AdamWConfig& config, long size) : AdamW(config, 0, size) {}
  // One optimizer step over [begin, end) with the gradients scaled by grad_scale.
  void update(Parameters& params, float lr, float grad_scale);
  // The same step in pieces (the distributed optimizer starts each bucket's all-gather as
  // soon as its piece is updated): start_step(), then update_range() over pieces that
  // together cover [begin, end) once.
  void start_step() { ++step_; }
  void update_range(Parameters& params, float lr, float grad_scale, long lo, long hi);
  long moment_bytes() const { return 2 * (long)exp_avg_.size() * (long)sizeof(float); }
  // State, for checkpoints: moments of floats [range_begin(), range_end()) of the buffer.
  long range_begin() const { return begin_; }
  long range_end() const { return end_; }
  FirstTouchVector<float>& exp_avg() { return exp_avg_; }
  FirstTouchVector<float>& exp_avg_sq() { return exp_avg_sq_; }
  void set_steps_taken(long steps) { step_ = steps; }
  // One-chunk convenience: norm over the tensor group, clip, update. Returns the norm.
  double step(Parameters& params, float lr, comm::Communicator& tp);
  long steps_taken() const { return step_; }
  const AdamWConfig& config() const { return config_; }

 private:
  AdamWConfig config_;
  FirstTouchVector<float> exp_avg_, exp_avg_sq_;
  long begin_, end_;
  long step_ = 0;
};

}  // namespace trident::optim
