// Training-step benchmark: for each config, ms per step, tokens/s, model TFLOP/s, MFU
// against the fp32 GEMM peak measured in the same process, and peak RSS against the
// memory plan. Each config runs in its own process (RSS is a per-process peak).
//   bench_train                 all configs
//   bench_train gpt2-small 3    one config, 3 timed steps
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "data/mock_dataset.h"
#include "model/gpt_model.h"
#include "optim/adamw.h"
#include "train/throughput.h"
#include "train/trainer.h"

namespace {

using namespace trident;

struct BenchConfig {
  const char* name;
  int micro_batch;
};

const BenchConfig kConfigs[] = {{"gpt2-small", 4}, {"gpt-tiny", 8}};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int run_one(const std::string& name, int micro_batch, int steps) {
  ModelConfig c = preset_model(name);
  const int seq = c.seq_length;
  comm::SingleRankCommunicator tp("tensor");
  GPTModel model(c, tp, micro_batch, seq);
  model.parameters().initialize(1, 0.02f, c.num_layers);
  AdamW optimizer(AdamWConfig{}, model.parameters().size());
  const long plan_bytes = model.memory_plan().total_bytes();
  MockGPTDataset data(c.vocab_size, seq, 1);
  std::vector<int> tokens((size_t)micro_batch * (seq + 1));
  for (int i = 0; i < micro_batch; ++i) data.sample(i, tokens.data() + (size_t)i * (seq + 1));
  const double flops = training_flops_per_iteration(c, micro_batch, seq, model.padded_vocab());
  auto step = [&] {
    model.parameters().zero_grads();
    model.forward_backward(tokens.data(), micro_batch, seq, 1.f / (micro_batch * seq));
    optimizer.step(model.parameters(), 1e-4f, tp);
  };
  step();  // warm-up: first touch of every buffer
  // Interleave peak measurements with the steps: the second core is not always ours.
  double best_step = 1e30, best_peak = 0, total = 0;
  for (int i = 0; i < steps; ++i) {
    best_peak = std::max(best_peak, measure_gemm_peak_tflops(micro_batch * seq, 4 * c.hidden_size,
                                                             c.hidden_size, 0.3));
    double t0 = now();
    step();
    double t = now() - t0;
    total += t;
    best_step = std::min(best_step, t);
  }
  double mean = total / steps;
  std::printf(
      "%-11s b=%d s=%d threads=%d | ms/step mean %.0f best %.0f | tokens/s %.0f | "
      "TFLOP/s %.3f | GEMM peak %.3f | MFU %.3f (best step %.3f) | peak RSS %.0f MiB, "
      "plan %.0f MiB (%.2fx)\n",
      name.c_str(), micro_batch, seq, omp_get_max_threads(), mean * 1e3, best_step * 1e3,
      micro_batch * seq / mean, flops / mean / 1e12, best_peak, flops / mean / 1e12 / best_peak,
      flops / best_step / 1e12 / best_peak, peak_rss_bytes() / 1048576.0, plan_bytes / 1048576.0,
      (double)peak_rss_bytes() / plan_bytes);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2)
    return run_one(argv[1], argc >= 4 ? std::atoi(argv[3]) : [&] {
    for (const BenchConfig& c : kConfigs)
      if (argv[1] == std::string(c.name)) return c.micro_batch;
    return 4;
  }(), argc >= 3 ? std::atoi(argv[2]) : 4);
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  for (const BenchConfig& c : kConfigs) {
    std::string cmd = std::string(self) + " " + c.name + " 4";
    if (std::system(cmd.c_str()) != 0) return 1;
  }
  return 0;
}
