// The planner's search for the PTD-P paper's 1T model (128 layers, h = 25,600, 160 heads,
// s = 2048, B = 3072) over the 3072 A100s of clusters/dgx-a100.toml: wall time of the whole
// search (the bound is 10 s) and the number of layouts evaluated. Each round builds
// a fresh model, so no round reuses another's simulated schedules. Few layouts fit 80 GiB
// (trident keeps fp32 activations), so a second run gives the devices unbounded memory and
// times every layout: the worst case of the search.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "planner/search.h"

int main(int argc, char** argv) {
  using namespace trident::planner;
  const int rounds = argc > 1 ? std::stoi(argv[1]) : 3;
  Cluster cluster = load_cluster(TRIDENT_SOURCE_DIR "/clusters/dgx-a100.toml");
  Workload w;
  w.model.num_layers = 128, w.model.hidden_size = 25600, w.model.num_attention_heads = 160;
  w.model.seq_length = 2048, w.model.vocab_size = 51200;
  w.global_batch = 3072;
  w.precision = trident::kernels::Precision::kBf16;
  double worst = 0;
  for (double memory : {cluster.device.memory_gib, 1e9}) {
    cluster.device.memory_gib = memory;
    std::vector<double> seconds;
    SearchResult last;
    for (int r = 0; r < rounds; ++r) {
      auto start = std::chrono::steady_clock::now();
      IterationModel model(cluster, w);
      last = search_layouts(model, {cluster.num_devices()});
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf(
        "plan search, 1T GPT on %ld x %s with %.0f GiB: %.3f s (median of %d; best %.3f s), %ld "
        "layouts evaluated (memory), %ld timed (fit in memory)\n",
        cluster.num_devices(), cluster.device.name.c_str(), memory, seconds[seconds.size() / 2],
        rounds, seconds.front(), last.evaluated, last.timed);
    if (!last.fitting.empty())
      std::printf("  best: %s, %.2f s per iteration, %.0f TFLOP/s per device\n",
                  last.fitting.front().layout.describe().c_str(), last.fitting.front().time.total(),
                  last.fitting.front().tflops_per_device);
    worst = std::max(worst, seconds[seconds.size() / 2]);
  }
  return worst < 10 ? 0 : 1;
}
