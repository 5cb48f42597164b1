#pragma once
// Internal to the skinny kernels (skinny_linear.cpp, skinny_linear_avx2.cpp). dispatch: rows
// is a run-time value, but a kernel's accumulators must be a compile-time count to live in
// registers, so each row count 1..16 is its own instantiation of Kernel<R>::run.
#include <stdexcept>
#include <vector>

namespace trident::kernels::skinny {

// Outputs per panel block (pack_panels' layout): one zmm, or two ymm, of fp32 accumulators.
constexpr int kPanel = 16;

template <template <int> class Kernel, class T>
void dispatch(const T* x, const T* w, float* y, int rows, int in, int out) {
  switch (rows) {
#define TRIDENT_SKINNY_CASE(R) \
  case R:                      \
    return Kernel<R>::run(x, w, y, in, out);
    TRIDENT_SKINNY_CASE(1)
    TRIDENT_SKINNY_CASE(2)
    TRIDENT_SKINNY_CASE(3)
    TRIDENT_SKINNY_CASE(4)
    TRIDENT_SKINNY_CASE(5)
    TRIDENT_SKINNY_CASE(6)
    TRIDENT_SKINNY_CASE(7)
    TRIDENT_SKINNY_CASE(8)
    TRIDENT_SKINNY_CASE(9)
    TRIDENT_SKINNY_CASE(10)
    TRIDENT_SKINNY_CASE(11)
    TRIDENT_SKINNY_CASE(12)
    TRIDENT_SKINNY_CASE(13)
    TRIDENT_SKINNY_CASE(14)
    TRIDENT_SKINNY_CASE(15)
    TRIDENT_SKINNY_CASE(16)
#undef TRIDENT_SKINNY_CASE
    default:
      throw std::invalid_argument("skinny_linear: rows outside [1, 16]");
  }
}

// Per-thread scratch (x rearranged for a kernel), grown once; the caller fills it and passes
// its pointer into the parallel region.
template <class T>
T* scratch(long n) {
  thread_local std::vector<T> buffer;
  if ((long)buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// x [rows][in] in scratch as [in][rows] (the fp32 panel forms: one input's rows side by side).
inline const float* transposed(const float* x, int rows, int in) {
  float* xt = scratch<float>((long)in * rows);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < in; ++i) xt[(long)i * rows + r] = x[(long)r * in + i];
  return xt;
}

}  // namespace trident::kernels::skinny
