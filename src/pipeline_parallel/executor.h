#pragma once
// Runs a rank's pipeline schedule on its model chunks: non-blocking sends (completed at the
// end of the step), receives matched by tag, activation slots taken at a micro-batch's
// forward and returned at its backward (B; W of a zero-bubble schedule reads copies the
// model kept), and — with tensor parallelism — the scatter/gather
// optimisation (each tensor-parallel rank sends 1/t of a boundary tensor; the receivers
// all-gather it); with sequence parallelism that 1/t is all a rank holds and it is sent
// directly. Every operation can be recorded for the timeline.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "pipeline_parallel/schedules.h"
#include "pipeline_parallel/stage.h"
#include "pipeline_parallel/timeline.h"

namespace trident::pipeline_parallel {

struct ExecutorOptions {
  bool scatter_gather = true;
  int world_rank = 0;                   // the timeline track
  double testing_forward_delay_ms = 0;  // testing: make this rank a straggler
  // The chunks are sequence-parallel: a boundary tensor is already this rank's 1/t of the
  // rows, so it is sent as it is; scatter/gather has nothing left to do.
  bool sequence_parallel = false;
};

class PipelineExecutor {
 public:
  // chunks[j] is model chunk j of this rank (virtual stage j * p + stage); a boundary
  // tensor between stages holds micro_batch * seq * hidden floats.
  PipelineExecutor(const ScheduleConfig& schedule, std::vector<PipelineStage*> chunks,
                   comm::Communicator& pipeline, comm::Communicator& tensor, int micro_batch,
                   int seq, int hidden, ExecutorOptions options);

  // tokens_of(i) is micro-batch i, [micro_batch, seq + 1]; first_sample_of(i) the run-wide
  // index of its first sample (names its dropout masks; none given: -1). Accumulates
  // gradients of grad_scale * (loss sum); returns the loss sum of all micro-batches, on
  // every rank.
  double train_step(const std::function<const int*(int)>& tokens_of, float grad_scale,
                    const std::function<long(int)>& first_sample_of = {});
  // Called before every op that finishes gradients — each backward, or each W of a
  // zero-bubble schedule (whose B only records) — with (chunk, whether it is that chunk's
  // last such op in the step): data parallelism arms its reducer for the last.
  void set_before_backward(std::function<void(int chunk, bool last)> f) {
    before_backward_ = std::move(f);
  }
  // Called before every training forward of a chunk (the last stage's forward already
  // accumulates the output layer's gradients, fused with the loss).
  void set_before_forward(std::function<void(int chunk)> f) { before_forward_ = std::move(f); }
  // The next train_step runs `microbatches` micro-batches (a batch-size ramp-up step): the
  // schedule is rebuilt; the activation slots planned at construction must suffice.
  void set_microbatches(int microbatches);
  // The schedule of the latest set_microbatches (m grows under batch-size ramp-up).
  const ScheduleConfig& schedule() const { return schedule_; }
  // Forward only over `microbatches` micro-batches; returns the loss sum, on every rank.
  double evaluate(const std::function<const int*(int)>& tokens_of, int microbatches);

  // Events since construction (or the last take), times in microseconds from `origin`.
  std::vector<TraceEvent> take_events() { return std::move(events_); }
  void record(const std::string& name, const std::string& category, double start_us, double end_us);
  // A forward, backward or weight op, with its thread CPU time.
  void record_compute(const std::string& name, const std::string& category, const PipelineOp& op,
                      double start_us, double cpu_start_us);
  static double thread_cpu_us();
  double now_us() const;
  const std::vector<PipelineOp>& ops() const { return ops_; }
  // Bytes of activations and activation gradients this rank sent in train_step so far.
  long boundary_bytes_sent() const { return boundary_bytes_; }

 private:
  void send(const float* data, const PipelineOp& op);
  void receive(float* data, const PipelineOp& op);
  int take_slot(int chunk, int microbatch);

  ScheduleConfig schedule_;
  std::vector<PipelineStage*> chunks_;
  comm::Communicator& pipeline_;
  comm::Communicator& tensor_;
  int micro_batch_, seq_, stage_;
  long boundary_floats_;
  ExecutorOptions options_;
  std::vector<PipelineOp> ops_;
  std::vector<std::vector<int>> free_slots_;
  std::vector<std::map<int, int>> slot_of_;  // per chunk: micro-batch -> slot
  std::vector<std::unique_ptr<comm::Request>> pending_sends_;
  std::vector<std::vector<float>> send_buffers_;
  std::vector<float> gather_buffer_;
  std::vector<TraceEvent> events_;
  long boundary_bytes_ = 0;
  std::function<void(int, bool)> before_backward_;
  std::function<void(int)> before_forward_;
  bool training_ = false;
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace trident::pipeline_parallel
