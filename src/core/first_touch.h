#pragma once
// Large buffers whose pages are first written by the threads that will use them. A
// std::vector<float>(n) zero-fills on one thread, so on a multi-socket machine every page
// lands on that thread's node, and on any machine a 774M-parameter model spends seconds in
// one core's memset. FirstTouchVector takes its memory from calloc, which for large blocks
// maps fresh pages that read as zero without being written: nothing touches them until the
// kernels that use them write (gradients in backward, Adam moments in the first update, the
// activation arena in forward), on the threads that run those kernels. Zeroing a page is
// then the kernel's page-fault work inside step 1 instead of a single pass before it (on a
// VM, where faults are expensive, ~12 GB of a 774M model's 15 GB are not touched before step
// 1). fill_parallel() writes a non-zero value with OpenMP's static schedule.
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace trident {

template <class T>
struct ZeroedAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = ZeroedAllocator<U>;
  };
  ZeroedAllocator() = default;
  template <class U>
  ZeroedAllocator(const ZeroedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    void* p = std::calloc(n, sizeof(T));
    if (!p && n > 0) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) noexcept { std::free(p); }
  // Default-initialisation: nothing is written for arithmetic types (calloc's zeros stay).
  template <class U>
  void construct(U* p) noexcept {
    ::new ((void*)p) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new ((void*)p) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const ZeroedAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const ZeroedAllocator<U>&) const noexcept {
    return false;
  }
};

template <class T>
using FirstTouchVector = std::vector<T, ZeroedAllocator<T>>;

template <class T>
void fill_parallel(T* data, long n, T value) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) data[i] = value;
}

// Resizes to n elements equal to `value`: zeros stay untouched pages (see above); any other
// value is written in parallel.
template <class T>
void assign_parallel(FirstTouchVector<T>& v, long n, T value) {
  FirstTouchVector<T>().swap(v);
  v.resize((size_t)n);
  if (value != T(0)) fill_parallel(v.data(), n, value);
}

}  // namespace trident
