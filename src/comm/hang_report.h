#pragma once
// What a rank is doing when another asks, and the diagnosis printed when a wait outlives
// --distributed-timeout-minutes. Pure data and formatting: the watchdog gathers the facts
// over MPI, this turns them into the message (and the unit tests check it without MPI).
#include <optional>
#include <string>
#include <vector>

namespace trident::comm {

enum class OpKind : int {
  kNone,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kSend,
  kRecv,
  kAllToAll
};
const char* op_name(OpKind kind);

// Group indices are the order in which groups were registered, the same on every rank.
// Training registers 9: world, tensor, data, pipeline, context, replicas, model, expert and
// expert-data (distributed/process_groups.h).
constexpr int kMaxGroups = 12;

// One operation a rank waits on.
struct PendingOp {
  OpKind kind = OpKind::kNone;
  int group = -1;
  int sequence = 0;  // collectives: the operation's number in its group (1, 2, ...)
  int peer = -1;     // send / recv: the other rank's world rank
};

// A rank's answer. Only ints, so it travels as MPI_INT.
struct Activity {
  int iteration = -1;  // -1: not training (start-up, generate, serve)
  PendingOp op;
  int waited_ms = 0;
  int issued[kMaxGroups] = {};  // collectives started so far, per group
};

struct GroupInfo {
  std::string name;        // tensor, data, pipeline, model, world
  std::vector<int> ranks;  // world ranks, in group order
};

struct HangFacts {
  int rank = 0;  // the world rank whose wait timed out
  double timeout_s = 0;
  Activity self;
  std::vector<GroupInfo> groups;
  std::vector<std::string> nodes;                // every rank's host, by world rank
  std::vector<std::optional<Activity>> answers;  // by world rank; empty: it did not answer
};

// The message: the operation, group and iteration; the ranks waiting with this one; the ranks
// that never arrived (and why, when they answered); the ranks that did not answer and hosts
// none of whose ranks did; then what every rank was doing.
std::string describe_hang(const HangFacts& facts);

}  // namespace trident::comm
