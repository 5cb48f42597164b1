#pragma once
// bf16 matrix products where oneDNN has none: its bf16 kernels need AVX-512 (Skylake-SP, Zen 4
// and later), and on an AVX2 CPU (Zen 3, Haswell) every bf16 primitive fails to build. There
// the operands are widened to fp32 and multiplied by sgemm. A bf16 value is exact in fp32, so
// these are the same products of bf16 operands summed in fp32 as the native kernels'; only
// the order of the sums differs. The products run at the fp32 rate, which on such a CPU is
// also its bf16 rate (no bf16 instructions), plus one pass over each operand.
#include "kernels/low_precision.h"

namespace trident::kernels {

// Whether oneDNN builds bf16 primitives on this CPU. Asked once (a fact about the machine).
bool onednn_runs_bf16();

// gemm_bf16 (C = op(A) op(B) + beta C, bf16 A and B, fp32 C) through widened operands, in
// blocks of k_block inner indices, and within them blocks of op(A)'s rows and op(B)'s columns
// of at most max_widened_floats each (16 MiB); the tests make both small. The widened blocks
// live in this thread's scratch. Blocks of 256 along k made gpt2-small's bf16 step (B4 T256)
// 0.81-0.90x as long as one block of all k on a Zen 3 (5 alternated rounds; 384 and 512 ran
// as 256 did, 128 slower than none).
void gemm_bf16_widened(Trans trans_a, Trans trans_b, int m, int n, int k, const bf16_t* a, int lda,
                       const bf16_t* b, int ldb, float beta, float* c, int ldc,
                       long max_widened_floats = 1L << 22, int k_block = 256);

}  // namespace trident::kernels
