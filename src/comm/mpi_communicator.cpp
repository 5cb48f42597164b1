#include "comm/mpi_communicator.h"

#include <malloc.h>

#include <cstdlib>
#include <stdexcept>
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

struct MpiRequest final : Request {
  MPI_Request request = MPI_REQUEST_NULL;
  void wait() override { check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait"); }
  bool test() override {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }
  ~MpiRequest() override {
    if (request != MPI_REQUEST_NULL) MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
};

// Several MPI operations that complete together.
struct MultiRequest final : Request {
  std::vector<MPI_Request> requests;
  void wait() override {
    check(MPI_Waitall((int)requests.size(), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  }
  bool test() override {
    int done = 0;
    check(MPI_Testall((int)requests.size(), requests.data(), &done, MPI_STATUSES_IGNORE),
          "MPI_Testall");
    return done != 0;
  }
  ~MultiRequest() override {
    if (!requests.empty()) MPI_Waitall((int)requests.size(), requests.data(), MPI_STATUSES_IGNORE);
  }
};

// Slices of an uneven in-place collective done as one operation per owner: a reduce to it,
// or a broadcast from it. Slices bound the temporaries MPI stages for a reduction.
constexpr long kOwnerSlice = 1L << 22;

void count(CollectiveCounters::Entry& e, long floats) {
  ++e.calls;
  e.bytes += floats * (long)sizeof(float);
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name)
    : comm_(comm), name_(std::move(name)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && comm_ != MPI_COMM_NULL)
    MPI_Comm_free(&comm_);
}

void MpiCommunicator::all_reduce(float* data, long n, ReduceOp op) {
  if (size_ > 1) count(counters_.all_reduce, n);
  if (size_ == 1) return;
  for (long off = 0; off < n; off += kMaxChunk)
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, (int)std::min(kMaxChunk, n - off), MPI_FLOAT,
                        mpi_op(op), comm_),
          name_ + " all-reduce");
}

void MpiCommunicator::all_reduce(double* data, long n, ReduceOp op) {
  if (size_ == 1) return;  // nothing moves in a one-rank group: nothing is counted
  ++counters_.all_reduce.calls;
  counters_.all_reduce.bytes += n * (long)sizeof(double);
  check(MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_DOUBLE, mpi_op(op), comm_),
        name_ + " all-reduce");
}

void MpiCommunicator::all_gather(const float* send, float* recv, long n) {
  if (size_ > 1) count(counters_.all_gather, n);
  if (n > kMaxChunk) throw std::length_error(name_ + ": all-gather over 2^30 floats");
  const void* source = send == recv + (long)rank_ * n ? MPI_IN_PLACE : send;
  check(MPI_Allgather(source, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, comm_),
        name_ + " all-gather");
}

void MpiCommunicator::reduce_scatter(const float* send, float* recv, long n) {
  if (size_ > 1) count(counters_.reduce_scatter, n * size_);
  if (send == recv) {
    // In place as one reduce per block, in slices: OpenMPI's reduce_scatter_block stages the
    // whole buffer in a temporary on one rank, which would break the memory plan.
    constexpr long kSlice = 1L << 22;
    for (int root = 0; root < size_; ++root)
      for (long off = 0; off < n; off += kSlice) {
        float* block = recv + (long)root * n + off;
        const int len = (int)std::min(kSlice, n - off);
        check(MPI_Reduce(rank_ == root ? MPI_IN_PLACE : block, block, len, MPI_FLOAT, MPI_SUM, root,
                         comm_),
              name_ + " reduce-scatter");
      }
    return;
  }
  if (n > kMaxChunk) throw std::length_error(name_ + ": reduce-scatter over 2^30 floats");
  check(MPI_Reduce_scatter_block(send, recv, (int)n, MPI_FLOAT, MPI_SUM, comm_),
        name_ + " reduce-scatter");
}

void MpiCommunicator::broadcast(float* data, long n, int root) {
  if (size_ > 1) count(counters_.broadcast, n);
  for (long off = 0; off < n; off += kMaxChunk)
    check(MPI_Bcast(data + off, (int)std::min(kMaxChunk, n - off), MPI_FLOAT, root, comm_),
          name_ + " broadcast");
}

void MpiCommunicator::broadcast(int* data, long n, int root) {
  if (size_ > 1) count(counters_.broadcast, n);
  for (long off = 0; off < n; off += kMaxChunk)
    check(MPI_Bcast(data + off, (int)std::min(kMaxChunk, n - off), MPI_INT, root, comm_),
          name_ + " broadcast");
}

void MpiCommunicator::send(const float* data, long n, int dest, int tag) {
  if (size_ > 1) count(counters_.send, n);
  check(MPI_Send(data, (int)n, MPI_FLOAT, dest, tag, comm_), name_ + " send");
}

void MpiCommunicator::recv(float* data, long n, int source, int tag) {
  if (size_ > 1) count(counters_.recv, n);
  check(MPI_Recv(data, (int)n, MPI_FLOAT, source, tag, comm_, MPI_STATUS_IGNORE), name_ + " recv");
}

std::unique_ptr<Request> MpiCommunicator::iall_reduce(float* data, long n, ReduceOp op) {
  if (size_ > 1) count(counters_.all_reduce, n);
  auto r = std::make_unique<MpiRequest>();
  if (size_ > 1)
    check(MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, mpi_op(op), comm_, &r->request),
          name_ + " non-blocking all-reduce");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::iall_gather(const float* send, float* recv, long n) {
  if (size_ > 1) count(counters_.all_gather, n);
  auto r = std::make_unique<MpiRequest>();
  check(MPI_Iallgather(send, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, comm_, &r->request),
        name_ + " non-blocking all-gather");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::ireduce_scatter(const float* send, float* recv, long n) {
  if (send == recv) {  // the in-place form runs to completion (see reduce_scatter)
    reduce_scatter(send, recv, n);
    return std::make_unique<MpiRequest>();
  }
  if (size_ > 1) count(counters_.reduce_scatter, n * size_);
  auto r = std::make_unique<MpiRequest>();
  check(MPI_Ireduce_scatter_block(send, recv, (int)n, MPI_FLOAT, MPI_SUM, comm_, &r->request),
        name_ + " non-blocking reduce-scatter");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::ireduce_scatter_v(float* data,
                                                            const std::vector<long>& counts) {
  auto r = std::make_unique<MultiRequest>();
  if (size_ == 1) return r;
  long total = 0;
  for (long c : counts) total += c;
  count(counters_.reduce_scatter, total);
  float* block = data;
  for (int owner = 0; owner < size_; ++owner) {
    for (long off = 0; off < counts[owner]; off += kOwnerSlice) {
      float* slice = block + off;
      const int len = (int)std::min(kOwnerSlice, counts[owner] - off);
      r->requests.emplace_back();
      check(MPI_Ireduce(rank_ == owner ? MPI_IN_PLACE : slice, slice, len, MPI_FLOAT, MPI_SUM,
                        owner, comm_, &r->requests.back()),
            name_ + " non-blocking reduce-scatter");
    }
    block += counts[owner];
  }
  return r;
}

std::unique_ptr<Request> MpiCommunicator::iall_gather_v(float* data,
                                                        const std::vector<long>& counts) {
  auto r = std::make_unique<MultiRequest>();
  if (size_ == 1) return r;
  count(counters_.all_gather, counts[rank_]);
  float* block = data;
  for (int owner = 0; owner < size_; ++owner) {
    for (long off = 0; off < counts[owner]; off += kOwnerSlice) {
      r->requests.emplace_back();
      check(MPI_Ibcast(block + off, (int)std::min(kOwnerSlice, counts[owner] - off), MPI_FLOAT,
                       owner, comm_, &r->requests.back()),
            name_ + " non-blocking all-gather");
    }
    block += counts[owner];
  }
  return r;
}

std::unique_ptr<Request> MpiCommunicator::ibroadcast(int* data, long n, int root) {
  if (size_ > 1) count(counters_.broadcast, n);
  auto r = std::make_unique<MpiRequest>();
  check(MPI_Ibcast(data, (int)n, MPI_INT, root, comm_, &r->request), name_ + " ibroadcast");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::isend(const float* data, long n, int dest, int tag) {
  if (size_ > 1) count(counters_.send, n);
  auto r = std::make_unique<MpiRequest>();
  check(MPI_Isend(data, (int)n, MPI_FLOAT, dest, tag, comm_, &r->request), name_ + " isend");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::irecv(float* data, long n, int source, int tag) {
  if (size_ > 1) count(counters_.recv, n);
  auto r = std::make_unique<MpiRequest>();
  check(MPI_Irecv(data, (int)n, MPI_FLOAT, source, tag, comm_, &r->request), name_ + " irecv");
  return r;
}

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
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
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.emplace_back(all.data() + (size_t)r * MPI_MAX_PROCESSOR_NAME);
  return out;
}

}  // namespace trident::comm
