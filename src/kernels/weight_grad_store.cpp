#include "kernels/weight_grad_store.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/mixed_linear.h"

namespace trident::kernels {

void WeightGradStore::add_entry(float* buffer, long floats) {
  entries_.push_back({buffer, floats, 0, -1, {}});
}

void WeightGradStore::begin(int key) {
  if (entry_of_.count(key))
    throw std::logic_error("deferred weight gradients: micro-batch " + std::to_string(key) +
                           " recorded twice before its W");
  auto free =
      std::find_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.key < 0; });
  if (free == entries_.end())
    throw std::logic_error(
        "deferred weight gradients: more micro-batches between B and W than the " +
        std::to_string(entries_.size()) + " planned");
  free->key = key, free->used = 0;
  free->products.clear();
  recording_ = (int)(free - entries_.begin());
  entry_of_[key] = recording_;
}

long WeightGradStore::copy_in(Entry& e, GemmOperand x, long n) {
  const long at = e.used, floats = operand_floats(n, x.bf16 != nullptr);
  if (at + floats > e.floats)
    throw std::logic_error("deferred weight gradients: the operands outgrow the planned " +
                           std::to_string(e.floats) + " floats");
  if (x.bf16)
    std::copy_n(x.bf16, n, reinterpret_cast<bf16_t*>(e.buffer + at));
  else
    std::copy_n(x.fp32, n, e.buffer + at);
  e.used += floats;
  return at;
}

GemmOperand WeightGradStore::operand_at(const Entry& e, long at, bool bf16) const {
  if (bf16) return reinterpret_cast<const bf16_t*>(e.buffer + at);
  return e.buffer + at;
}

void WeightGradStore::record(const LinearPrecision& p, GemmOperand dy, GemmOperand x, float* dw,
                             int rows, int in, int out) {
  if ((dy.bf16 != nullptr) != (x.bf16 != nullptr))
    throw std::logic_error("deferred weight gradients: operands of different precisions");
  Entry& e = entries_.at(recording_);
  Product product{&p, dw, rows, in, out, 0, 0, 0, dy.bf16 != nullptr};
  product.dy_at = copy_in(e, dy, (long)rows * out);
  product.x_at = copy_in(e, x, (long)rows * in);
  e.products.push_back(product);
}

void WeightGradStore::mark(int tag) {
  if (!recording()) return;
  Product end;
  end.tag = tag;
  entries_.at(recording_).products.push_back(end);
}

void WeightGradStore::replay(int key, const std::function<void(int tag)>& group_done) {
  auto it = entry_of_.find(key);
  if (it == entry_of_.end())
    throw std::logic_error("deferred weight gradients: W of micro-batch " + std::to_string(key) +
                           " before its B");
  Entry& e = entries_[it->second];
  for (const Product& q : e.products) {
    if (!q.precision) {
      if (group_done) group_done(q.tag);
      continue;
    }
    mixed_linear_backward_weight(*q.precision, operand_at(e, q.dy_at, q.bf16),
                                 operand_at(e, q.x_at, q.bf16), q.dw, q.rows, q.in, q.out);
  }
  e.key = -1;
  e.products.clear();
  entry_of_.erase(it);
}

}  // namespace trident::kernels
