#pragma once
// The only way a layer talks to other ranks. Tensor-, pipeline- and data-parallel
// groups each get their own Communicator; the one-rank implementation below makes
// every collective a no-op so the same model code runs in one process.
#include <cstdint>
#include <string>

namespace trident::comm {

enum class ReduceOp { kSum, kMax };

// Counts what went over a group, so the paper's communication volumes can be checked.
struct CollectiveCounters {
  std::int64_t calls = 0;
  std::int64_t bytes = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  virtual void all_reduce(float* data, long count, ReduceOp op) = 0;
  // recv holds size() * count floats, rank r's block at r * count.
  virtual void all_gather(const float* send, float* recv, long count) = 0;
  // send holds size() * count floats; recv gets the sum of every rank's block rank().
  virtual void reduce_scatter(const float* send, float* recv, long count) = 0;
  virtual void broadcast(float* data, long count, int root) = 0;
  const CollectiveCounters& counters() const { return counters_; }

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
  void all_gather(const float* send, float* recv, long count) override;
  void reduce_scatter(const float* send, float* recv, long count) override;
  void broadcast(float*, long, int) override {}

 private:
  std::string name_;
};

}  // namespace trident::comm
