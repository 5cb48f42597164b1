#pragma once
// The Communicator over an MPI communicator (OpenMPI from Debian). MPI is the distributed
// engine: it launches the ranks (mpirun, Slurm) and picks the transport.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/watchdog.h"
#include "core/cpu_set.h"

namespace trident::comm {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (freed on destruction unless it is MPI_COMM_WORLD). With a
  // watchdog, every wait has its deadline (blocking operations become non-blocking ones and
  // a watched wait); without, they are the plain blocking MPI calls.
  MpiCommunicator(MPI_Comm comm, std::string name, std::shared_ptr<Watchdog> watchdog = nullptr);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  void all_reduce(float* data, long count, ReduceOp op) override;
  void all_reduce(double* data, long count, ReduceOp op) override;
  void all_gather(const float* send, float* recv, long count) override;
  void reduce_scatter(const float* send, float* recv, long count) override;
  void broadcast(float* data, long count, int root) override;
  void broadcast(int* data, long count, int root) override;
  void all_to_all_v(const float* send, const std::vector<long>& send_counts, float* recv,
                    const std::vector<long>& recv_counts) override;
  std::unique_ptr<Request> ibroadcast(int* data, long count, int root) override;
  void send(const float* data, long count, int dest, int tag) override;
  void recv(float* data, long count, int source, int tag) override;
  std::unique_ptr<Request> iall_reduce(float* data, long count, ReduceOp op) override;
  std::unique_ptr<Request> iall_gather(const float* send, float* recv, long count) override;
  std::unique_ptr<Request> ireduce_scatter(const float* send, float* recv, long count) override;
  std::unique_ptr<Request> ireduce_scatter_v(float* data, const std::vector<long>& counts) override;
  std::unique_ptr<Request> iall_gather_v(float* data, const std::vector<long>& counts) override;
  std::unique_ptr<Request> isend(const float* data, long count, int dest, int tag) override;
  std::unique_ptr<Request> irecv(float* data, long count, int source, int tag) override;
  MPI_Comm handle() const { return comm_; }

 private:
  PendingOp collective(OpKind kind);
  PendingOp point_to_point(OpKind kind, int peer) const;

  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<Watchdog> watchdog_;
  int group_ = -1;                // the watchdog's index of this group
  std::vector<int> world_ranks_;  // of every member, in group order
};

// MPI_Init_thread / MPI_Finalize for the process, and the world's facts.
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  int world_rank() const { return rank_; }
  int world_size() const { return size_; }
  // Ends every rank of the job (the message must already be printed).
  [[noreturn]] static void abort(int code);
  // The processor (node) name of every rank, gathered on all ranks.
  std::vector<std::string> node_names() const;
  // The CPUs that the ranks on this rank's node may run on together (the union of their
  // affinities), given every rank's node name.
  CpuMask node_cpus(const std::vector<std::string>& nodes) const;

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace trident::comm
