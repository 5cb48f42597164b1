#pragma once
// Large buffers that are cheap to touch and are touched before training starts.
// FirstTouchVector's allocator maps a large block (>= 2 MiB) on its own, aligned to 2 MiB,
// asks for transparent huge pages (MADV_HUGEPAGE: this project's VMs and many distributions
// set THP to `madvise`, so nothing else gets them), and touches one byte per page in
// parallel with OpenMP's static schedule, the schedule the kernels that use the buffer run
// (pages land on their threads' NUMA nodes). A 774M model's ~15 GB then costs ~7,500 faults
// at start-up instead of ~3.7 million 4 KiB faults inside step 1 (each ~2-8 us on a VM).
// The pages read as zero, as calloc's. `--no-huge-pages` turns the advice off for the
// process (prctl(PR_SET_THP_DISABLE), which the kernel applies to every later madvise):
// the block is then touched page by page, still at allocation. Small blocks use calloc.
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace trident {

// Blocks from this size on are mapped on their own, 2 MiB-aligned, huge pages asked for.
constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;

// `bytes` of zeros, touched; nullptr when the memory cannot be had.
void* allocate_touched(std::size_t bytes);
// The same block untouched: its pages come on first write (a buffer mostly given back).
void* allocate_untouched(std::size_t bytes);
// Gives back the memory of [data, data + bytes) inside a block of allocate_touched or
// allocate_untouched: whole 2 MiB-aligned blocks are returned to the system (they read as
// zero and come back on the next write, huge pages intact), the rest is zeroed.
void release_pages(void* data, std::size_t bytes) noexcept;
// Releases a block from allocate_touched, given the same size.
void release_touched(void* block, std::size_t bytes) noexcept;

// For --no-huge-pages: the process asks for no transparent huge pages from now on.
void disable_huge_pages();

// touch false: the pages are left for the first write (allocate_untouched).
template <class T>
struct ZeroedAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = ZeroedAllocator<U>;
  };
  // A vector keeps its kind of pages through swaps and assignments.
  using propagate_on_container_swap = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_copy_assignment = std::true_type;
  ZeroedAllocator() = default;
  explicit ZeroedAllocator(bool touch) noexcept : touch(touch) {}
  template <class U>
  ZeroedAllocator(const ZeroedAllocator<U>& other) noexcept : touch(other.touch) {}
  T* allocate(std::size_t n) {
    void* p = touch ? allocate_touched(n * sizeof(T)) : allocate_untouched(n * sizeof(T));
    if (!p && n > 0) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  bool touch = true;
  void deallocate(T* p, std::size_t n) noexcept { release_touched(p, n * sizeof(T)); }
  // Default-initialisation: nothing is written for arithmetic types (the zeros stay).
  template <class U>
  void construct(U* p) noexcept {
    ::new ((void*)p) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new ((void*)p) U(std::forward<Args>(args)...);
  }
  // Either frees the other's blocks (the same system calls): a swap may mix them.
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

// Resizes to n elements equal to `value` (zeros come with the allocation; any other value is
// written in parallel).
template <class T>
void assign_parallel(FirstTouchVector<T>& v, long n, T value) {
  FirstTouchVector<T>().swap(v);
  v.resize((size_t)n);
  if (value != T(0)) fill_parallel(v.data(), n, value);
}

}  // namespace trident
