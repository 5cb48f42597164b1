#include "deploy/gguf_encode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/low_precision.h"

namespace trident::deploy {

namespace {

template <typename T>
std::string as_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// One Q8_0 block into out (34 bytes): the scale is computed and applied in fp32 and only
// stored as fp16, as ggml does.
void quantize_block(const float* x, char* out) {
  float amax = 0.f;
  for (long j = 0; j < kQ8BlockSize; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  const kernels::fp16_t scale = kernels::fp16_from_float(d);
  std::memcpy(out, &scale, 2);
  for (long j = 0; j < kQ8BlockSize; ++j) out[2 + j] = (char)(std::int8_t)std::round(x[j] * id);
}

}  // namespace

std::string encode_tensor(const float* x, long n, GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return std::string(reinterpret_cast<const char*>(x), n * sizeof(float));
    case GgmlType::kF16: {
      std::vector<kernels::fp16_t> h(n);
      for (long i = 0; i < n; ++i) h[i] = kernels::fp16_from_float(x[i]);
      return as_bytes(h);
    }
    case GgmlType::kBF16: {
      std::vector<kernels::bf16_t> b(n);
      for (long i = 0; i < n; ++i) b[i] = kernels::bf16_from_float(x[i]);
      return as_bytes(b);
    }
    case GgmlType::kQ8_0: {
      if (n % kQ8BlockSize)
        throw std::invalid_argument("Q8_0 needs a multiple of 32 values, got " + std::to_string(n));
      std::string out((n / kQ8BlockSize) * (2 + kQ8BlockSize), '\0');
      for (long b = 0; b < n / kQ8BlockSize; ++b)
        quantize_block(x + b * kQ8BlockSize, out.data() + b * (2 + kQ8BlockSize));
      return out;
    }
  }
  throw std::invalid_argument("unknown GGML type");
}

}  // namespace trident::deploy
