#pragma once
// Spans of a float buffer whose zeroing waits for their first write. mark_pending() stands
// for filling every span with zeros; a writer about to produce a whole span asks claim() and,
// told yes, writes its result instead of adding it to zeros (bit for bit the same sums). Any
// other access goes through materialize(), which fills the spans it touches that are still
// pending, so a span nobody claimed reads as zeros like a filled one.
//
// Gradients (parameters/parameters.h): a linear layer's weight gradient is one product per
// micro-batch, so the step's first product overwrites and the step saves the fill pass over
// those gradients (in bf16 also the add of the product's scratch copy).
//
// One thread at a time: the rank's control thread (the products' own threads never call it).
#include <vector>

namespace trident {

class DeferredZero {
 public:
  // A span of the buffer, disjoint from the others; added before any mark_pending().
  void add_span(float* begin, long floats);
  // Every span reads as zeros from now on (nothing is written yet).
  void mark_pending();
  // A writer will produce [begin, begin + floats) whole: true if that is exactly one pending
  // span (no longer pending: the caller writes all of it). Otherwise false, after filling any
  // pending span the range overlaps (the caller then adds to zeros).
  bool claim(float* begin, long floats);
  // Fills the pending spans that overlap [begin, end).
  void materialize(const float* begin, const float* end);
  void materialize_all();
  bool any_pending() const { return pending_ > 0; }
  // Every span (begin, floats) in address order: for the gaps between them.
  template <class F>
  void for_each_span(F&& f) const {
    for (const Span& s : spans_) f(s.begin, s.floats);
  }

 private:
  struct Span {
    float* begin;
    long floats;
    bool pending;
  };
  void fill(Span& s);
  // The first span that starts at or after p.
  std::vector<Span>::iterator first_from(const float* p);
  std::vector<Span> spans_;  // sorted by begin
  int pending_ = 0;
};

}  // namespace trident
