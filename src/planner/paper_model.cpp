#include "planner/paper_model.h"

namespace trident::planner {

double paper_parameter_count(const GptShape& m) {
  const double l = m.layers, h = m.hidden;
  return 12 * l * h * h * (1 + 13 / (12 * h) + (double)(m.vocab + m.seq_length) / (12 * l * h));
}

double paper_flops_per_iteration(const GptShape& m, double global_batch, bool recompute) {
  const double B = global_batch, s = m.seq_length, l = m.layers, h = m.hidden, V = m.vocab;
  if (recompute) return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  return 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V;
}

double paper_training_seconds(double tokens, double parameters, double devices,
                              double flops_per_device) {
  return 8 * tokens * parameters / (devices * flops_per_device);
}

}  // namespace trident::planner
