#pragma once
// Float tensors in GGUF's storage types: F32 as is, F16 and BF16 rounded to nearest even,
// and Q8_0, ggml's block format: each run of 32 values is one fp16 scale d = max|x| / 127
// and 32 int8 q = round(x / d) (half away from zero, as ggml's quantize_row_q8_0_ref and
// gguf-py's quantize; d = 0 gives q = 0), 34 bytes a block.
#include <string>

#include "deploy/gguf_file.h"

namespace trident::deploy {

inline constexpr long kQ8BlockSize = 32;

// The bytes of x[0..n) in `type`; for Q8_0 n must be a multiple of 32
// (std::invalid_argument otherwise).
std::string encode_tensor(const float* x, long n, GgmlType type);

}  // namespace trident::deploy
