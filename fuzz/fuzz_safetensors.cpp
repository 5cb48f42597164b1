// The safetensors reader over a whole file's bytes: length prefix, JSON header, every
// tensor's dtype, shape and offsets against the data section, then every float tensor read.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident::io;
  try {
    SafetensorsFile file(reinterpret_cast<const char*>(data), size, "input.safetensors");
    for (const TensorEntry& t : file.tensors()) {
      FUZZ_CHECK(file.find(t.name) != nullptr);
      FUZZ_CHECK(t.numel() >= 0 && t.begin <= t.end && t.end <= size);
      if (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16") {
        std::vector<float> values = file.read_float(t);
        FUZZ_CHECK((long)values.size() == t.numel());
      }
    }
  } catch (const trident::FormatError&) {
  }
  return 0;
}

extern "C" size_t LLVMFuzzerMutate(std::uint8_t* data, size_t size, size_t max_size);

// Nearly every mutation of a header changes its length, and the file is then refused at its
// first 8 bytes. Half the time the header alone is mutated and the length prefix rewritten to
// match, so the JSON and the tensors' claims are reached; the other half mutates raw bytes.
extern "C" size_t LLVMFuzzerCustomMutator(std::uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::uint64_t header_len = 0;
  for (int i = 7; size >= 8 && i >= 0; --i) header_len = (header_len << 8) | data[i];
  if (seed % 2 == 0 || size < 8 || header_len > size - 8)
    return LLVMFuzzerMutate(data, size, max_size);
  const std::vector<std::uint8_t> tail(data + 8 + header_len, data + size);
  std::vector<std::uint8_t> header(max_size - 8 - tail.size());
  std::copy(data + 8, data + 8 + header_len, header.begin());
  header_len = LLVMFuzzerMutate(header.data(), header_len, header.size());
  for (int i = 0; i < 8; ++i) data[i] = (std::uint8_t)(header_len >> (8 * i));
  std::copy(header.begin(), header.begin() + header_len, data + 8);
  std::copy(tail.begin(), tail.end(), data + 8 + header_len);
  return 8 + header_len + tail.size();
}
