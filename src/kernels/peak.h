#pragma once
// The machine's arithmetic and GEMM peaks, for the MFU column of the log and the planner.
#include "kernels/low_precision.h"

namespace trident::kernels {

// The arithmetic peak of `cores` cores (a fraction when ranks share a core) for a precision:
// a multiply-add loop on registers (AVX-512 FMA for fp32, vdpbf16ps for bf16) on every
// thread at once, timed in CPU time, the best thread's rate times `cores`. No GEMM can
// exceed it, so MFU against it cannot exceed 1.
struct PeakMeasurement {
  Precision precision = Precision::kFp32;  // fp16 counts as fp32 here
  double per_core_gflops = 0;
  int threads = 1;  // threads that ran the loop
  double cores = 1;
  double tflops = 0;
};
// `trials` runs of ~20 ms per thread, the best taken: the trainer's start-up takes 3; what
// keeps or divides by the peak (a benchmark, a calibrated cluster file, the trainer's
// recheck) takes kCarefulPeakTrials, so that one bad window on a shared VM (a Zen 3's bf16
// peak once came out at half) cannot set it.
constexpr int kCarefulPeakTrials = 25;
PeakMeasurement measure_peak_tflops(Precision precision, double cores, int trials = 3);

// Measures the GEMM throughput (TFLOP/s) of the given precision (fp32 sgemm, or bf16 x bf16
// -> fp32; fp16 runs on fp32 products) on an (m x k) * (k x n) product for about `seconds`,
// with the current thread count.
double measure_gemm_peak_tflops(int m, int n, int k, double seconds,
                                Precision precision = Precision::kFp32);

}  // namespace trident::kernels
