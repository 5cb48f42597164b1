#include "core/first_touch.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace trident {

namespace {

std::size_t rounded_to_huge_pages(std::size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// A fresh mapping of `bytes` (a multiple of 2 MiB) starting on a 2 MiB boundary: mapped 2 MiB
// longer, the unaligned head and the tail unmapped.
char* map_aligned(std::size_t bytes) {
  void* raw = ::mmap(nullptr, bytes + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  char* start = static_cast<char*>(raw);
  const std::uintptr_t misaligned = (std::uintptr_t)start % kHugePageBytes;
  const std::size_t head = misaligned ? kHugePageBytes - misaligned : 0;
  if (head > 0) ::munmap(start, head);
  if (kHugePageBytes - head > 0) ::munmap(start + head + bytes, kHugePageBytes - head);
  return start + head;
}

// One write per page, split over the OpenMP threads as the kernels split their loops.
void touch_pages(char* block, std::size_t bytes) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const long pages = (long)(bytes / (std::size_t)page);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < pages; ++i) block[i * page] = 0;
}

}  // namespace

void* allocate_touched(std::size_t bytes) {
  if (bytes < kHugePageBytes) return std::calloc(bytes, 1);
  const std::size_t mapped = rounded_to_huge_pages(bytes);
  char* block = map_aligned(mapped);
  if (!block) return nullptr;
  ::madvise(block, mapped, MADV_HUGEPAGE);  // advice: refused where THP is off or disabled
  touch_pages(block, mapped);
  return block;
}

void* allocate_untouched(std::size_t bytes) {
  if (bytes < kHugePageBytes) return std::calloc(bytes, 1);
  const std::size_t mapped = rounded_to_huge_pages(bytes);
  char* block = map_aligned(mapped);
  if (block) ::madvise(block, mapped, MADV_HUGEPAGE);
  return block;
}

void release_pages(void* data, std::size_t bytes) noexcept {
  char* begin = static_cast<char*>(data);
  char* end = begin + bytes;
  const auto round_up = [](char* p) {
    return (char*)(((std::uintptr_t)p + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  };
  char* first = std::min(round_up(begin), end);
  char* last = std::max(first, (char*)((std::uintptr_t)end / kHugePageBytes * kHugePageBytes));
  std::memset(begin, 0, (std::size_t)(first - begin));
  std::memset(last, 0, (std::size_t)(end - last));
  // Private anonymous memory (every block from the allocators above): reads zero afterwards.
  if (last > first && ::madvise(first, (std::size_t)(last - first), MADV_DONTNEED) != 0)
    std::memset(first, 0, (std::size_t)(last - first));
}

void release_touched(void* block, std::size_t bytes) noexcept {
  if (bytes < kHugePageBytes) return std::free(block);
  if (block) ::munmap(block, rounded_to_huge_pages(bytes));
}

void disable_huge_pages() {
  ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
}

}  // namespace trident
