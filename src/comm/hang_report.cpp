#include "comm/hang_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace trident::comm {

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce:
      return "all-reduce";
    case OpKind::kAllGather:
      return "all-gather";
    case OpKind::kReduceScatter:
      return "reduce-scatter";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kAllToAll:
      return "all-to-all";
    case OpKind::kNone:
      break;
  }
  return "nothing";
}

namespace {

constexpr const char* kNoAnswer = "no answer: stopped, computing without end, or unreachable";
// A report on thousands of ranks names the first ones; the summary lines cover all.
constexpr int kMaxRankLines = 64;

bool is_p2p(OpKind k) {
  return k == OpKind::kSend || k == OpKind::kRecv;
}

std::string seconds(int ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", ms / 1000.0);
  return text;
}

class Reporter {
 public:
  explicit Reporter(const HangFacts& f) : f_(f) {}

  std::string name(int rank) const {
    std::string s = "rank " + std::to_string(rank);
    if ((size_t)rank < f_.nodes.size()) s += "@" + f_.nodes[rank];
    return s;
  }

  std::string group_name(int g) const {
    return g >= 0 && (size_t)g < f_.groups.size() ? f_.groups[g].name : "unknown";
  }

  std::string op(const PendingOp& p) const {
    std::string s = op_name(p.kind);
    if (is_p2p(p.kind))
      return s + (p.kind == OpKind::kSend ? " to " : " from ") + name(p.peer) + " over the " +
             group_name(p.group) + " group";
    return s + " #" + std::to_string(p.sequence) + " of the " + group_name(p.group) + " group";
  }

  std::string activity(const std::optional<Activity>& a) const {
    if (!a) return kNoAnswer;
    std::string s = a->iteration >= 0 ? "iteration " + std::to_string(a->iteration) + ", " : "";
    return s + "waiting " + seconds(a->waited_ms) + " for " + op(a->op);
  }

  // Whether a member of the hung operation's group has reached it.
  bool arrived(int member) const {
    const PendingOp& mine = f_.self.op;
    const std::optional<Activity>& a = f_.answers[member];
    if (member == f_.rank) return true;
    if (!a) return false;
    if (is_p2p(mine.kind))  // the peer waits on the matching half
      return a->op.group == mine.group && a->op.peer == f_.rank && is_p2p(a->op.kind) &&
             a->op.kind != mine.kind;
    return a->issued[mine.group] >= mine.sequence;
  }

  std::vector<int> members() const {
    const PendingOp& mine = f_.self.op;
    if (is_p2p(mine.kind)) return {f_.rank, mine.peer};
    if (mine.group >= 0 && (size_t)mine.group < f_.groups.size())
      return f_.groups[mine.group].ranks;
    return {f_.rank};
  }

  void headline(std::ostream& os) const {
    os << "hang: " << name(f_.rank) << " waited " << seconds(f_.self.waited_ms)
       << " (--distributed-timeout-minutes " << f_.timeout_s / 60 << ") for " << op(f_.self.op);
    if (!is_p2p(f_.self.op.kind)) {
      os << " [";
      const std::vector<int> m = members();
      for (size_t i = 0; i < m.size(); ++i) os << (i ? ", " : "") << m[i];
      os << "]";
    }
    if (f_.self.iteration >= 0) os << " at iteration " << f_.self.iteration;
    os << "\n";
  }

  void arrivals(std::ostream& os) const {
    std::string waiting, missing;
    for (int m : members()) {
      if (arrived(m)) {
        waiting += (waiting.empty() ? "" : ", ") + name(m);
      } else {
        missing += (missing.empty() ? "" : "; ") + name(m) + " (" + activity(f_.answers[m]) + ")";
      }
    }
    os << "  waiting: " << waiting << "\n";
    os << "  never arrived: "
       << (missing.empty() ? "none (all arrived; the transport stalled)" : missing) << "\n";
  }

  // The ranks that did not answer: where a chain of waits ends (rank A waits for B, which
  // waits for a stopped C), so they come first among the suspects.
  void silent_ranks(std::ostream& os) const {
    std::string silent;
    for (size_t r = 0; r < f_.answers.size(); ++r)
      if ((int)r != f_.rank && !f_.answers[r])
        silent += (silent.empty() ? "" : ", ") + name((int)r);
    if (!silent.empty()) os << "  silent (" << kNoAnswer << "): " << silent << "\n";
  }

  // A host none of whose ranks answered is down, stopped or cut off: say so once.
  void silent_hosts(std::ostream& os) const {
    std::map<std::string, std::pair<int, int>> per_host;  // host -> (ranks, silent)
    for (size_t r = 0; r < f_.nodes.size() && r < f_.answers.size(); ++r) {
      auto& [ranks, silent] = per_host[f_.nodes[r]];
      ++ranks;
      silent += (int)r != f_.rank && !f_.answers[r];
    }
    if (per_host.size() < 2) return;
    for (const auto& [host, counts] : per_host)
      if (counts.first == counts.second)
        os << "  no rank on host " << host << " answered: the host is down, stopped or cut off\n";
  }

  void every_rank(std::ostream& os) const {
    os << "  every rank:\n";
    const int n = (int)f_.answers.size();
    for (int r = 0; r < std::min(n, kMaxRankLines); ++r)
      os << "    " << name(r) << ": "
         << (r == f_.rank ? activity(f_.self) + " (timed out)" : activity(f_.answers[r])) << "\n";
    if (n > kMaxRankLines) os << "    ... " << n - kMaxRankLines << " more ranks\n";
  }

 private:
  const HangFacts& f_;
};

}  // namespace

std::string describe_hang(const HangFacts& facts) {
  Reporter r(facts);
  std::ostringstream os;
  r.headline(os);
  r.arrivals(os);
  r.silent_ranks(os);
  r.silent_hosts(os);
  r.every_rank(os);
  return os.str();
}

}  // namespace trident::comm
