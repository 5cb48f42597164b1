#pragma once
// Deferred weight gradients for zero-bubble pipeline schedules (Qi et al. 2023): a linear
// layer's backward is dx = dy W (B, on the pipeline's critical path) and dW += dy^T x (W,
// which may wait). While a micro-batch's B records, mixed_linear_backward computes dx only
// and hands the two operands of dW's product here, as that product takes them (bf16 in
// bf16 runs, fp16-rounded in fp16 runs); W replays the products in the order recorded, so
// every dW is accumulated exactly as the undeferred backward would.
//
// Operands are copied: dy lives in scratch the next layer overwrites, and x may be a
// recomputed or all-gathered (sequence-parallel) tensor that exists only during B. The
// copies live in planned buffers, one per micro-batch between its B and its W (the
// schedule's max_deferred_weight_grads); the activation slot itself is freed after B.
#include <functional>
#include <map>
#include <vector>

#include "kernels/low_precision.h"

namespace trident::kernels {

struct LinearPrecision;

class WeightGradStore {
 public:
  // One entry's buffer (from the model's arena): the operands of one micro-batch.
  void add_entry(float* buffer, long floats);
  int entries() const { return (int)entries_.size(); }
  // B of micro-batch `key` starts: products are recorded until end().
  void begin(int key);
  void end() { recording_ = -1; }
  bool recording() const { return recording_ >= 0; }
  // Keeps dw[out, in] += dy[rows, out]^T x[rows, in] for W, copying both operands.
  void record(const LinearPrecision& p, GemmOperand dy, GemmOperand x, float* dw, int rows, int in,
              int out);
  // Closes a group of products (one layer's), named by `tag`, for replay's callback.
  void mark(int tag);
  // W of micro-batch `key`: runs its products in order, calling group_done(tag) after each
  // group's; then frees the entry.
  void replay(int key, const std::function<void(int tag)>& group_done);
  // Floats an entry takes for an operand of n elements (bf16 ones two to a float).
  static long operand_floats(long n, bool bf16) { return bf16 ? (n + 1) / 2 : n; }

 private:
  struct Product {
    const LinearPrecision* precision = nullptr;  // null: the end of group `tag`
    float* dw = nullptr;
    int rows = 0, in = 0, out = 0, tag = 0;
    long dy_at = 0, x_at = 0;
    bool bf16 = false;
  };
  struct Entry {
    float* buffer;
    long floats, used = 0;
    int key = -1;  // the micro-batch it holds; -1 when free
    std::vector<Product> products;
  };
  long copy_in(Entry& e, GemmOperand x, long n);
  GemmOperand operand_at(const Entry& e, long at, bool bf16) const;

  std::vector<Entry> entries_;
  std::map<int, int> entry_of_;  // micro-batch -> entry
  int recording_ = -1;           // entry being recorded
};

}  // namespace trident::kernels
