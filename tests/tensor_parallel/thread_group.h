#pragma once
// A tensor-parallel group inside one process, for unit tests: t std::threads sharing memory,
// each running one rank's part of a layer through a ThreadCommunicator. The collectives are
// written here with plain loops over the buffers the ranks publish, between two barriers
// (every rank has published / every rank has read), and sum in rank order, so every rank
// gets the same bits. Point-to-point messages go through a mailbox: a send copies its data
// into the queue of (source, destination, tag) and completes at once; a receive takes the
// oldest message of its queue, waiting for one (MPI's order for one sender and tag). A rank
// that throws breaks the barrier, so the others fail instead of waiting forever; a rank that
// never arrives (collectives out of order, a message never sent) times out.
//
// run_group(1, ...) runs the one rank on the calling thread with the production
// comm::SingleRankCommunicator, so t = 1 tests the one-process path the trainer takes.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "comm/communicator.h"

namespace trident::tensor_parallel_test {

// What the ranks of one group share: a barrier and the buffers each rank hands to the
// collective in progress.
class SharedGroup {
 public:
  explicit SharedGroup(int size) : size_(size), published_(size) {}
  int size() const { return size_; }

  // Blocks until every rank has arrived. Throws when the group broke (a rank failed) or
  // when the others do not arrive within the timeout.
  void barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) throw std::runtime_error("thread group: another rank failed");
    const long generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    const bool released = changed_.wait_for(lock, std::chrono::seconds(120),
                                            [&] { return generation_ != generation || broken_; });
    if (generation_ != generation) return;
    broken_ = true;
    changed_.notify_all();
    throw std::runtime_error(released ? "thread group: another rank failed"
                                      : "thread group: a rank never reached the collective");
  }

  // A rank failed: wake the others, whose barriers and receives throw.
  void fail() {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
    changed_.notify_all();
  }

  // Point-to-point: a copy of data[0, count) queued for (source, dest, tag).
  void post(int source, int dest, int tag, const float* data, long count) {
    std::lock_guard<std::mutex> lock(mutex_);
    mailbox_[{source, dest, tag}].emplace_back(data, data + count);
    changed_.notify_all();
  }

  // The oldest message of (source, dest, tag) into data, which must be its size; false when
  // there is none yet and wait is false. Throws when the group broke or none came in time.
  bool take(int source, int dest, int tag, float* data, long count, bool wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::deque<std::vector<float>>& queue = mailbox_[{source, dest, tag}];
    if (wait && !changed_.wait_for(lock, std::chrono::seconds(120),
                                   [&] { return !queue.empty() || broken_; })) {
      broken_ = true;
      changed_.notify_all();
      throw std::runtime_error("thread group: a message was never sent");
    }
    if (broken_) throw std::runtime_error("thread group: another rank failed");
    if (queue.empty()) return false;
    if ((long)queue.front().size() != count)
      throw std::logic_error("ThreadCommunicator: a message of " +
                             std::to_string(queue.front().size()) + " floats received as " +
                             std::to_string(count));
    std::copy(queue.front().begin(), queue.front().end(), data);
    queue.pop_front();
    return true;
  }

  // Written by rank r before the first barrier of a collective, read by every rank
  // between the two barriers.
  const void*& published(int r) { return published_[r]; }

 private:
  const int size_;
  std::vector<const void*> published_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  long generation_ = 0;
  bool broken_ = false;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<float>>> mailbox_;
};

// A request whose operation completed inside the call that made it.
class CompletedRequest final : public comm::Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// A receive from the mailbox: it completes when the message is taken.
class MailboxRequest final : public comm::Request {
 public:
  MailboxRequest(SharedGroup& group, int source, int dest, int tag, float* data, long count)
      : group_(group), source_(source), dest_(dest), tag_(tag), data_(data), count_(count) {}
  void wait() override {
    if (!done_) done_ = group_.take(source_, dest_, tag_, data_, count_, true);
  }
  bool test() override {
    if (!done_) done_ = group_.take(source_, dest_, tag_, data_, count_, false);
    return done_;
  }

 private:
  SharedGroup& group_;
  const int source_, dest_, tag_;
  float* const data_;
  const long count_;
  bool done_ = false;
};

class ThreadCommunicator final : public comm::Communicator {
 public:
  ThreadCommunicator(SharedGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  std::string name() const override { return "tensor"; }

  void all_reduce(float* data, long count, comm::ReduceOp op) override {
    count_call(counters_.all_reduce, count);
    reduce_all(data, count, op);
  }
  void all_reduce(double* data, long count, comm::ReduceOp op) override {
    count_call(counters_.all_reduce, 2 * count);
    reduce_all(data, count, op);
  }
  void all_gather(const float* send, float* recv, long count) override {
    count_call(counters_.all_gather, count);
    std::vector<float> gathered((size_t)size() * count);
    exchange(send, [&](int r, const float* block) {
      std::copy_n(block, count, gathered.data() + (long)r * count);
    });
    std::copy(gathered.begin(), gathered.end(), recv);
  }
  void reduce_scatter(const float* send, float* recv, long count) override {
    count_call(counters_.reduce_scatter, count * size());
    std::vector<float> sum(count, 0.f);
    exchange(send, [&](int, const float* full) {
      const float* mine = full + (long)rank_ * count;
      for (long i = 0; i < count; ++i) sum[i] += mine[i];
    });
    std::copy(sum.begin(), sum.end(), send == recv ? recv + (long)rank_ * count : recv);
  }
  void broadcast(float* data, long count, int root) override {
    count_call(counters_.broadcast, count);
    copy_from(data, count, root);
  }
  void broadcast(int* data, long count, int root) override {
    count_call(counters_.broadcast, count);
    copy_from(data, count, root);
  }
  std::unique_ptr<comm::Request> ibroadcast(int* data, long count, int root) override {
    broadcast(data, count, root);
    return std::make_unique<CompletedRequest>();
  }
  void all_to_all_v(const float* send, const std::vector<long>& send_counts, float* recv,
                    const std::vector<long>& recv_counts) override {
    count_call(counters_.all_to_all, offset_of(send_counts, size()) - send_counts[rank_]);
    // Each rank publishes where its blocks are and how long each is; rank q's block for
    // this rank starts after q's blocks for the ranks before this one.
    struct Outbox {
      const float* data;
      const std::vector<long>* counts;
    } mine{send, &send_counts};
    std::vector<float> received(offset_of(recv_counts, size()));
    exchange(&mine, [&](int q, const Outbox* box) {
      const long n = (*box->counts)[rank_];
      if (n != recv_counts[q]) throw std::logic_error("ThreadCommunicator: all-to-all counts");
      std::copy_n(box->data + offset_of(*box->counts, rank_), n,
                  received.data() + offset_of(recv_counts, q));
    });
    std::copy(received.begin(), received.end(), recv);
  }
  void send(const float* data, long count, int dest, int tag) override {
    count_call(counters_.send, count);
    group_.post(rank_, dest, tag, data, count);
  }
  void recv(float* data, long count, int source, int tag) override {
    count_call(counters_.recv, count);
    group_.take(source, rank_, tag, data, count, true);
  }
  std::unique_ptr<comm::Request> iall_reduce(float* data, long count, comm::ReduceOp op) override {
    all_reduce(data, count, op);
    return std::make_unique<CompletedRequest>();
  }
  std::unique_ptr<comm::Request> iall_gather(const float* send, float* recv, long count) override {
    all_gather(send, recv, count);
    return std::make_unique<CompletedRequest>();
  }
  std::unique_ptr<comm::Request> ireduce_scatter(const float* send, float* recv,
                                                 long count) override {
    reduce_scatter(send, recv, count);
    return std::make_unique<CompletedRequest>();
  }
  std::unique_ptr<comm::Request> ireduce_scatter_v(float* data,
                                                   const std::vector<long>& counts) override {
    const long first = offset_of(counts, rank_), n = counts[rank_];
    count_call(counters_.reduce_scatter, offset_of(counts, size()));
    std::vector<float> sum(n, 0.f);
    exchange(data, [&](int, const float* all) {
      for (long i = 0; i < n; ++i) sum[i] += all[first + i];
    });
    std::copy(sum.begin(), sum.end(), data + first);
    return std::make_unique<CompletedRequest>();
  }
  std::unique_ptr<comm::Request> iall_gather_v(float* data,
                                               const std::vector<long>& counts) override {
    count_call(counters_.all_gather, counts[rank_]);
    std::vector<float> gathered(offset_of(counts, size()));
    exchange(data, [&](int r, const float* all) {
      std::copy_n(all + offset_of(counts, r), counts[r], gathered.data() + offset_of(counts, r));
    });
    std::copy(gathered.begin(), gathered.end(), data);
    return std::make_unique<CompletedRequest>();
  }
  std::unique_ptr<comm::Request> isend(const float* data, long count, int dest, int tag) override {
    send(data, count, dest, tag);
    return std::make_unique<CompletedRequest>();
  }
  std::unique_ptr<comm::Request> irecv(float* data, long count, int source, int tag) override {
    count_call(counters_.recv, count);
    return std::make_unique<MailboxRequest>(group_, source, rank_, tag, data, count);
  }

 private:
  // Publishes `mine`, hands every rank's published buffer (in rank order) to `read`, and
  // returns once every rank has read: the caller may then overwrite its buffers.
  template <typename T, typename F>
  void exchange(const T* mine, F read) {
    group_.published(rank_) = mine;
    group_.barrier();
    for (int r = 0; r < size(); ++r) read(r, static_cast<const T*>(group_.published(r)));
    group_.barrier();
  }

  template <typename T>
  void reduce_all(T* data, long count, comm::ReduceOp op) {
    std::vector<T> result(count);
    exchange(static_cast<const T*>(data), [&](int r, const T* x) {
      for (long i = 0; i < count; ++i)
        result[i] = r == 0                       ? x[i]
                    : op == comm::ReduceOp::kSum ? result[i] + x[i]
                                                 : std::max(result[i], x[i]);
    });
    std::copy(result.begin(), result.end(), data);
  }

  template <typename T>
  void copy_from(T* data, long count, int root) {
    std::vector<T> value(count);
    exchange(static_cast<const T*>(data), [&](int r, const T* x) {
      if (r == root) std::copy_n(x, count, value.data());
    });
    std::copy(value.begin(), value.end(), data);
  }

  static long offset_of(const std::vector<long>& counts, int r) {
    long at = 0;
    for (int k = 0; k < r; ++k) at += counts[k];
    return at;
  }

  void count_call(comm::CollectiveCounters::Entry& e, long floats) {
    ++e.calls;
    e.bytes += floats * (long)sizeof(float);
  }

  SharedGroup& group_;
  const int rank_;
};

// Runs body(tp) once per rank of a group of t, rank r on its own thread (one OpenMP thread
// each: t ranks share this machine's cores), and returns when all have finished. The first
// exception a rank threw is rethrown here.
inline void run_group(int t, const std::function<void(comm::Communicator&)>& body) {
  if (t == 1) {
    comm::SingleRankCommunicator tp("tensor");
    body(tp);
    return;
  }
  SharedGroup group(t);
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < t; ++r)
    threads.emplace_back([&, r] {
      omp_set_num_threads(1);
      ThreadCommunicator tp(group, r);
      try {
        body(tp);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (!first) first = std::current_exception();
        }
        group.fail();
      }
    });
  for (std::thread& thread : threads) thread.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace trident::tensor_parallel_test
