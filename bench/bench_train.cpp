// Training-step benchmark: for each config and mode (fp32, bf16, bf16 + full
// recomputation), ms per step, tokens/s, model TFLOP/s, MFU against the arithmetic peak of
// the precision (the trainer's multiply-add loop), the fraction of the GEMM peak of the same
// precision (measured between the steps) it reaches, activation memory planned, and peak RSS
// against the memory plan. Each mode first runs in its own process (RSS is a per-process
// peak); then one process holds all three models and interleaves their steps, so the
// speed ratios are taken under the same load (the second core comes and goes).
//   bench_train                                   all configs: per-mode runs + interleaved
//   bench_train NAME STEPS [b] [mode] [seq] [logits chunk rows]   one per-mode run
//   bench_train --interleaved NAME ROUNDS [b] [seq]               one interleaved comparison
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/cpu_set.h"
#include "data/mock_dataset.h"
#include "kernels/peak.h"
#include "model/flops.h"
#include "model/gpt_model.h"
#include "optim/adamw.h"
#include "train/report.h"

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One model in one mode, ready to take training steps on a fixed batch.
struct ModeRun {
  std::string mode;
  ModelConfig config;
  int micro_batch, seq;
  comm::SingleRankCommunicator tp{"tensor"};
  ChunkOptions options;
  std::unique_ptr<GPTModel> model;
  std::unique_ptr<optim::AdamW> optimizer;
  std::vector<int> tokens;
  double flops = 0;
  double phase[3] = {0, 0, 0};  // forward, backward, optimizer + zero grads (seconds, summed)

  ModeRun(const std::string& name, int b, int seq_override, const std::string& m,
          int logits_chunk_rows)
      : mode(m), config(preset_model(name)), micro_batch(b) {
    if (seq_override > 0) config.seq_length = std::max(config.seq_length, seq_override);
    seq = seq_override > 0 ? seq_override : config.seq_length;
    options.precision = mode == "fp32" ? kernels::Precision::kFp32 : kernels::Precision::kBf16;
    options.recompute_layers = mode == "bf16+recompute" ? config.num_layers : 0;
    options.logits_chunk_rows = logits_chunk_rows;
    model = std::make_unique<GPTModel>(config, tp, micro_batch, seq, options);
    model->parameters().initialize(1, 0.02f, config.num_layers);
    optimizer = std::make_unique<optim::AdamW>(optim::AdamWConfig{}, model->parameters().size());
    data::MockGPTDataset data(config.vocab_size, seq, 1);
    tokens.resize((size_t)micro_batch * (seq + 1));
    for (int i = 0; i < micro_batch; ++i) data.sample(i, tokens.data() + (size_t)i * (seq + 1));
    flops = training_flops_per_iteration(config, micro_batch, seq, model->padded_vocab());
    model->parameters().zero_grads();
    step();  // warm-up: first touch of every buffer
    std::fill(phase, phase + 3, 0.0);
  }

  double step() {
    double t0 = now();
    model->forward_chunk(0, tokens.data(), micro_batch, seq, 1.f / (micro_batch * seq), nullptr, 0);
    double t1 = now();
    model->backward_chunk(0, micro_batch, seq);
    double t2 = now();
    optimizer->step(model->parameters(), 1e-4f, tp);
    model->parameters().zero_grads();
    double t3 = now();
    phase[0] += t1 - t0, phase[1] += t2 - t1, phase[2] += t3 - t2;
    return t3 - t0;
  }

  // The machine's arithmetic peak for this mode's precision, on this process's cores,
  // measured carefully (kernels/peak.h), as MFU divides by it.
  double fma_peak() const {
    const double cores = std::min<double>(omp_get_max_threads(), physical_cores());
    return kernels::measure_peak_tflops(options.precision, cores, kernels::kCarefulPeakTrials)
        .tflops;
  }

  double gemm_peak() const {
    return kernels::measure_gemm_peak_tflops(micro_batch * seq, 4 * config.hidden_size,
                                             config.hidden_size, 0.3, options.precision);
  }
};

int run_one(const std::string& name, int micro_batch, int steps, const std::string& mode,
            int seq_override, int logits_chunk_rows) {
  ModeRun run(name, micro_batch, seq_override, mode, logits_chunk_rows);
  const MemoryPlan& plan = run.model->memory_plan();
  double best_step = 1e30, best_peak = 0, total = 0;
  const double fma = run.fma_peak();
  for (int i = 0; i < steps; ++i) {
    best_peak = std::max(best_peak, run.gemm_peak());
    double t = run.step();
    total += t;
    best_step = std::min(best_step, t);
  }
  const double mean = total / steps, mib = 1048576.0;
  std::printf(
      "%-11s %-14s b=%d s=%-4d threads=%d | ms/step mean %.0f best %.0f (forward %.0f, backward "
      "%.0f, optimizer %.0f) | tokens/s %.0f | TFLOP/s %.3f | %s peak %.3f, MFU %.3f (best step "
      "%.3f) | GEMM peak %.3f, %.2f of it | activations %.0f MiB, scratch %.0f MiB | peak RSS %.0f "
      "MiB, plan %.0f MiB "
      "(%.2fx)\n",
      name.c_str(), mode.c_str(), micro_batch, run.seq, omp_get_max_threads(), mean * 1e3,
      best_step * 1e3, run.phase[0] / steps * 1e3, run.phase[1] / steps * 1e3,
      run.phase[2] / steps * 1e3, micro_batch * run.seq / mean, run.flops / mean / 1e12,
      kernels::precision_name(run.options.precision), fma, run.flops / mean / 1e12 / fma,
      run.flops / best_step / 1e12 / fma, best_peak, run.flops / mean / 1e12 / best_peak,
      plan.group_bytes("activations") / mib, plan.group_bytes("scratch") / mib,
      train::peak_rss_bytes() / mib, plan.total_bytes() / mib,
      (double)train::peak_rss_bytes() / plan.total_bytes());
  std::fflush(stdout);
  return 0;
}

// All modes in one process, one step of each per round (with each precision's GEMM peak
// measured right before its step): medians of the step times, of the per-round ratios
// and of the per-round MFU.
int run_interleaved(const std::string& name, int micro_batch, int rounds, int seq_override) {
  std::vector<std::unique_ptr<ModeRun>> runs;
  for (const char* mode : kModes)
    runs.push_back(std::make_unique<ModeRun>(name, micro_batch, seq_override, mode, 0));
  const size_t n = runs.size();
  // ratio[1]: bf16's speed-up over fp32; ratio[2]: what recomputation costs over bf16.
  std::vector<std::vector<double>> times(n), mfu(n), gemm(n), ratio(n);
  std::vector<double> fma(n);
  for (size_t i = 0; i < n; ++i) fma[i] = runs[i]->fma_peak();
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> t(n);
    for (size_t i = 0; i < n; ++i) {
      double peak = runs[i]->gemm_peak();
      t[i] = runs[i]->step();
      times[i].push_back(t[i]);
      mfu[i].push_back(runs[i]->flops / t[i] / 1e12 / fma[i]);
      gemm[i].push_back(runs[i]->flops / t[i] / 1e12 / peak);
    }
    ratio[1].push_back(t[0] / t[1]);
    ratio[2].push_back(t[2] / t[1]);
  }
  std::printf("%-11s interleaved b=%d s=%d, %d rounds (medians):", name.c_str(), micro_batch,
              runs[0]->seq, rounds);
  for (size_t i = 0; i < n; ++i)
    std::printf(" | %s %.0f ms, MFU %.3f (of %.3f TFLOP/s), %.2f of the GEMM peak", kModes[i],
                median(times[i]) * 1e3, median(mfu[i]), fma[i], median(gemm[i]));
  std::printf(" | bf16 speed-up over fp32 %.2fx | recompute step cost over bf16 %.2fx\n",
              median(ratio[1]), median(ratio[2]));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--interleaved") == 0)
    return run_interleaved(argv[2], argc >= 5 ? std::atoi(argv[4]) : 4,
                           argc >= 4 ? std::atoi(argv[3]) : 5, argc >= 6 ? std::atoi(argv[5]) : 0);
  if (argc >= 2) {
    int micro = argc >= 4 ? std::atoi(argv[3]) : 4;
    return run_one(argv[1], micro, argc >= 3 ? std::atoi(argv[2]) : 4, argc >= 5 ? argv[4] : "fp32",
                   argc >= 6 ? std::atoi(argv[5]) : 0, argc >= 7 ? std::atoi(argv[6]) : 0);
  }
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  for (const BenchConfig& c : kConfigs) {
    const std::string base = std::string(self) + " ";
    for (const char* mode : kModes) {
      std::string cmd = base + c.name + " 4 " + std::to_string(c.micro_batch) + " " + mode + " " +
                        std::to_string(c.seq);
      if (std::system(cmd.c_str()) != 0) return 1;
    }
    std::string cmd = base + "--interleaved " + c.name + " 5 " + std::to_string(c.micro_batch) +
                      " " + std::to_string(c.seq);
    if (std::system(cmd.c_str()) != 0) return 1;
  }
  return 0;
}
