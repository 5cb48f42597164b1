#pragma once
// A stand-in for rank `rank` of a group of `size` that must not communicate: building a
// rank's model (its chunks, reducers, optimizers and memory plan) only asks where the rank
// sits, so one process can build every rank of a layout in turn. Any collective throws.
#include <stdexcept>
#include <string>

#include "comm/communicator.h"

namespace trident::testing {

class PlacedCommunicator final : public comm::Communicator {
 public:
  PlacedCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "placed"; }
  void all_reduce(float*, long, comm::ReduceOp) override { refuse(); }
  void all_reduce(double*, long, comm::ReduceOp) override { refuse(); }
  void all_gather(const float*, float*, long) override { refuse(); }
  void reduce_scatter(const float*, float*, long) override { refuse(); }
  void broadcast(float*, long, int) override { refuse(); }
  void broadcast(int*, long, int) override { refuse(); }
  std::unique_ptr<comm::Request> ibroadcast(int*, long, int) override { refuse(); }
  void all_to_all_v(const float*, const std::vector<long>&, float*,
                    const std::vector<long>&) override {
    refuse();
  }
  void send(const float*, long, int, int) override { refuse(); }
  void recv(float*, long, int, int) override { refuse(); }
  std::unique_ptr<comm::Request> iall_reduce(float*, long, comm::ReduceOp) override { refuse(); }
  std::unique_ptr<comm::Request> iall_gather(const float*, float*, long) override { refuse(); }
  std::unique_ptr<comm::Request> ireduce_scatter(const float*, float*, long) override { refuse(); }
  std::unique_ptr<comm::Request> ireduce_scatter_v(float*, const std::vector<long>&) override {
    refuse();
  }
  std::unique_ptr<comm::Request> iall_gather_v(float*, const std::vector<long>&) override {
    refuse();
  }
  std::unique_ptr<comm::Request> isend(const float*, long, int, int) override { refuse(); }
  std::unique_ptr<comm::Request> irecv(float*, long, int, int) override { refuse(); }

 private:
  [[noreturn]] static void refuse() {
    throw std::logic_error("PlacedCommunicator: a stand-in rank cannot communicate");
  }
  int rank_, size_;
};

}  // namespace trident::testing
