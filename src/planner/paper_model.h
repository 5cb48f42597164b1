#pragma once
// The PTD-P paper's closed forms (Narayanan et al. 2021, section 5.1 and appendix): the
// parameter count, the FLOPs of one iteration and the end-to-end training time. The
// planner reports throughput with them, as the paper does; the time model itself works
// from per-device FLOPs and the simulated schedule, not from these.
namespace trident::planner {

struct GptShape {
  long layers = 0;      // l
  long hidden = 0;      // h
  long vocab = 0;       // V (padded)
  long seq_length = 0;  // s
};

// P = 12 l h^2 (1 + 13 / (12 h) + (V + s) / (12 l h))
double paper_parameter_count(const GptShape& m);

// With full recomputation (4 passes through every layer: forward, recomputed forward,
// two GEMMs per forward GEMM backward): F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)).
// Without: 72 B s l h^2 (1 + s / (6 h)) + 6 B s h V (the logit layer is never recomputed;
// trident's log uses the same, src/model/flops.h).
double paper_flops_per_iteration(const GptShape& m, double global_batch, bool recompute);

// End-to-end training time in seconds for T tokens on n devices at X FLOP/s each:
// 8 T P / (n X) (the paper's estimate, which assumes recomputation).
double paper_training_seconds(double tokens, double parameters, double devices,
                              double flops_per_device);

}  // namespace trident::planner
