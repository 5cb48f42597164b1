// A Megatron `.idx` file's bytes: magic, version, dtype code, counts, sizes, byte pointers
// and document index.
#include <cstdint>
#include <span>

#include "data/indexed_dataset.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident::data;
  try {
    IndexContents index =
        parse_index(std::span(reinterpret_cast<const char*>(data), size), "input.idx");
    FUZZ_CHECK(index.sizes.size() == index.pointers.size());
    FUZZ_CHECK(!index.doc_idx.empty() && index.doc_idx.front() == 0 &&
               index.doc_idx.back() == (std::int64_t)index.sizes.size());
    std::uint64_t bytes = 0;
    for (std::int32_t s : index.sizes) bytes += (std::uint64_t)s * dtype_bytes(index.dtype);
    FUZZ_CHECK(bytes == index.bin_bytes);
  } catch (const DatasetError&) {
  }
  return 0;
}
