// The safetensors reader over a whole file's bytes: length prefix, JSON header, every
// tensor's dtype, shape and offsets against the data section, then every float tensor read.
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
  } catch (const FormatError&) {
  }
  return 0;
}
