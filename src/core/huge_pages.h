#pragma once
// Transparent huge pages for a large buffer. On a machine whose THP setting is `madvise`
// (this project's VMs, many distributions) a buffer gets 2 MiB pages only when asked; the
// first write of a 400 MB buffer then takes ~200 page faults instead of ~100,000 (each
// costs ~8 us on a VM). Call it before the buffer is first written.
#include <cstddef>

namespace trident {

// Asks for huge pages on the whole 2 MiB-aligned part of [data, data + bytes); a no-op for
// small ranges and where the kernel refuses.
void advise_huge_pages(void* data, std::size_t bytes);

}  // namespace trident
