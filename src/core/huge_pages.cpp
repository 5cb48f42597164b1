#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace trident {

void advise_huge_pages(void* data, std::size_t bytes) {
  constexpr std::uintptr_t kHuge = 2u << 20;
  const std::uintptr_t begin = ((std::uintptr_t)data + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t end = ((std::uintptr_t)data + bytes) & ~(kHuge - 1);
  if (end > begin) madvise((void*)begin, end - begin, MADV_HUGEPAGE);  // advice: may fail
}

}  // namespace trident
