#include "comm/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <type_traits>

namespace trident::comm {

namespace {

constexpr int kQueryTag = 1, kAnswerTag = 2;
static_assert(std::is_trivially_copyable_v<Activity> && sizeof(Activity) % sizeof(int) == 0,
              "Activity travels as an array of MPI_INT");
constexpr int kActivityInts = sizeof(Activity) / sizeof(int);
// Waiting ranks look for questions this often: an answer costs them nothing measurable and
// comes back within milliseconds.
constexpr auto kServeEvery = std::chrono::milliseconds(1);
// MPI_Abort talks to the launcher, which may sit behind the cut link; the process ends
// regardless after this long (its launcher daemon then sees it die and ends the job).
constexpr unsigned kAbortGraceSeconds = 15;

void check(int status, const char* what) {
  if (status != MPI_SUCCESS) throw std::runtime_error(std::string(what) + " failed");
}

// How long a timed-out rank waits for the others' answers: ranks that wait answer within
// milliseconds, so this only bounds the silence of those that cannot.
double answer_window_s(double timeout_s) {
  return std::clamp(timeout_s / 4, 1.0, 10.0);
}

// How long a rank whose wait timed out stays quiet while another rank reports the hang (that
// rank's MPI_Abort normally ends this one first).
std::chrono::duration<double> quiet_time(double timeout_s) {
  return std::chrono::duration<double>(answer_window_s(timeout_s) + kAbortGraceSeconds);
}

}  // namespace

Watchdog::Watchdog(double timeout_s, std::string label, std::vector<std::string> nodes)
    : timeout_s_(timeout_s), label_(std::move(label)), nodes_(std::move(nodes)) {
  check(MPI_Comm_dup(MPI_COMM_WORLD, &channel_), "MPI_Comm_dup (watchdog)");
  MPI_Comm_rank(channel_, &rank_);
  MPI_Comm_size(channel_, &size_);
}

Watchdog::~Watchdog() {
  for (Answer& a : answers_) MPI_Wait(&a.request, MPI_STATUS_IGNORE);
  if (channel_ != MPI_COMM_NULL) MPI_Comm_free(&channel_);
}

int Watchdog::add_group(std::string name, std::vector<int> world_ranks) {
  if (groups_.size() == (size_t)kMaxGroups)
    throw std::logic_error("watchdog: more than " + std::to_string(kMaxGroups) + " groups");
  groups_.push_back({std::move(name), std::move(world_ranks)});
  return (int)groups_.size() - 1;
}

void Watchdog::wait(MPI_Request* requests, int n, const PendingOp& op) {
  int done = 0;
  check(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  if (done) return;
  activity_.op = op;
  wait_started_ = Clock::now();
  const auto deadline = wait_started_ + std::chrono::duration<double>(timeout_s_);
  auto next_serve = wait_started_ + kServeEvery;
  while (!done) {
    check(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    const auto now = Clock::now();
    if (now < next_serve) continue;
    serve_queries();
    next_serve = now + kServeEvery;
    if (now >= deadline && !done) yield_to_reporter(), report_hang();
  }
  activity_.op = {};
}

bool Watchdog::another_rank_reports() const {
  return last_asker_ >= 0 && Clock::now() - last_asked_ < quiet_time(timeout_s_);
}

// Ranks of a hung job time out together; the first to ask reports for all, and the others
// only answer (so the log holds one report), unless that report never ends the job.
void Watchdog::yield_to_reporter() {
  if (!another_rank_reports()) return;
  const auto until = Clock::now() + quiet_time(timeout_s_);
  while (Clock::now() < until) serve_queries();
}

void Watchdog::note_waited() {
  const auto waited = Clock::now() - wait_started_;
  activity_.waited_ms = (int)std::chrono::duration_cast<std::chrono::milliseconds>(waited).count();
}

void Watchdog::serve_queries() {
  for (auto it = answers_.begin(); it != answers_.end();) {
    int sent = 0;
    MPI_Test(&it->request, &sent, MPI_STATUS_IGNORE);
    it = sent ? answers_.erase(it) : std::next(it);
  }
  int asked = 0;
  MPI_Status status;
  while (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, channel_, &asked, &status) == MPI_SUCCESS && asked) {
    int token = 0;
    MPI_Recv(&token, 1, MPI_INT, status.MPI_SOURCE, kQueryTag, channel_, MPI_STATUS_IGNORE);
    // Keep the lowest rank that asked lately: it is the one that reports.
    if (!another_rank_reports() || status.MPI_SOURCE < last_asker_) last_asker_ = status.MPI_SOURCE;
    last_asked_ = Clock::now();
    note_waited();
    Answer& a = answers_.emplace_back();
    a.activity = activity_;
    MPI_Isend(&a.activity, kActivityInts, MPI_INT, status.MPI_SOURCE, kAnswerTag, channel_,
              &a.request);
  }
}

// Asks every other rank and collects the answers that come within the window. The buffers
// are never freed: the job ends right after, and a late answer must land somewhere valid.
std::vector<std::optional<Activity>> Watchdog::ask_every_rank() {
  auto* got = new std::vector<Activity>(size_);
  auto* receives = new std::vector<MPI_Request>(size_, MPI_REQUEST_NULL);
  auto* questions = new std::vector<MPI_Request>(size_, MPI_REQUEST_NULL);
  static const int token = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Irecv(&(*got)[r], kActivityInts, MPI_INT, r, kAnswerTag, channel_, &(*receives)[r]);
    MPI_Isend(&token, 1, MPI_INT, r, kQueryTag, channel_, &(*questions)[r]);
  }
  std::vector<std::optional<Activity>> answers(size_);
  int pending = size_ - 1;
  const auto until = Clock::now() + std::chrono::duration<double>(answer_window_s(timeout_s_));
  while (pending > 0 && Clock::now() < until) {
    for (int r = 0; r < size_; ++r) {
      int arrived = 0;
      if ((*receives)[r] == MPI_REQUEST_NULL) continue;
      MPI_Test(&(*receives)[r], &arrived, MPI_STATUS_IGNORE);
      if (arrived) answers[r] = (*got)[r], --pending;
    }
    serve_queries();  // another rank that timed out may be asking this one
  }
  return answers;
}

void Watchdog::report_hang() {
  note_waited();
  HangFacts facts;
  facts.rank = rank_;
  facts.timeout_s = timeout_s_;
  facts.self = activity_;
  facts.groups = groups_;
  facts.nodes = nodes_;
  facts.answers = ask_every_rank();
  // Two ranks that timed out at once ask each other: the lower one reports.
  if (last_asker_ >= 0 && last_asker_ < rank_) yield_to_reporter();
  const std::string text = describe_hang(facts);
  std::fprintf(stderr, "%s: %s", label_.c_str(), text.c_str());
  std::fflush(stderr);
  alarm(kAbortGraceSeconds);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

}  // namespace trident::comm
