// Start-up costs of a model's parameters, before and after issue 21: initialisation by the
// element-by-element scalar draw (the implementation it replaced, reproduced here) against
// Parameters::initialize (eight draws at a time), and a single-threaded zero fill of a
// fresh buffer (std::vector<float>(n)) against the parallel first touch. Interleaved over
// ROUNDS in one process; medians and the ratios.
//   bench_startup [layers hidden] [rounds]      default: gpt2-large's 36 x 1280, 3 rounds
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/first_touch.h"
#include "core/random.h"
#include "parameters/parameters.h"

using namespace trident;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void scalar_initialize(Parameters& p, std::uint64_t seed, float std, int layers) {
  const float scaled = std / std::sqrt(2.f * layers);
  for (const ParamSpec& s : p.layout().specs()) {
    float* dst = p.values() + s.offset;
    const std::uint64_t stream = hash_string(s.name);
    if (s.init != InitKind::kNormal && s.init != InitKind::kScaledNormal) continue;
    const float sigma = s.init == InitKind::kNormal ? std : scaled;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < s.numel(); ++i)
      dst[i] = (float)(sigma * normal_at(seed, stream, s.global_index(i)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  ModelConfig c;
  c.num_layers = argc >= 3 ? std::atoi(argv[1]) : 36;
  c.hidden_size = argc >= 3 ? std::atoi(argv[2]) : 1280;
  c.num_attention_heads = c.hidden_size / 64, c.seq_length = 1024, c.vocab_size = 50257;
  const int rounds = argc >= 4 ? std::atoi(argv[3]) : argc == 2 ? std::atoi(argv[1]) : 3;
  Parameters params(ParameterLayout(c, {0, 1}));
  const long n = params.size();
  std::vector<double> scalar, vector, zero_fill, first_touch;
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    scalar_initialize(params, 1234, 0.02f, c.num_layers);
    double t1 = now();
    params.initialize(1234, 0.02f, c.num_layers);
    double t2 = now();
    {
      std::vector<float> fresh(n);
      fresh[n / 2] = 1;
    }  // one thread writes every page
    double t3 = now();
    {
      FirstTouchVector<float> fresh;  // calloc'd: untouched until written
      assign_parallel(fresh, n, 0.f);
      fill_parallel(fresh.data(), n, 0.f);  // the first write, as the kernels make it
    }
    double t4 = now();
    scalar.push_back(t1 - t0), vector.push_back(t2 - t1);
    zero_fill.push_back(t3 - t2), first_touch.push_back(t4 - t3);
  }
  std::printf(
      "%d layers, hidden %d: %.0fM parameters, %d threads, %d rounds (medians)\n"
      "  initialisation: scalar draw %.2f s (%.1f ns/parameter), vectorised %.2f s (%.1f "
      "ns/parameter): %.1fx\n"
      "  a fresh buffer of the parameters' size: one-thread zero fill %.2f s, parallel first "
      "touch %.2f s: %.1fx\n",
      c.num_layers, c.hidden_size, n / 1e6, omp_get_max_threads(), rounds, median(scalar),
      median(scalar) / n * 1e9, median(vector), median(vector) / n * 1e9,
      median(scalar) / median(vector), median(zero_fill), median(first_touch),
      median(zero_fill) / median(first_touch));
}
