#include "kernels/weight_grad_store.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/mixed_linear.h"

namespace trident::kernels {

void WeightGradStore::add_entry(float* buffer, long floats) {
  entries_.push_back({buffer, floats, 0, -1, {}});
}

void WeightGradStore::begin(int key, const float* held_begin, const float* held_end) {
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
  held_begin_ = reinterpret_cast<const char*>(held_begin);
  held_end_ = reinterpret_cast<const char*>(held_end);
  last_used_ = 0;
  donate(nullptr, 0);
}

bool WeightGradStore::held(const void* p) const {
  const std::less<const char*> less;
  const char* c = static_cast<const char*>(p);
  return c && held_begin_ && !less(c, held_begin_) && less(c, held_end_);
}

void WeightGradStore::donate(float* region, long floats) {
  const bool ok = region && held(region) && held(region + floats - 1);
  donated_ = ok ? region : nullptr;
  donated_floats_ = ok ? floats : 0;
  donated_used_ = 0;
}

float* WeightGradStore::room(Entry& e, long floats, bool donated) {
  if (donated && donated_ && donated_used_ + floats <= donated_floats_) {
    float* at = donated_ + donated_used_;
    donated_used_ += floats;
    return at;
  }
  if (e.used + floats > e.floats)
    throw std::logic_error("deferred weight gradients: the operands outgrow the planned " +
                           std::to_string(e.floats) + " floats");
  float* at = e.buffer + e.used;
  e.used += floats;
  last_used_ = e.used;
  return at;
}

void WeightGradStore::record(const LinearPrecision& p, GemmOperand dy, GemmOperand x, float* dw,
                             int rows, int in, int out) {
  Entry& e = entries_.at(recording_);
  Product product{&p, dw, rows, in, out, 0, dy, x, false};
  const long n_out = (long)rows * out, n_in = (long)rows * in;
  // dy as the product takes it: kept where it is if that is held memory, else copied.
  if (!held(dy.bf16 ? (const void*)dy.bf16 : (const void*)dy.fp32)) {
    if (dy.bf16) {
      auto* to = reinterpret_cast<bf16_t*>(room(e, operand_floats(n_out, true), true));
      std::copy_n(dy.bf16, n_out, to);
      product.dy = to;
    } else {
      float* to = room(e, n_out, true);
      std::copy_n(dy.fp32, n_out, to);
      product.dy = to;
    }
  }
  // x: referenced if held (rounded again by W when the product takes it rounded), else
  // copied as the product takes it.
  const bool round =
      (p.precision == Precision::kBf16 && !x.bf16) || p.precision == Precision::kFp16;
  if (held(x.bf16 ? (const void*)x.bf16 : (const void*)x.fp32)) {
    product.round_x = round;
  } else if (p.precision == Precision::kBf16) {
    auto* to = reinterpret_cast<bf16_t*>(room(e, operand_floats(n_in, true), false));
    if (x.bf16)
      std::copy_n(x.bf16, n_in, to);
    else
      to_bf16(x.fp32, to, n_in);
    product.x = to;
  } else {
    float* to = room(e, n_in, false);
    if (p.precision == Precision::kFp16)
      round_through_fp16(fp32_operand(x), to, n_in);
    else
      std::copy_n(fp32_operand(x), n_in, to);
    product.x = to;
  }
  if ((product.dy.bf16 != nullptr) != (p.precision == Precision::kBf16))
    throw std::logic_error("deferred weight gradients: an output gradient in the wrong precision");
  e.products.push_back(product);
}

void WeightGradStore::mark(int tag) {
  if (!recording()) return;
  donate(nullptr, 0);
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
    GemmOperand x = q.x;
    if (q.round_x) {  // the rounding B would have done, into the same scratch
      const LinearScratch& s = q.precision->scratch;
      const long n = (long)q.rows * q.in;
      if (q.precision->precision == Precision::kBf16) {
        to_bf16(fp32_operand(q.x), s.in16, n);
        x = s.in16;
      } else {
        round_through_fp16(fp32_operand(q.x), s.in32, n);
        x = s.in32;
      }
    }
    mixed_linear_backward_weight(*q.precision, q.dy, x, q.dw, q.rows, q.in, q.out);
  }
  e.key = -1;
  e.products.clear();
  entry_of_.erase(it);
}

}  // namespace trident::kernels
