#include "kernels/grouped_gemm.h"

#include "kernels/gemm.h"
#include "kernels/linear_bf16.h"

namespace trident::kernels {

// Each block is one GEMM, threaded inside oneDNN. (Splitting the threads across experts
// instead would help when each expert's block is a few rows; that is a measured change
// for later, not a different result.)

void grouped_linear_forward(const ExpertGroups& g, const float* x, const float* const* w, float* y,
                            bool accumulate) {
  for (int e = 0; e < g.experts; ++e) {
    const long begin = g.offsets[e], rows = g.offsets[e + 1] - begin;
    if (rows <= 0) continue;
    linear_forward(x + begin * g.in, w[e], y + begin * g.out, (int)rows, g.in, g.out, accumulate);
  }
}

void grouped_linear_backward_input(const ExpertGroups& g, const float* dy, const float* const* w,
                                   float* dx, bool accumulate) {
  for (int e = 0; e < g.experts; ++e) {
    const long begin = g.offsets[e], rows = g.offsets[e + 1] - begin;
    if (rows <= 0) continue;
    linear_backward_input(dy + begin * g.out, w[e], dx + begin * g.in, (int)rows, g.in, g.out,
                          accumulate);
  }
}

void grouped_linear_backward_weight(const ExpertGroups& g, const float* dy, const float* x,
                                    float* const* dw) {
  for (int e = 0; e < g.experts; ++e) {
    const long begin = g.offsets[e], rows = g.offsets[e + 1] - begin;
    if (rows <= 0) continue;
    linear_backward_weight(dy + begin * g.out, x + begin * g.in, dw[e], (int)rows, g.in, g.out);
  }
}

namespace {
// Calls fn(first row, rows) over [begin, end) in blocks of kBf16BlockRows rows, then the
// remainder in powers of two, largest first: every product has one of a few shapes.
template <class Fn>
void in_bounded_blocks(long begin, long end, Fn&& fn) {
  long at = begin;
  for (; end - at >= kBf16BlockRows; at += kBf16BlockRows) fn(at, kBf16BlockRows);
  for (long size = kBf16BlockRows / 2; size >= 1; size /= 2)
    if (end - at >= size) fn(at, size), at += size;
}
}  // namespace

void grouped_linear_forward(const ExpertGroups& g, const bf16_t* x, const bf16_t* const* w,
                            float* y) {
  for (int e = 0; e < g.experts; ++e)
    in_bounded_blocks(g.offsets[e], g.offsets[e + 1], [&](long at, long rows) {
      linear_forward_bf16(x + at * g.in, w[e], y + at * g.out, (int)rows, g.in, g.out);
    });
}

void grouped_linear_backward_input(const ExpertGroups& g, const bf16_t* dy, const bf16_t* const* w,
                                   float* dx, bool accumulate) {
  for (int e = 0; e < g.experts; ++e)
    in_bounded_blocks(g.offsets[e], g.offsets[e + 1], [&](long at, long rows) {
      if (accumulate)  // dx += dy w (the inner-product primitive overwrites)
        gemm_bf16(Trans::kNo, Trans::kNo, (int)rows, g.in, g.out, dy + at * g.out, g.out, w[e],
                  g.in, 1.f, dx + at * g.in, g.in);
      else
        linear_backward_input_bf16(dy + at * g.out, w[e], dx + at * g.in, (int)rows, g.in, g.out);
    });
}

void grouped_linear_backward_weight(const ExpertGroups& g, const bf16_t* dy, const bf16_t* x,
                                    float* const* dw) {
  for (int e = 0; e < g.experts; ++e)
    in_bounded_blocks(g.offsets[e], g.offsets[e + 1], [&](long at, long rows) {
      gemm_bf16(Trans::kYes, Trans::kNo, g.out, g.in, (int)rows, dy + at * g.out, g.out,
                x + at * g.in, g.in, 1.f, dw[e], g.in);
    });
}

}  // namespace trident::kernels
