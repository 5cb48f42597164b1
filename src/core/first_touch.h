#pragma once
// Large buffers whose pages are first written by the threads that will use them. A
// std::vector<float>(n) zero-fills on one thread, so on a multi-socket machine every page
// lands on that thread's node, and on any machine a 774M-parameter model spends seconds in
// one core's memset. FirstTouchVector leaves its elements uninitialised; fill_parallel()
// then writes them with OpenMP's static schedule, the split the kernels use.
#include <memory>
#include <utility>
#include <vector>

namespace trident {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  // Default-initialisation: nothing is written for arithmetic types.
  template <class U>
  void construct(U* p) noexcept {
    ::new ((void*)p) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new ((void*)p) U(std::forward<Args>(args)...);
  }
};

template <class T>
using FirstTouchVector = std::vector<T, DefaultInitAllocator<T>>;

template <class T>
void fill_parallel(T* data, long n, T value) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) data[i] = value;
}

// Resizes to n uninitialised elements, then writes `value` to all in parallel.
template <class T>
void assign_parallel(FirstTouchVector<T>& v, long n, T value) {
  FirstTouchVector<T>().swap(v);
  v.resize((size_t)n);
  fill_parallel(v.data(), n, value);
}

}  // namespace trident
