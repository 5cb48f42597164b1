#include "train/throughput.h"

#include <chrono>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/linear_bf16.h"

namespace trident {

double training_flops_per_iteration(const ModelConfig& c, long global_batch, int seq,
                                    int padded_vocab) {
  double B = global_batch, s = seq, l = c.num_layers, h = c.hidden_size;
  double ffn_factor = (double)c.ffn() / (4.0 * h);  // 1 for GPT-2's 4h MLP
  // Per layer and token, forward: QKV + projection 8h^2, MLP 16h^2 * ffn_factor, attention 4sh.
  double per_layer_fwd = B * s * (8 * h * h + 16 * h * h * ffn_factor + 4 * s * h);
  double logits_fwd = 2 * B * s * h * padded_vocab;
  return 3 * (l * per_layer_fwd + logits_fwd);
}

double measure_gemm_peak_tflops(int m, int n, int k, double seconds, kernels::Precision precision) {
  std::vector<float> a((size_t)m * k, 0.5f), b((size_t)k * n, 0.25f), c((size_t)m * n);
  std::vector<kernels::bf16_t> a16(a.size()), b16(b.size());
  kernels::to_bf16(a.data(), a16.data(), (long)a.size());
  kernels::to_bf16(b.data(), b16.data(), (long)b.size());
  auto product = [&] {
    if (precision == kernels::Precision::kBf16)  // the layers' fastest bf16 product
      kernels::linear_forward_bf16(a16.data(), b16.data(), c.data(), m, k, n);
    else
      kernels::linear_forward(a.data(), b.data(), c.data(), m, k, n);
  };
  auto now = [] { return std::chrono::steady_clock::now(); };
  product();  // warm-up
  auto start = now();
  int reps = 0;
  double elapsed = 0;
  do {
    product();
    ++reps;
    elapsed = std::chrono::duration<double>(now() - start).count();
  } while (elapsed < seconds || reps < 3);
  return 2.0 * m * n * k * reps / elapsed / 1e12;
}

}  // namespace trident
