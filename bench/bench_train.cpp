// Training-step benchmark: for each config and mode (fp32, bf16, bf16 + full
// recomputation), ms per step, tokens/s, model TFLOP/s, MFU against the GEMM peak of the
// same precision measured in the same process (interleaved with the steps), activation
// memory planned, and peak RSS against the memory plan. Each run is its own process (RSS
// is a per-process peak).
//   bench_train                            all configs and modes
//   bench_train gpt2-small 3 [b] [mode] [seq] [logits chunk rows]   one run, 3 timed steps
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
  int seq;  // 0: the preset's
};

const BenchConfig kConfigs[] = {{"gpt2-small", 4, 0}, {"gpt-tiny", 8, 0}, {"gpt2-small", 1, 1024}};
const char* kModes[] = {"fp32", "bf16", "bf16+recompute"};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int run_one(const std::string& name, int micro_batch, int steps, const std::string& mode,
            int seq_override, int logits_chunk_rows) {
  ModelConfig c = preset_model(name);
  if (seq_override > 0) c.seq_length = std::max(c.seq_length, seq_override);
  const int seq = seq_override > 0 ? seq_override : c.seq_length;
  comm::SingleRankCommunicator tp("tensor");
  ChunkOptions options;
  options.precision = mode == "fp32" ? kernels::Precision::kFp32 : kernels::Precision::kBf16;
  options.recompute_layers = mode == "bf16+recompute" ? c.num_layers : 0;
  options.logits_chunk_rows = logits_chunk_rows;
  GPTModel model(c, tp, micro_batch, seq, options);
  model.parameters().initialize(1, 0.02f, c.num_layers);
  AdamW optimizer(AdamWConfig{}, model.parameters().size());
  const long plan_bytes = model.memory_plan().total_bytes();
  MockGPTDataset data(c.vocab_size, seq, 1);
  std::vector<int> tokens((size_t)micro_batch * (seq + 1));
  for (int i = 0; i < micro_batch; ++i) data.sample(i, tokens.data() + (size_t)i * (seq + 1));
  const double flops = training_flops_per_iteration(c, micro_batch, seq, model.padded_vocab());
  double phase[3] = {0, 0, 0};  // forward, backward, zero grads + optimizer
  auto step = [&] {
    double t0 = now();
    model.forward_chunk(0, tokens.data(), micro_batch, seq, 1.f / (micro_batch * seq), nullptr, 0);
    double t1 = now();
    model.backward_chunk(0, micro_batch, seq);
    double t2 = now();
    optimizer.step(model.parameters(), 1e-4f, tp);
    model.parameters().zero_grads();
    double t3 = now();
    phase[0] += t1 - t0, phase[1] += t2 - t1, phase[2] += t3 - t2;
  };
  model.parameters().zero_grads();
  step();  // warm-up: first touch of every buffer
  phase[0] = phase[1] = phase[2] = 0;
  // Interleave peak measurements with the steps: the second core is not always ours.
  double best_step = 1e30, best_peak = 0, total = 0;
  for (int i = 0; i < steps; ++i) {
    best_peak =
        std::max(best_peak, measure_gemm_peak_tflops(micro_batch * seq, 4 * c.hidden_size,
                                                     c.hidden_size, 0.3, options.precision));
    double t0 = now();
    step();
    double t = now() - t0;
    total += t;
    best_step = std::min(best_step, t);
  }
  double mean = total / steps;
  std::printf("%-11s %-14s forward %.0f ms | backward %.0f ms | optimizer + zero grads %.0f ms\n",
              name.c_str(), mode.c_str(), phase[0] / steps * 1e3, phase[1] / steps * 1e3,
              phase[2] / steps * 1e3);
  std::printf(
      "%-11s %-14s b=%d s=%-4d threads=%d | ms/step mean %.0f best %.0f | tokens/s %.0f | "
      "TFLOP/s %.3f | %s GEMM peak %.3f | MFU %.3f (best step %.3f) | activations %.0f MiB, "
      "scratch %.0f MiB | "
      "peak RSS %.0f MiB, plan %.0f MiB (%.2fx)\n",
      name.c_str(), mode.c_str(), micro_batch, seq, omp_get_max_threads(), mean * 1e3,
      best_step * 1e3, micro_batch * seq / mean, flops / mean / 1e12,
      kernels::precision_name(options.precision), best_peak, flops / mean / 1e12 / best_peak,
      flops / best_step / 1e12 / best_peak,
      model.memory_plan().group_bytes("activations") / 1048576.0,
      model.memory_plan().group_bytes("scratch") / 1048576.0, peak_rss_bytes() / 1048576.0,
      plan_bytes / 1048576.0, (double)peak_rss_bytes() / plan_bytes);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2) {
    int micro = argc >= 4 ? std::atoi(argv[3]) : 4;
    return run_one(argv[1], micro, argc >= 3 ? std::atoi(argv[2]) : 4, argc >= 5 ? argv[4] : "fp32",
                   argc >= 6 ? std::atoi(argv[5]) : 0, argc >= 7 ? std::atoi(argv[6]) : 0);
  }
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  for (const BenchConfig& c : kConfigs)
    for (const char* mode : kModes) {
      std::string cmd = std::string(self) + " " + c.name + " 4 " + std::to_string(c.micro_batch) +
                        " " + mode + " " + std::to_string(c.seq);
      if (std::system(cmd.c_str()) != 0) return 1;
    }
  return 0;
}
