#pragma once
// 16-bit floating-point formats for mixed-precision training: rounding fp32 to bf16 / fp16
// (round to nearest even, overflow to inf as the hardware does) and the bf16 matrix product
// on oneDNN's avx512_bf16 kernels (bf16 x bf16 -> fp32), or on widened operands where oneDNN
// has no bf16 kernels (kernels/bf16_widened.h). fp16 has no fast matrix product on
// this CPU (no AVX512-FP16), so fp16 values are carried in fp32 storage after rounding.
#include <cstdint>

#include "kernels/gemm.h"

namespace trident::kernels {

enum class Precision { kFp32, kBf16, kFp16 };
const char* precision_name(Precision p);

using bf16_t = std::uint16_t;  // the upper half of an IEEE binary32
using fp16_t = std::uint16_t;  // IEEE binary16

// Round to nearest even; NaN stays a (quiet) NaN.
inline bf16_t bf16_from_float(float x) {
  std::uint32_t u = __builtin_bit_cast(std::uint32_t, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16_t)(u >> 16);
}
// Exact: a bf16 value is the upper half of an fp32.
inline float bf16_to_float(bf16_t x) {
  return __builtin_bit_cast(float, (std::uint32_t)x << 16);
}
// Kernels templated on their output type write through these.
inline void store_as(float* y, float v) {
  *y = v;
}
inline void store_as(bf16_t* y, float v) {
  *y = bf16_from_float(v);
}

// The same rounding in integer and fp32 arithmetic (NaN becomes the quiet NaN 0x7e00), for
// compilers without _Float16 on x86 (clang before 15, which builds the fuzz targets).
inline fp16_t fp16_from_float_portable(float x) {
  std::uint32_t u = __builtin_bit_cast(std::uint32_t, x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  std::uint32_t h;
  if (u >= 0x47800000u) {  // |x| >= 2^16, inf or NaN
    h = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {  // below 2^-14: subnormal or zero; the fp32 add rounds
    const float magic = __builtin_bit_cast(float, 0x3f000000u);  // 0.5: ulp 2^-24
    h = __builtin_bit_cast(std::uint32_t, __builtin_bit_cast(float, u) + magic) - 0x3f000000u;
  } else {  // normal: rebias the exponent, round the 13 dropped bits to nearest even
    h = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;  // 0xc8000000: exponent -112
  }
  return (fp16_t)(h | sign);
}

#if defined(__FLT16_MANT_DIG__)
inline fp16_t fp16_from_float(float x) {
  return __builtin_bit_cast(fp16_t, (_Float16)x);
}
#else
inline fp16_t fp16_from_float(float x) {
  return fp16_from_float_portable(x);
}
#endif

// A matrix-product operand (a linear layer's input, or an output gradient) as it is stored:
// fp32, or in bf16 runs already rounded to bf16 by the kernel that produced it (LayerNorm,
// GeLU, the cross-entropy gradient), so no product rounds it again, and it takes half the
// memory.
struct GemmOperand {
  const float* fp32 = nullptr;
  const bf16_t* bf16 = nullptr;
  GemmOperand() = default;
  GemmOperand(const float* x) : fp32(x) {}   // NOLINT: implicit by design
  GemmOperand(const bf16_t* x) : bf16(x) {}  // NOLINT
  // The same operand from element n on (a later row).
  GemmOperand offset(long n) const { return fp32 ? GemmOperand(fp32 + n) : GemmOperand(bf16 + n); }
};

// Where a kernel writes an activation that only matrix products read: exactly one of the
// two is set (bf16 in bf16 runs).
struct GemmOperandBuffer {
  float* fp32 = nullptr;
  bf16_t* bf16 = nullptr;
  GemmOperand operand() const { return fp32 ? GemmOperand(fp32) : GemmOperand(bf16); }
};

void to_bf16(const float* x, bf16_t* out, long n);
void from_bf16(const bf16_t* x, float* out, long n);
void to_fp16(const float* x, fp16_t* out, long n);
void from_fp16(const fp16_t* x, float* out, long n);
// out = x rounded to fp16 and back (inf where |x| exceeds fp16's range); out may equal x.
void round_through_fp16(const float* x, float* out, long n);

// C = op(A) * op(B) + beta * C with bf16 A and B and fp32 C (beta 0 or 1).
void gemm_bf16(Trans trans_a, Trans trans_b, int m, int n, int k, const bf16_t* a, int lda,
               const bf16_t* b, int ldb, float beta, float* c, int ldc);

}  // namespace trident::kernels
