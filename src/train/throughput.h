#pragma once
// Model FLOPs and the machine's peak, for the TFLOP/s and MFU columns of the log.
#include "config/model_config.h"
#include "kernels/low_precision.h"

namespace trident {

// FLOPs of one training iteration without recomputation (Narayanan et al. 2021, eq. 3
// with 3 instead of 4 passes through the layers):
//   72 B s l h^2 (1 + s / (6h)) + 6 B s h V
// where V is the padded vocabulary; the logit layer is never recomputed.
double training_flops_per_iteration(const ModelConfig& c, long global_batch, int seq,
                                    int padded_vocab);

// This process's physical cores (its CPU affinity, SMT siblings counted once).
int physical_cores();

// The arithmetic peak of `cores` cores (a fraction when ranks share a core) for a precision:
// a multiply-add loop on registers (AVX-512 FMA for fp32, vdpbf16ps for bf16) on every
// thread at once, timed in CPU time, the best thread's rate times `cores`. No GEMM can
// exceed it, so MFU against it cannot exceed 1.
struct PeakMeasurement {
  kernels::Precision precision = kernels::Precision::kFp32;  // fp16 counts as fp32 here
  double per_core_gflops = 0;
  int threads = 1;  // threads that ran the loop
  double cores = 1;
  double tflops = 0;
};
PeakMeasurement measure_peak_tflops(kernels::Precision precision, double cores);

// Measures the GEMM throughput (TFLOP/s) of the given precision (fp32 sgemm, or bf16 x bf16
// -> fp32; fp16 runs on fp32 products) on an (m x k) * (k x n) product for about `seconds`,
// with the current thread count.
double measure_gemm_peak_tflops(int m, int n, int k, double seconds,
                                kernels::Precision precision = kernels::Precision::kFp32);

}  // namespace trident
