#include "comm/communicator.h"

#include <algorithm>
#include <stdexcept>

namespace trident::comm {

namespace {
struct DoneRequest final : Request {
  void wait() override {}
  bool test() override { return true; }
};
}  // namespace

std::int64_t CollectiveCounters::total_calls() const {
  return all_reduce.calls + all_gather.calls + reduce_scatter.calls + broadcast.calls + send.calls +
         recv.calls + all_to_all.calls;
}

std::int64_t CollectiveCounters::total_bytes() const {
  return all_reduce.bytes + all_gather.bytes + reduce_scatter.bytes + broadcast.bytes + send.bytes +
         recv.bytes + all_to_all.bytes;
}

namespace {
template <typename Op>
void each_entry(CollectiveCounters& a, const CollectiveCounters& b, Op op) {
  op(a.all_reduce, b.all_reduce), op(a.all_gather, b.all_gather);
  op(a.reduce_scatter, b.reduce_scatter), op(a.broadcast, b.broadcast);
  op(a.send, b.send), op(a.recv, b.recv), op(a.all_to_all, b.all_to_all);
}
}  // namespace

CollectiveCounters::Overlap& CollectiveCounters::Overlap::operator+=(const Overlap& o) {
  compute_seconds += o.compute_seconds, waited_seconds += o.waited_seconds;
  overlapped_bytes += o.overlapped_bytes;
  alone_seconds += o.alone_seconds, alone_bytes += o.alone_bytes;
  return *this;
}

CollectiveCounters::Overlap& CollectiveCounters::Overlap::operator-=(const Overlap& o) {
  compute_seconds -= o.compute_seconds, waited_seconds -= o.waited_seconds;
  overlapped_bytes -= o.overlapped_bytes;
  alone_seconds -= o.alone_seconds, alone_bytes -= o.alone_bytes;
  return *this;
}

CollectiveCounters& CollectiveCounters::operator+=(const CollectiveCounters& o) {
  each_entry(*this, o, [](Entry& a, const Entry& b) {
    a.calls += b.calls, a.bytes += b.bytes, a.seconds += b.seconds;
  });
  overlap += o.overlap;
  return *this;
}

CollectiveCounters& CollectiveCounters::operator-=(const CollectiveCounters& o) {
  each_entry(*this, o, [](Entry& a, const Entry& b) {
    a.calls -= b.calls, a.bytes -= b.bytes, a.seconds -= b.seconds;
  });
  overlap -= o.overlap;
  return *this;
}

void SingleRankCommunicator::send(const float*, long, int, int) {
  throw std::logic_error(name_ + ": send on a one-rank group");
}

void SingleRankCommunicator::recv(float*, long, int, int) {
  throw std::logic_error(name_ + ": recv on a one-rank group");
}

std::unique_ptr<Request> SingleRankCommunicator::ibroadcast(int*, long, int) {
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> SingleRankCommunicator::iall_reduce(float*, long, ReduceOp) {
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> SingleRankCommunicator::iall_gather(const float* send, float* recv,
                                                             long count) {
  all_gather(send, recv, count);
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> SingleRankCommunicator::ireduce_scatter(const float* send, float* recv,
                                                                 long count) {
  reduce_scatter(send, recv, count);
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> SingleRankCommunicator::ireduce_scatter_v(float*,
                                                                   const std::vector<long>&) {
  return std::make_unique<DoneRequest>();  // one rank: its block already is the sum
}

std::unique_ptr<Request> SingleRankCommunicator::iall_gather_v(float*, const std::vector<long>&) {
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> SingleRankCommunicator::isend(const float*, long, int, int) {
  throw std::logic_error(name_ + ": isend on a one-rank group");
}

std::unique_ptr<Request> SingleRankCommunicator::irecv(float*, long, int, int) {
  throw std::logic_error(name_ + ": irecv on a one-rank group");
}

void SingleRankCommunicator::all_gather(const float* send, float* recv, long count) {
  if (send != recv) std::copy_n(send, count, recv);
}

void SingleRankCommunicator::all_to_all_v(const float* send, const std::vector<long>& send_counts,
                                          float* recv, const std::vector<long>& recv_counts) {
  if (send_counts.size() != 1 || recv_counts.size() != 1 || send_counts[0] != recv_counts[0])
    throw std::invalid_argument(name_ + ": all-to-all counts must be one equal pair on one rank");
  std::copy_n(send, send_counts[0], recv);
}

void SingleRankCommunicator::reduce_scatter(const float* send, float* recv, long count) {
  if (send != recv) std::copy_n(send, count, recv);
}

}  // namespace trident::comm
