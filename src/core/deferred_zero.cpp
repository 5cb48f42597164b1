#include "core/deferred_zero.h"

#include <algorithm>
#include <stdexcept>

namespace trident {

std::vector<DeferredZero::Span>::iterator DeferredZero::first_from(const float* p) {
  return std::lower_bound(spans_.begin(), spans_.end(), p,
                          [](const Span& s, const float* q) { return s.begin < q; });
}

void DeferredZero::add_span(float* begin, long floats) {
  if (floats <= 0) return;
  if (pending_ > 0) throw std::logic_error("DeferredZero::add_span while spans are pending");
  auto at = first_from(begin);
  const bool overlaps_next = at != spans_.end() && at->begin < begin + floats;
  const bool overlaps_previous =
      at != spans_.begin() && std::prev(at)->begin + std::prev(at)->floats > begin;
  if (overlaps_next || overlaps_previous)
    throw std::logic_error("DeferredZero::add_span: spans overlap");
  spans_.insert(at, Span{begin, floats, false});
}

void DeferredZero::mark_pending() {
  for (Span& s : spans_) s.pending = true;
  pending_ = (int)spans_.size();
}

void DeferredZero::fill(Span& s) {
  float* p = s.begin;
  const long n = s.floats;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) p[i] = 0.f;
  s.pending = false;
  --pending_;
}

bool DeferredZero::claim(float* begin, long floats) {
  if (pending_ == 0) return false;
  auto at = first_from(begin);
  if (at != spans_.end() && at->begin == begin && at->floats == floats && at->pending) {
    at->pending = false;
    --pending_;
    return true;
  }
  materialize(begin, begin + floats);
  return false;
}

void DeferredZero::materialize(const float* begin, const float* end) {
  if (pending_ == 0) return;
  for (Span& s : spans_)
    if (s.pending && s.begin < end && s.begin + s.floats > begin) fill(s);
}

void DeferredZero::materialize_all() {
  if (pending_ == 0) return;
  for (Span& s : spans_)
    if (s.pending) fill(s);
}

}  // namespace trident
