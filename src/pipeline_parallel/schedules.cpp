#include "pipeline_parallel/schedules.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <stdexcept>

namespace trident::pipeline_parallel {

namespace {

struct Compute {
  OpType type;  // kForward, kBackward or kWeight
  int microbatch, chunk;
};

// Megatron's interleaved order: virtual micro-batch k runs micro-batch
// (k / (p v)) * p + k % p on chunk (k % (p v)) / p (reversed for backward).
Compute interleaved_compute(const ScheduleConfig& c, int k, bool forward) {
  const int p = c.stages, v = c.chunks;
  int group = k % (p * v);
  int chunk = group / p;
  if (!forward) chunk = v - 1 - chunk;
  return {forward ? OpType::kForward : OpType::kBackward, (k / (p * v)) * p + k % p, chunk};
}

// ZB-H1 (Qi et al. 2023, section 3.1 and figure 3): the F and B order of 1F1B — p - s - 1
// warm-up forwards, then F/B pairs, then the cool-down's B — with each W placed after a B:
// rank s runs W of micro-batch i right after B of micro-batch i + s, and its last s W ops
// after its last B. Why s: B alone now forms the critical path back through the stages, so
// a later rank, which finishes early in 1F1B, can hold W back to send the next B upstream
// sooner, and the held-back W ops fill the end of its step. A micro-batch is in flight
// from F to W: the p - s of 1F1B plus the s held back give p on every rank, the most any
// rank holds in 1F1B (the paper's memory bound for ZB-H1). With tf = tb = tw the bubble is
// (p - 1)(tf + tb - tw) per rank, a third of 1F1B's (p - 1)(tf + tb + tw).
std::vector<Compute> zero_bubble_h1_order(const ScheduleConfig& c, int stage) {
  const int m = c.microbatches, warmup = warmup_forwards(c, stage);
  const int deferral = deferred_weight_ops(c, stage);
  std::vector<Compute> order;
  for (int i = 0; i < warmup; ++i) order.push_back({OpType::kForward, i, 0});
  for (int i = 0; i < m; ++i) {
    if (warmup + i < m) order.push_back({OpType::kForward, warmup + i, 0});
    order.push_back({OpType::kBackward, i, 0});
    if (i >= deferral) order.push_back({OpType::kWeight, i - deferral, 0});
  }
  for (int i = std::max(0, m - deferral); i < m; ++i) order.push_back({OpType::kWeight, i, 0});
  return order;
}

std::vector<Compute> compute_order(const ScheduleConfig& c, int stage) {
  const int m = c.microbatches, total = m * c.chunks;
  std::vector<Compute> order;
  if (c.kind == ScheduleKind::kZeroBubbleH1) return zero_bubble_h1_order(c, stage);
  if (c.kind == ScheduleKind::kGPipe) {
    for (int chunk = 0; chunk < c.chunks; ++chunk)
      for (int i = 0; i < m; ++i) order.push_back({OpType::kForward, i, chunk});
    for (int chunk = c.chunks - 1; chunk >= 0; --chunk)
      for (int i = 0; i < m; ++i) order.push_back({OpType::kBackward, i, chunk});
    return order;
  }
  const int warmup = warmup_forwards(c, stage);
  auto forward = [&](int k) {
    return c.kind == ScheduleKind::kInterleaved ? interleaved_compute(c, k, true)
                                                : Compute{OpType::kForward, k, 0};
  };
  auto backward = [&](int k) {
    return c.kind == ScheduleKind::kInterleaved ? interleaved_compute(c, k, false)
                                                : Compute{OpType::kBackward, k, 0};
  };
  for (int k = 0; k < warmup; ++k) order.push_back(forward(k));
  for (int k = 0; k < total - warmup; ++k) {  // steady state: one forward, one backward
    order.push_back(forward(warmup + k));
    order.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(backward(k));  // cool-down
  return order;
}

bool has_weight_ops(const std::vector<PipelineOp>& ops) {
  return std::any_of(ops.begin(), ops.end(),
                     [](const PipelineOp& op) { return op.type == OpType::kWeight; });
}

// Per chunk, the most micro-batches at once that have passed `from` and not yet `to`.
std::vector<int> max_between(const std::vector<PipelineOp>& ops, int chunks, OpType from,
                             OpType to) {
  std::vector<int> live(chunks, 0), peak(chunks, 0);
  for (const PipelineOp& op : ops) {
    if (op.type == from) peak[op.chunk] = std::max(peak[op.chunk], ++live[op.chunk]);
    if (op.type == to) --live[op.chunk];
  }
  return peak;
}

}  // namespace

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::kOneFOneB;
  if (name == "interleaved") return ScheduleKind::kInterleaved;
  if (name == "zb-h1") return ScheduleKind::kZeroBubbleH1;
  throw std::invalid_argument("schedule must be gpipe, 1f1b, interleaved or zb-h1 (got '" + name +
                              "')");
}

std::string schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kZeroBubbleH1:
      return "zb-h1";
  }
  return "?";
}

std::vector<std::string> validate_schedule(const ScheduleConfig& c) {
  std::vector<std::string> errors;
  if (c.stages < 1) errors.push_back("--pipeline-model-parallel-size must be >= 1");
  if (c.chunks < 1) errors.push_back("--virtual-stages must be >= 1");
  if (c.microbatches < 1) errors.push_back("the number of micro-batches must be >= 1");
  if (!errors.empty()) return errors;
  if (c.kind == ScheduleKind::kInterleaved) {
    if (c.stages < 2)
      errors.push_back("the interleaved schedule needs --pipeline-model-parallel-size >= 2");
    if (c.microbatches % c.stages != 0)
      errors.push_back("the interleaved schedule needs the number of micro-batches (" +
                       std::to_string(c.microbatches) +
                       ") to be a multiple of --pipeline-model-parallel-size (" +
                       std::to_string(c.stages) + ")");
  } else if (c.kind == ScheduleKind::kOneFOneB && c.chunks != 1) {
    errors.push_back("1F1B runs one model chunk per rank; use the interleaved schedule for v > 1");
  } else if (c.kind == ScheduleKind::kZeroBubbleH1 && c.chunks != 1) {
    errors.push_back(
        "zb-h1 runs one model chunk per rank (--num-layers-per-virtual-pipeline-stage must be "
        "unset)");
  }
  return errors;
}

int warmup_forwards(const ScheduleConfig& c, int stage) {
  const int p = c.stages, v = c.chunks, m = c.microbatches;
  switch (c.kind) {
    case ScheduleKind::kGPipe:
      return m * v;
    case ScheduleKind::kOneFOneB:
    case ScheduleKind::kZeroBubbleH1:
      return std::min(p - stage - 1, m);
    case ScheduleKind::kInterleaved: {
      if (m == p) return m * v;  // Megatron: with m == p every forward precedes every backward
      return std::min((p - stage - 1) * 2 + (v - 1) * p, m * v);
    }
  }
  return 0;
}

int deferred_weight_ops(const ScheduleConfig& c, int stage) {
  return c.kind == ScheduleKind::kZeroBubbleH1 ? stage : 0;
}

std::vector<PipelineOp> build_schedule(const ScheduleConfig& c, int stage) {
  std::vector<std::string> errors = validate_schedule(c);
  if (!errors.empty()) throw std::invalid_argument(errors.front());
  const int p = c.stages, last = p * c.chunks - 1;
  std::vector<PipelineOp> ops;
  for (const Compute& step : compute_order(c, stage)) {
    const int vs = step.chunk * p + stage;
    const int i = step.microbatch, j = step.chunk;
    if (step.type == OpType::kWeight) {
      ops.push_back({OpType::kWeight, i, j});
    } else if (step.type == OpType::kForward) {
      if (vs > 0 && p > 1) ops.push_back({OpType::kRecvForward, i, j, (stage + p - 1) % p});
      ops.push_back({OpType::kForward, i, j});
      if (vs < last && p > 1) ops.push_back({OpType::kSendForward, i, j, (stage + 1) % p});
    } else {
      if (vs < last && p > 1) ops.push_back({OpType::kRecvBackward, i, j, (stage + 1) % p});
      ops.push_back({OpType::kBackward, i, j});
      if (vs > 0 && p > 1) ops.push_back({OpType::kSendBackward, i, j, (stage + p - 1) % p});
    }
  }
  return ops;
}

std::vector<int> max_in_flight(const std::vector<PipelineOp>& ops, int chunks) {
  return max_between(ops, chunks, OpType::kForward, OpType::kBackward);
}

std::vector<int> max_deferred_weight_grads(const std::vector<PipelineOp>& ops, int chunks) {
  if (!has_weight_ops(ops)) return std::vector<int>(chunks, 0);
  return max_between(ops, chunks, OpType::kBackward, OpType::kWeight);
}

std::vector<int> max_unfinished(const std::vector<PipelineOp>& ops, int chunks) {
  return max_between(ops, chunks, OpType::kForward,
                     has_weight_ops(ops) ? OpType::kWeight : OpType::kBackward);
}

int message_tag(const ScheduleConfig& c, const PipelineOp& op, int stage) {
  // The receiving virtual stage identifies the message together with the micro-batch and
  // the direction, so a forward and a backward between the same two ranks never match
  // each other (what makes interleaving work at p = 2).
  const int vs = op.chunk * c.stages + stage;
  int receiver = 0, backward = 0;
  switch (op.type) {
    case OpType::kSendForward:
      receiver = vs + 1;
      break;
    case OpType::kRecvForward:
      receiver = vs;
      break;
    case OpType::kSendBackward:
      receiver = vs - 1, backward = 1;
      break;
    case OpType::kRecvBackward:
      receiver = vs, backward = 1;
      break;
    default:
      throw std::logic_error("message_tag of a compute operation");
  }
  return (backward * c.microbatches + op.microbatch) * (c.stages * c.chunks) + receiver;
}

std::string to_string(const PipelineOp& op) {
  static const char* names[] = {"recv-fwd", "F", "send-fwd", "recv-bwd", "B", "send-bwd", "W"};
  char buf[64];
  if (op.peer >= 0)
    std::snprintf(buf, sizeof buf, "%s %d.%d %s %d", names[(int)op.type], op.microbatch, op.chunk,
                  op.is_send() ? "->" : "<-", op.peer);
  else
    std::snprintf(buf, sizeof buf, "%s %d.%d", names[(int)op.type], op.microbatch, op.chunk);
  return buf;
}

const char* op_category(const PipelineOp& op) {
  switch (op.type) {
    case OpType::kForward:
      return "forward";
    case OpType::kBackward:
      return "backward";
    case OpType::kWeight:
      return "weight";
    case OpType::kSendForward:
    case OpType::kSendBackward:
      return "send";
    default:
      return "recv";
  }
}

void print_schedule(std::ostream& os, const ScheduleConfig& c) {
  os << schedule_name(c.kind) << " schedule: p=" << c.stages << " v=" << c.chunks
     << " m=" << c.microbatches << " (op micro-batch.chunk"
     << (c.splits_backward() ? "; B input gradient, W weight gradient)\n" : ")\n");
  for (int s = 0; s < c.stages; ++s) {
    os << "  rank " << s << " (warm-up " << warmup_forwards(c, s) << "):";
    for (const PipelineOp& op : build_schedule(c, s))
      if (op.is_compute()) os << " " << to_string(op);
    os << "\n";
  }
}

}  // namespace trident::pipeline_parallel
