#pragma once
// Pipeline schedules as data (Narayanan et al. 2021, section 2.2): a pure function gives
// each pipeline rank its ordered operations — forward or backward of micro-batch i on
// model chunk j, and the sends and receives between stages. The executor runs this list,
// the tests check it, and the simulator, the SVG drawing and the timeline read it too.
//
// Rank s holds model chunks j = 0..v-1; chunk j of rank s is virtual stage j*p + s (the
// paper's round-robin assignment), so activations flow s -> s+1 and wrap from the last
// rank to rank 0 between chunks.
#include <iosfwd>
#include <string>
#include <vector>

namespace trident::pipeline_parallel {

// kZeroBubbleH1: Qi et al. 2023, "Zero Bubble Pipeline Parallelism", the ZB-H1 schedule:
// backward split into B (input gradient, on the critical path) and W (weight gradient,
// deferred to fill the bubble).
enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved, kZeroBubbleH1 };

// kBackward is the whole backward, or only its input-gradient part (B) in a schedule with
// kWeight ops (W: the weight gradients of that micro-batch on that chunk).
enum class OpType {
  kRecvForward,
  kForward,
  kSendForward,
  kRecvBackward,
  kBackward,
  kSendBackward,
  kWeight
};

struct PipelineOp {
  OpType type;
  int microbatch;
  int chunk;
  int peer = -1;  // pipeline rank on the other end of a send/recv

  bool is_compute() const {
    return type == OpType::kForward || type == OpType::kBackward || type == OpType::kWeight;
  }
  bool is_send() const { return type == OpType::kSendForward || type == OpType::kSendBackward; }
  bool is_recv() const { return type == OpType::kRecvForward || type == OpType::kRecvBackward; }
  bool operator==(const PipelineOp&) const = default;
};

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kOneFOneB;
  int stages = 1;        // p
  int chunks = 1;        // v (model chunks per rank; > 1 only for interleaved)
  int microbatches = 1;  // m

  // Whether backward is split into B and W ops (a zero-bubble schedule).
  bool splits_backward() const { return kind == ScheduleKind::kZeroBubbleH1; }
};

ScheduleKind parse_schedule_kind(const std::string& name);  // gpipe, 1f1b, interleaved, zb-h1
std::string schedule_name(ScheduleKind kind);

// Every violated rule (Megatron's, minus its p > 2 restriction for interleaving), with the
// flag names; empty when the schedule can be built.
std::vector<std::string> validate_schedule(const ScheduleConfig& c);

// The operations of pipeline rank `stage`, in execution order.
std::vector<PipelineOp> build_schedule(const ScheduleConfig& c, int stage);

// Forward passes a rank runs before its first backward (the warm-up), as the paper gives it:
// 1F1B and ZB-H1: min(p - s - 1, m); interleaved: min((p - s - 1) * 2 + (v - 1) * p, m * v); GPipe:
// m * v.
int warmup_forwards(const ScheduleConfig& c, int stage);

// ZB-H1: how many W ops rank `stage` holds back behind their B (its W of micro-batch i
// runs after its B of micro-batch i + deferral); 0 for the other schedules.
int deferred_weight_ops(const ScheduleConfig& c, int stage);

// Most micro-batches whose activation slots a rank holds at once, per chunk: from F to B,
// when the executor frees the slot (what W reads stays with the micro-batch until its W:
// the held buffers of max_unfinished, the copies of max_deferred_weight_grads).
std::vector<int> max_in_flight(const std::vector<PipelineOp>& ops, int chunks);
// Most micro-batches between their B and their W at once, per chunk (0 without W ops):
// how many sets of weight-gradient operands the model keeps.
std::vector<int> max_deferred_weight_grads(const std::vector<PipelineOp>& ops, int chunks);
// Most micro-batches between their F and their last backward op (W when there is one).
std::vector<int> max_unfinished(const std::vector<PipelineOp>& ops, int chunks);

// Message tag shared by a send and its receive: direction, micro-batch, receiving stage.
int message_tag(const ScheduleConfig& c, const PipelineOp& op, int stage);

std::string to_string(const PipelineOp& op);
// The timeline category of an op: forward, backward, weight (W), send or recv.
const char* op_category(const PipelineOp& op);
void print_schedule(std::ostream& os, const ScheduleConfig& c);

}  // namespace trident::pipeline_parallel
