#pragma once
// The only way a layer talks to other ranks. Tensor-, pipeline- and data-parallel
// groups each get their own Communicator; the one-rank implementation below makes
// every collective a no-op so the same model code runs in one process.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trident::comm {

enum class ReduceOp { kSum, kMax };

// Counts what went over a group, so the paper's communication volumes can be checked.
// Bytes are the payload a rank hands to the collective (count * sizeof(float)).
struct CollectiveCounters {
  struct Entry {
    std::int64_t calls = 0;
    std::int64_t bytes = 0;
    // Wall time inside the MPI library: the whole call when blocking, the wait when not
    // (what a non-blocking operation costs beyond the work it overlapped).
    double seconds = 0;
  };
  // all_to_all: bytes are those sent to the other ranks (a rank's block to itself stays).
  Entry all_reduce, all_gather, reduce_scatter, broadcast, send, recv, all_to_all;
  // What a caller reports of its own overlap of work with this group's non-blocking sends
  // and receives (the ring attention's steps, context_parallel/ring_attention.h). The MPI
  // layer cannot see it: it times only the waits, not the work between post and wait.
  struct Overlap {
    double compute_seconds = 0;         // work done while transfers were in flight
    double waited_seconds = 0;          // then blocked in wait() for those transfers
    std::int64_t overlapped_bytes = 0;  // sent by those transfers
    // Transfers waited on with no work to hide them: what a transfer takes alone, per byte.
    double alone_seconds = 0;
    std::int64_t alone_bytes = 0;
    Overlap& operator+=(const Overlap& o);
    Overlap& operator-=(const Overlap& o);
  };
  Overlap overlap;
  std::int64_t total_calls() const;
  std::int64_t total_bytes() const;
  CollectiveCounters& operator+=(const CollectiveCounters& other);
  CollectiveCounters& operator-=(const CollectiveCounters& other);
};

// A pending non-blocking operation.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  // Lets the operation progress (MPI moves non-blocking collectives only inside MPI calls);
  // returns true once it has completed.
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  virtual void all_reduce(float* data, long count, ReduceOp op) = 0;
  // For statistics that must not lose precision (norms, loss sums).
  virtual void all_reduce(double* data, long count, ReduceOp op) = 0;
  // recv holds size() * count floats, rank r's block at r * count. In place when send is
  // this rank's block of recv (recv + rank() * count).
  virtual void all_gather(const float* send, float* recv, long count) = 0;
  // send holds size() * count floats; recv gets the sum of every rank's block rank(). In
  // place when send == recv: the sum lands in this rank's own block of the buffer.
  virtual void reduce_scatter(const float* send, float* recv, long count) = 0;
  virtual void broadcast(float* data, long count, int root) = 0;
  // Personalised exchange (MPI_Alltoallv): this rank sends send_counts[q] floats to rank q,
  // the blocks packed in rank order in `send`, and receives recv_counts[q] floats from rank
  // q, packed in rank order in `recv`. Counts must agree pairwise (send_counts[q] here ==
  // recv_counts[this rank] on q; the expert dispatcher exchanges them first). send and recv
  // must not overlap.
  virtual void all_to_all_v(const float* send, const std::vector<long>& send_counts, float* recv,
                            const std::vector<long>& recv_counts) = 0;
  // Integers (commands and token ids: generation's coordinator tells the other ranks).
  virtual void broadcast(int* data, long count, int root) = 0;
  // A follower that may wait long for the next command polls this one instead of blocking
  // (a blocking MPI call spins a core for as long as it waits).
  virtual std::unique_ptr<Request> ibroadcast(int* data, long count, int root) = 0;
  virtual void send(const float* data, long count, int dest, int tag) = 0;
  virtual void recv(float* data, long count, int source, int tag) = 0;
  // Non-blocking forms; the buffers must stay alive until wait() returns.
  virtual std::unique_ptr<Request> iall_reduce(float* data, long count, ReduceOp op) = 0;
  virtual std::unique_ptr<Request> iall_gather(const float* send, float* recv, long count) = 0;
  virtual std::unique_ptr<Request> ireduce_scatter(const float* send, float* recv, long count) = 0;
  // Uneven, in-place forms over `data`, which holds every rank's block in rank order (rank
  // r's block: counts[r] floats, possibly 0). Reduce-scatter: afterwards rank r's block
  // holds the sum of all ranks' blocks r (the other blocks are unchanged). All-gather:
  // afterwards every block holds its owner's values. The distributed optimizer's buckets
  // use them: a bucket overlaps the contiguous shards of some ranks by uneven amounts.
  virtual std::unique_ptr<Request> ireduce_scatter_v(float* data,
                                                     const std::vector<long>& counts) = 0;
  virtual std::unique_ptr<Request> iall_gather_v(float* data, const std::vector<long>& counts) = 0;
  virtual std::unique_ptr<Request> isend(const float* data, long count, int dest, int tag) = 0;
  virtual std::unique_ptr<Request> irecv(float* data, long count, int source, int tag) = 0;
  const CollectiveCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }
  void add_overlap(const CollectiveCounters::Overlap& o) { counters_.overlap += o; }

 protected:
  CollectiveCounters counters_;
};

class SingleRankCommunicator final : public Communicator {
 public:
  explicit SingleRankCommunicator(std::string name) : name_(std::move(name)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return name_; }
  void all_reduce(float*, long, ReduceOp) override {}
  void all_reduce(double*, long, ReduceOp) override {}
  void all_gather(const float* send, float* recv, long count) override;
  void reduce_scatter(const float* send, float* recv, long count) override;
  void broadcast(float*, long, int) override {}
  void broadcast(int*, long, int) override {}
  void all_to_all_v(const float* send, const std::vector<long>& send_counts, float* recv,
                    const std::vector<long>& recv_counts) override;
  std::unique_ptr<Request> ibroadcast(int*, long, int) override;
  void send(const float*, long, int, int) override;
  void recv(float*, long, int, int) override;
  std::unique_ptr<Request> iall_reduce(float*, long, ReduceOp) override;
  std::unique_ptr<Request> iall_gather(const float* send, float* recv, long count) override;
  std::unique_ptr<Request> ireduce_scatter(const float* send, float* recv, long count) override;
  std::unique_ptr<Request> ireduce_scatter_v(float*, const std::vector<long>&) override;
  std::unique_ptr<Request> iall_gather_v(float*, const std::vector<long>&) override;
  std::unique_ptr<Request> isend(const float*, long, int, int) override;
  std::unique_ptr<Request> irecv(float*, long, int, int) override;

 private:
  std::string name_;
};

}  // namespace trident::comm
