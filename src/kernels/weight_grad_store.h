#pragma once
// Deferred weight gradients for zero-bubble pipeline schedules (Qi et al. 2023): a linear
// layer's backward is dx = dy W (B, on the pipeline's critical path) and dW += dy^T x (W,
// which may wait). While a micro-batch's B records, mixed_linear_backward computes dx only
// and hands the two operands of dW's product here; W replays the products in the order
// recorded, each on its operands exactly as the undeferred backward takes them (bf16 in
// bf16 runs, fp16-rounded in fp16 runs), so every dW is accumulated bit for bit as the
// undeferred backward would.
//
// What is copied and what is not: the model holds the activations W reads (the linears'
// inputs) from the micro-batch's F to its W, and names that memory at begin(): an operand
// inside it is referenced, and W rounds it again where the product takes it rounded (the
// same deterministic rounding B would have done). Everything else is copied: the output
// gradients (in scratch the next layer overwrites) and the inputs that exist only during B
// (recomputed activations, the all-gathered input of sequence parallelism). An output
// gradient's copy goes to memory the model donates (held activations that are dead once B
// passed them, e.g. qkv after the attention backward) while it fits, and otherwise to the
// store's planned buffers, one per micro-batch between its B and its W (the schedule's
// max_deferred_weight_grads).
#include <functional>
#include <map>
#include <vector>

#include "kernels/low_precision.h"

namespace trident::kernels {

struct LinearPrecision;

class WeightGradStore {
 public:
  // One entry's buffer (from the model's arena): the copied operands of one micro-batch.
  void add_entry(float* buffer, long floats);
  int entries() const { return (int)entries_.size(); }
  // B of micro-batch `key` starts: products are recorded until end(). Operands inside
  // [held_begin, held_end) stay unchanged until the micro-batch's W and are not copied.
  void begin(int key, const float* held_begin = nullptr, const float* held_end = nullptr);
  void end() {
    recording_ = -1;
    donate(nullptr, 0);
  }
  bool recording() const { return recording_ >= 0; }
  // The following products' output gradients are copied into `region` (inside the held
  // memory and no longer read by B or W; ignored otherwise), one after the other while they
  // fit, before the entry's buffer. donate(nullptr, 0) ends it.
  void donate(float* region, long floats);
  // Keeps dw[out, in] += dy[rows, out]^T x[rows, in] for W. dy: as the product takes it;
  // x: the linear's input as given to its backward (W rounds it as the product takes it).
  void record(const LinearPrecision& p, GemmOperand dy, GemmOperand x, float* dw, int rows, int in,
              int out);
  // Closes a group of products (one layer's), named by `tag`, for replay's callback.
  void mark(int tag);
  // W of micro-batch `key`: runs its products in order, calling group_done(tag) after each
  // group's; then frees the entry.
  void replay(int key, const std::function<void(int tag)>& group_done);
  // Floats an entry takes for an operand of n elements (bf16 ones two to a float).
  static long operand_floats(long n, bool bf16) { return bf16 ? (n + 1) / 2 : n; }
  // Floats of entry memory used by the last B recorded (tests compare it with the plan).
  long last_entry_floats() const { return last_used_; }

 private:
  struct Product {
    const LinearPrecision* precision = nullptr;  // null: the end of group `tag`
    float* dw = nullptr;
    int rows = 0, in = 0, out = 0, tag = 0;
    GemmOperand dy, x;
    bool round_x = false;  // x is the held input: W rounds it as the product takes it
  };
  struct Entry {
    float* buffer;
    long floats, used = 0;
    int key = -1;  // the micro-batch it holds; -1 when free
    std::vector<Product> products;
  };
  bool held(const void* p) const;
  // Room for `floats` floats: in the donated region when allowed and it fits, else the entry.
  float* room(Entry& e, long floats, bool donated);

  std::vector<Entry> entries_;
  std::map<int, int> entry_of_;  // micro-batch -> entry
  int recording_ = -1;           // entry being recorded
  const char *held_begin_ = nullptr, *held_end_ = nullptr;
  float* donated_ = nullptr;
  long donated_floats_ = 0, donated_used_ = 0;
  long last_used_ = 0;
};

}  // namespace trident::kernels
