#include "comm/mpi_communicator.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace trident::comm {

namespace {

void check(int status, const std::string& what) {
  if (status != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(status, text, &len);
    throw std::runtime_error(what + " failed: " + std::string(text, len));
  }
}

MPI_Op mpi_op(ReduceOp op) {
  return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM;
}

// MPI counts are int; split larger payloads.
constexpr long kMaxChunk = 1L << 30;

// Adds the wall time of its scope to a counter's seconds (nothing when `into` is null).
class ScopedSeconds {
 public:
  explicit ScopedSeconds(double* into) : into_(into) {
    if (into_) start_ = std::chrono::steady_clock::now();
  }
  ScopedSeconds(const ScopedSeconds&) = delete;
  ScopedSeconds& operator=(const ScopedSeconds&) = delete;
  ~ScopedSeconds() {
    if (into_)
      *into_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double* into_;
  std::chrono::steady_clock::time_point start_;
};

// A pending operation: the MPI requests that complete together.
struct MpiRequest final : Request {
  std::vector<MPI_Request> requests;
  std::shared_ptr<Watchdog> watchdog;
  PendingOp op;
  double* seconds = nullptr;  // the issuing communicator's counter for this kind
  void wait() override {
    if (requests.empty()) return;
    ScopedSeconds timed(seconds);
    if (watchdog) return watchdog->wait(requests.data(), (int)requests.size(), op);
    check(MPI_Waitall((int)requests.size(), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  }
  bool test() override {
    int done = 0;
    check(MPI_Testall((int)requests.size(), requests.data(), &done, MPI_STATUSES_IGNORE),
          "MPI_Testall");
    return done != 0;
  }
  MPI_Request* add() { return &requests.emplace_back(MPI_REQUEST_NULL); }
  ~MpiRequest() override {
    seconds = nullptr;  // the communicator may be gone already
    try {
      wait();  // a request dropped unfinished is still waited for, with its deadline
    } catch (const std::exception&) {
    }
  }
};

// A blocking operation: the plain MPI call without a watchdog (the fastest path); with one,
// its non-blocking form and a watched wait, since a blocking MPI call cannot time out.
template <class Plain, class Start>
void run_blocking(Watchdog* watchdog, const PendingOp& op, const std::string& what, Plain plain,
                  Start start) {
  if (!watchdog) return check(plain(), what);
  MPI_Request request = MPI_REQUEST_NULL;
  check(start(&request), what);
  watchdog->wait(&request, 1, op);
}

// Slices of an uneven in-place collective done as one operation per owner: a reduce to it,
// or a broadcast from it. Slices bound the temporaries MPI stages for a reduction.
constexpr long kOwnerSlice = 1L << 22;

void count(CollectiveCounters::Entry& e, long floats) {
  ++e.calls;
  e.bytes += floats * (long)sizeof(float);
}

// A blocking call: counts it and times the caller's scope into the entry; nothing when no
// data moves (a one-rank group).
[[nodiscard]] std::optional<ScopedSeconds> count_blocking(CollectiveCounters::Entry& e, long floats,
                                                          bool moves) {
  if (!moves) return std::nullopt;
  count(e, floats);
  return std::optional<ScopedSeconds>(std::in_place, &e.seconds);
}

// entry: whose seconds the wait adds to (null when nothing moves).
std::unique_ptr<MpiRequest> pending(std::shared_ptr<Watchdog> watchdog, const PendingOp& op,
                                    CollectiveCounters::Entry* entry = nullptr) {
  auto r = std::make_unique<MpiRequest>();
  r->watchdog = std::move(watchdog);
  r->op = op;
  r->seconds = entry ? &entry->seconds : nullptr;
  return r;
}

std::vector<int> world_ranks_of(MPI_Comm comm, int size) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> mine(size), out(size);
  for (int i = 0; i < size; ++i) mine[i] = i;
  MPI_Group_translate_ranks(group, size, mine.data(), world, out.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return out;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name,
                                 std::shared_ptr<Watchdog> watchdog)
    : comm_(comm), name_(std::move(name)), watchdog_(std::move(watchdog)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  world_ranks_ = world_ranks_of(comm_, size_);
  if (watchdog_) group_ = watchdog_->add_group(name_, world_ranks_);
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && comm_ != MPI_COMM_NULL)
    MPI_Comm_free(&comm_);
}

PendingOp MpiCommunicator::collective(OpKind kind) {
  if (!watchdog_) return {kind};
  return {kind, group_, watchdog_->next_sequence(group_), -1};
}

PendingOp MpiCommunicator::point_to_point(OpKind kind, int peer) const {
  return {kind, group_, 0, world_ranks_[peer]};
}

void MpiCommunicator::all_reduce(float* data, long n, ReduceOp op) {
  if (size_ == 1) return;
  const auto timed = count_blocking(counters_.all_reduce, n, true);
  const PendingOp p = collective(OpKind::kAllReduce);
  for (long off = 0; off < n; off += kMaxChunk) {
    float* d = data + off;
    const int len = (int)std::min(kMaxChunk, n - off);
    run_blocking(
        watchdog_.get(), p, name_ + " all-reduce",
        [&] { return MPI_Allreduce(MPI_IN_PLACE, d, len, MPI_FLOAT, mpi_op(op), comm_); },
        [&](MPI_Request* r) {
          return MPI_Iallreduce(MPI_IN_PLACE, d, len, MPI_FLOAT, mpi_op(op), comm_, r);
        });
  }
}

void MpiCommunicator::all_reduce(double* data, long n, ReduceOp op) {
  if (size_ == 1) return;  // nothing moves in a one-rank group: nothing is counted
  // Counted in floats' bytes: a double is two.
  const auto timed = count_blocking(counters_.all_reduce, 2 * n, true);
  run_blocking(
      watchdog_.get(), collective(OpKind::kAllReduce), name_ + " all-reduce",
      [&] { return MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_DOUBLE, mpi_op(op), comm_); },
      [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, MPI_DOUBLE, mpi_op(op), comm_, r);
      });
}

void MpiCommunicator::all_gather(const float* send, float* recv, long n) {
  const auto timed = count_blocking(counters_.all_gather, n, size_ > 1);
  if (n > kMaxChunk) throw std::length_error(name_ + ": all-gather over 2^30 floats");
  const void* source = send == recv + (long)rank_ * n ? MPI_IN_PLACE : send;
  run_blocking(
      watchdog_.get(), collective(OpKind::kAllGather), name_ + " all-gather",
      [&] { return MPI_Allgather(source, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, comm_); },
      [&](MPI_Request* r) {
        return MPI_Iallgather(source, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, comm_, r);
      });
}

// One reduce per block (to the rank that keeps it), in slices: Open MPI's
// MPI_Reduce_scatter_block took 2.7 ms for 4 MiB over 2 ranks here against 0.32 ms for this
// (0.35 ms non-blocking, as the watchdog runs it) and 0.40 ms for MPI_Reduce_scatter; its
// in-place form also stages the whole buffer in a temporary on one rank, which would break
// the memory plan. Slices bound the temporaries MPI stages for a reduction.
namespace {
// The reduces of a reduce-scatter, one per block and slice: what this rank contributes and
// where the block's owner (the root) keeps the sum.
template <class Reduce>
void for_each_block_reduce(const float* send, float* recv, long n, int rank, int size,
                           Reduce reduce) {
  const bool in_place = send == recv;
  for (int root = 0; root < size; ++root)
    for (long off = 0; off < n; off += kOwnerSlice) {
      const float* block = send + (long)root * n + off;
      float* result = in_place ? recv + (long)root * n + off : recv + off;
      const void* source = in_place && rank == root ? MPI_IN_PLACE : block;
      reduce(source, result, (int)std::min(kOwnerSlice, n - off), root);
    }
}
}  // namespace

void MpiCommunicator::reduce_scatter(const float* send, float* recv, long n) {
  const auto timed = count_blocking(counters_.reduce_scatter, n * size_, size_ > 1);
  const PendingOp p = collective(OpKind::kReduceScatter);
  for_each_block_reduce(
      send, recv, n, rank_, size_, [&](const void* source, float* result, int len, int root) {
        run_blocking(
            watchdog_.get(), p, name_ + " reduce-scatter",
            [&] { return MPI_Reduce(source, result, len, MPI_FLOAT, MPI_SUM, root, comm_); },
            [&](MPI_Request* r) {
              return MPI_Ireduce(source, result, len, MPI_FLOAT, MPI_SUM, root, comm_, r);
            });
      });
}

namespace {
template <class T>
void broadcast_chunks(Watchdog* w, const PendingOp& p, const std::string& what, T* data, long n,
                      MPI_Datatype type, int root, MPI_Comm comm) {
  for (long off = 0; off < n; off += kMaxChunk) {
    T* d = data + off;
    const int len = (int)std::min(kMaxChunk, n - off);
    run_blocking(
        w, p, what, [&] { return MPI_Bcast(d, len, type, root, comm); },
        [&](MPI_Request* r) { return MPI_Ibcast(d, len, type, root, comm, r); });
  }
}
}  // namespace

void MpiCommunicator::broadcast(float* data, long n, int root) {
  const auto timed = count_blocking(counters_.broadcast, n, size_ > 1);
  broadcast_chunks(watchdog_.get(), collective(OpKind::kBroadcast), name_ + " broadcast", data, n,
                   MPI_FLOAT, root, comm_);
}

void MpiCommunicator::broadcast(int* data, long n, int root) {
  const auto timed = count_blocking(counters_.broadcast, n, size_ > 1);
  broadcast_chunks(watchdog_.get(), collective(OpKind::kBroadcast), name_ + " broadcast", data, n,
                   MPI_INT, root, comm_);
}

void MpiCommunicator::send(const float* data, long n, int dest, int tag) {
  const auto timed = count_blocking(counters_.send, n, size_ > 1);
  run_blocking(
      watchdog_.get(), point_to_point(OpKind::kSend, dest), name_ + " send",
      [&] { return MPI_Send(data, (int)n, MPI_FLOAT, dest, tag, comm_); },
      [&](MPI_Request* r) { return MPI_Isend(data, (int)n, MPI_FLOAT, dest, tag, comm_, r); });
}

void MpiCommunicator::recv(float* data, long n, int source, int tag) {
  const auto timed = count_blocking(counters_.recv, n, size_ > 1);
  run_blocking(
      watchdog_.get(), point_to_point(OpKind::kRecv, source), name_ + " recv",
      [&] { return MPI_Recv(data, (int)n, MPI_FLOAT, source, tag, comm_, MPI_STATUS_IGNORE); },
      [&](MPI_Request* r) { return MPI_Irecv(data, (int)n, MPI_FLOAT, source, tag, comm_, r); });
}

std::unique_ptr<Request> MpiCommunicator::iall_reduce(float* data, long n, ReduceOp op) {
  if (size_ > 1) count(counters_.all_reduce, n);
  auto r = pending(watchdog_, collective(OpKind::kAllReduce), &counters_.all_reduce);
  if (size_ > 1)
    check(MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, mpi_op(op), comm_, r->add()),
          name_ + " non-blocking all-reduce");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::iall_gather(const float* send, float* recv, long n) {
  if (size_ > 1) count(counters_.all_gather, n);
  auto r = pending(watchdog_, collective(OpKind::kAllGather), &counters_.all_gather);
  check(MPI_Iallgather(send, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, comm_, r->add()),
        name_ + " non-blocking all-gather");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::ireduce_scatter(const float* send, float* recv, long n) {
  if (size_ == 1) {
    if (send != recv) std::copy(send, send + n, recv);
    return pending(watchdog_, {});
  }
  count(counters_.reduce_scatter, n * size_);
  auto r = pending(watchdog_, collective(OpKind::kReduceScatter), &counters_.reduce_scatter);
  for_each_block_reduce(
      send, recv, n, rank_, size_, [&](const void* source, float* result, int len, int root) {
        check(MPI_Ireduce(source, result, len, MPI_FLOAT, MPI_SUM, root, comm_, r->add()),
              name_ + " non-blocking reduce-scatter");
      });
  return r;
}

std::unique_ptr<Request> MpiCommunicator::ireduce_scatter_v(float* data,
                                                            const std::vector<long>& counts) {
  if (size_ == 1) return pending(watchdog_, {});
  auto r = pending(watchdog_, collective(OpKind::kReduceScatter), &counters_.reduce_scatter);
  long total = 0;
  for (long c : counts) total += c;
  count(counters_.reduce_scatter, total);
  float* block = data;
  for (int owner = 0; owner < size_; ++owner) {
    for (long off = 0; off < counts[owner]; off += kOwnerSlice) {
      float* slice = block + off;
      const int len = (int)std::min(kOwnerSlice, counts[owner] - off);
      check(MPI_Ireduce(rank_ == owner ? MPI_IN_PLACE : slice, slice, len, MPI_FLOAT, MPI_SUM,
                        owner, comm_, r->add()),
            name_ + " non-blocking reduce-scatter");
    }
    block += counts[owner];
  }
  return r;
}

std::unique_ptr<Request> MpiCommunicator::iall_gather_v(float* data,
                                                        const std::vector<long>& counts) {
  if (size_ == 1) return pending(watchdog_, {});
  auto r = pending(watchdog_, collective(OpKind::kAllGather), &counters_.all_gather);
  count(counters_.all_gather, counts[rank_]);
  float* block = data;
  for (int owner = 0; owner < size_; ++owner) {
    for (long off = 0; off < counts[owner]; off += kOwnerSlice)
      check(MPI_Ibcast(block + off, (int)std::min(kOwnerSlice, counts[owner] - off), MPI_FLOAT,
                       owner, comm_, r->add()),
            name_ + " non-blocking all-gather");
    block += counts[owner];
  }
  return r;
}

namespace {
// MPI_Alltoallv's int counts and displacements; a block or an offset past 2^31 floats is
// refused (an expert dispatch that large would not fit a rank's memory plan anyway).
std::pair<std::vector<int>, std::vector<int>> counts_and_offsets(const std::vector<long>& counts,
                                                                 const std::string& what) {
  std::vector<int> c(counts.size()), at(counts.size());
  long offset = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    if (counts[q] < 0 || counts[q] > INT32_MAX || offset > INT32_MAX)
      throw std::length_error(what + ": a block past 2^31 floats");
    c[q] = (int)counts[q], at[q] = (int)offset;
    offset += counts[q];
  }
  return {c, at};
}
}  // namespace

void MpiCommunicator::all_to_all_v(const float* send, const std::vector<long>& send_counts,
                                   float* recv, const std::vector<long>& recv_counts) {
  const std::string what = name_ + " all-to-all";
  if ((int)send_counts.size() != size_ || (int)recv_counts.size() != size_)
    throw std::invalid_argument(what + ": one count per rank");
  if (size_ == 1) {
    std::copy_n(send, send_counts[0], recv);
    return;
  }
  long sent = 0;
  for (int q = 0; q < size_; ++q) sent += q == rank_ ? 0 : send_counts[q];
  const auto timed = count_blocking(counters_.all_to_all, sent, true);
  const auto [sc, sd] = counts_and_offsets(send_counts, what);
  const auto [rc, rd] = counts_and_offsets(recv_counts, what);
  run_blocking(
      watchdog_.get(), collective(OpKind::kAllToAll), what,
      [&] {
        return MPI_Alltoallv(send, sc.data(), sd.data(), MPI_FLOAT, recv, rc.data(), rd.data(),
                             MPI_FLOAT, comm_);
      },
      [&](MPI_Request* r) {
        return MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_FLOAT, recv, rc.data(), rd.data(),
                              MPI_FLOAT, comm_, r);
      });
}

std::unique_ptr<Request> MpiCommunicator::ibroadcast(int* data, long n, int root) {
  if (size_ > 1) count(counters_.broadcast, n);
  auto r = pending(watchdog_, collective(OpKind::kBroadcast), &counters_.broadcast);
  check(MPI_Ibcast(data, (int)n, MPI_INT, root, comm_, r->add()), name_ + " ibroadcast");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::isend(const float* data, long n, int dest, int tag) {
  if (size_ > 1) count(counters_.send, n);
  auto r = pending(watchdog_, point_to_point(OpKind::kSend, dest), &counters_.send);
  check(MPI_Isend(data, (int)n, MPI_FLOAT, dest, tag, comm_, r->add()), name_ + " isend");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::irecv(float* data, long n, int source, int tag) {
  if (size_ > 1) count(counters_.recv, n);
  auto r = pending(watchdog_, point_to_point(OpKind::kRecv, source), &counters_.recv);
  check(MPI_Irecv(data, (int)n, MPI_FLOAT, source, tag, comm_, r->add()), name_ + " irecv");
  return r;
}

namespace {

bool env_set(const char* name) {
  return std::getenv(name) != nullptr;
}

bool env_equal(const char* a, const char* b) {
  return env_set(a) && env_set(b) && std::string(std::getenv(a)) == std::getenv(b);
}

// Nothing listens on a network interface unless the job spans nodes. Left to itself, Open MPI
// opens its TCP transport's listening sockets on 0.0.0.0 and [::] in every process, and a
// process started without a launcher also forks a helper daemon (orted) that listens on all
// interfaces. A process without a launcher runs without that daemon (it cannot spawn
// processes, which trident never does) and, like every rank of a one-node job, talks
// through shared memory and to itself only. Jobs over several nodes keep TCP (restrict it
// with OMPI_MCA_btl_tcp_if_include). A user's own setting wins.
void keep_off_the_network() {
  const bool launched = env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") ||
                        env_set("PMI_RANK") || env_set("SLURM_STEP_ID");
  const bool one_node =
      env_equal("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE") ||
      (env_set("SLURM_STEP_NUM_NODES") && std::string(std::getenv("SLURM_STEP_NUM_NODES")) == "1");
  if (!launched) {
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    // Every such process is job [0,1], so all of them share one session directory,
    // /tmp/ompi.<host>.<uid>/jf.0/1/0, which each creates at start and removes at the end:
    // under load one's removal lands inside another's creation and that MPI_Init aborts
    // (measured: 1 in ~800 starts with 4 at a time on 2 busy cores). Alone, the process needs
    // no session directory (no daemon, no peers), so it makes none.
    setenv("OMPI_MCA_orte_create_session_dirs", "0", 0);
  }
  if (!launched || one_node) setenv("OMPI_MCA_btl", "self,vader", 0);
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  keep_off_the_network();
  // Non-blocking reductions allocate their temporaries per operation (Open MPI's libnbc);
  // from fresh mmaps every page faults again each step (measured: the distributed
  // optimizer's exposed reduce-scatter halves when they come from a reused heap instead).
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Open MPI's non-blocking reduce picks a chain of small segments for few ranks, each
  // segment one more round that only an MPI call moves on: a bucket launched during
  // backward then barely moves until the step waits for it. The binomial tree sends each
  // slice whole (measured at d = 2 on gpt2-small: 200 -> 130 ms exposed). A user's own
  // setting wins.
  setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "2", 0);
  // Its non-blocking all-reduce picks a binomial reduce + broadcast for 2 ranks, which moves
  // the whole buffer twice in turn: 2.6x the blocking all-reduce's time at 8 MiB. Every
  // watched blocking all-reduce is a non-blocking one (comm/watchdog.h), so take
  // Rabenseifner's reduce-scatter + all-gather instead (bench_comm: 0.93 ms against the
  // blocking call's 0.98 ms at 8 MiB, 2 ranks, shared memory).
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  // Errors come back as codes and become exceptions; the top level then aborts the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiRuntime::~MpiRuntime() {
  MPI_Finalize();
}

void MpiRuntime::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

std::vector<std::string> MpiRuntime::node_names() const {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<char> all((size_t)size_ * MPI_MAX_PROCESSOR_NAME, 0);
  // The first collective of every command: ranks that cannot reach each other fail here
  // (and the job ends) rather than hanging in the setup after it.
  check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                      MPI_CHAR, MPI_COMM_WORLD),
        "gathering every rank's node name (MPI_Allgather over the world)");
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.emplace_back(all.data() + (size_t)r * MPI_MAX_PROCESSOR_NAME);
  return out;
}

CpuMask MpiRuntime::node_cpus(const std::vector<std::string>& nodes) const {
  const CpuMask mine = allowed_cpus();
  std::vector<CpuMask> all(size_);
  check(MPI_Allgather(mine.data(), (int)mine.size(), MPI_UINT64_T, all.data(), (int)mine.size(),
                      MPI_UINT64_T, MPI_COMM_WORLD),
        "gathering every rank's CPU affinity (MPI_Allgather over the world)");
  CpuMask out{};
  for (int r = 0; r < size_; ++r)
    if (nodes[r] == nodes[rank_]) out |= all[r];
  return out;
}

}  // namespace trident::comm
