// Memory-bound kernels against the bandwidth of the same run (issue 38): in each round every
// kernel runs right after a pass of its kind of traffic, so a neighbour's load hits both
// alike; a kernel's figure is (bytes it must move / its time over a 40 ms window of calls) /
// the bandwidth of the pass before it, the median over rounds printed beside their range. Read-only
// kernels (KV-cache attention) are held to the read pass (bench_bandwidth's). AdamW also writes,
// and this CPU's fabric carries writes beside reads, so its bytes per second exceed the read pass:
// it is held to the simplest loop with its traffic (read 4 arrays, write 3 back), on its own
// buffers.
//   bench_rooflines [rounds] [params, millions] [kv positions]
// Kernels: the fused AdamW step over gpt2-small's 124M parameters (reads param, grad and
// both moments, writes param and the moments: 28 bytes a parameter, 30 with the bf16 copy the
// next forward multiplies with); KV-cache attention of one new token against gpt2-small's 12
// layers x 12 heads x 64 at `kv positions` cached positions (reads every cached key and
// value: 2 x positions x 768 x 4 bytes a layer in fp32, half that in bf16); the products of
// one batch-1 decode step of gpt2-small (12 layers of qkv, projection, fc1, fc2, and the
// 50257-row output layer: 123.5M weights, each read once) through the kernel generation
// uses, which is the decode roofline without the rest of the step; and the whole batch-1
// decode step of gpt2-small (random weights) through generation's InferenceModel, one token
// appended at position `kDecodePosition` (the same each call: the cache holds that many
// positions before it), held to the bytes generation.py's roofline counts (every parameter
// once) plus the cached keys and values it reads.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/first_touch.h"
#include "distributed/process_groups.h"
#include "generation/inference_model.h"
#include "kernels/adamw.h"
#include "kernels/cached_attention.h"
#include "kernels/skinny_linear.h"
#include "model/gpt_model.h"
#include "read_bandwidth.h"

namespace {

using namespace trident;

enum class Traffic { kRead, kAdamW };

struct Kernel {
  std::string name;
  double bytes;  // what one call must move
  Traffic traffic;
  std::function<void()> run;
  std::vector<double> ratios = {}, gbs = {};
};

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

// Every element its own value: constant pages could be merged by the host (KSM) or compress,
// and a kernel reading them would seem faster than memory.
void vary(float* x, long n, float scale) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) x[i] = scale * (float)((i * 2654435761L) % 1000003) / 1000003.f;
}

struct AdamWBuffers {
  FirstTouchVector<float> p, g, m, v;
  FirstTouchVector<std::uint16_t> low;
  explicit AdamWBuffers(long n) {
    assign_parallel(p, n, 0.01f);
    assign_parallel(g, n, 0.001f);
    assign_parallel(m, n, 0.f);
    assign_parallel(v, n, 0.f);
    assign_parallel(low, n, std::uint16_t{0});
    vary(p.data(), n, 0.02f), vary(g.data(), n, 0.002f);
    vary(m.data(), n, 0.001f), vary(v.data(), n, 1e-6f);
  }
};

// gpt2-small's cache: 12 layers, each [1 slot, 12 heads, positions, 64].
struct KvBuffers {
  static constexpr int kLayers = 12, kHeads = 12, kHeadDim = 64;
  int positions;
  FirstTouchVector<float> k, v, qkv, out;
  FirstTouchVector<kernels::bf16_t> k16, v16;
  explicit KvBuffers(int positions) : positions(positions) {
    const long n = (long)kLayers * kHeads * positions * kHeadDim;
    assign_parallel(k, n, 0.01f);
    assign_parallel(v, n, 0.02f);
    assign_parallel(k16, n, kernels::bf16_from_float(0.01f));
    assign_parallel(v16, n, kernels::bf16_from_float(0.02f));
    vary(k.data(), n, 0.1f), vary(v.data(), n, 0.1f);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i)
      k16[i] = kernels::bf16_from_float(k[i]), v16[i] = kernels::bf16_from_float(v[i]);
    assign_parallel(qkv, 3L * kHeads * kHeadDim, 0.1f);
    assign_parallel(out, (long)kHeads * kHeadDim, 0.f);
  }
  long layer_floats() const {
    return (long)kHeads * positions * kHeadDim;
  }
  void decode(bool bf16) {
    const kernels::CachedSegment last{0, positions - 1, 1, 0};
    for (int l = 0; l < kLayers; ++l) {
      kernels::KvLayerView view;
      if (bf16)
        view.k16 = k16.data() + l * layer_floats(), view.v16 = v16.data() + l * layer_floats();
      else
        view.k = k.data() + l * layer_floats(), view.v = v.data() + l * layer_floats();
      view.heads = kHeads, view.head_dim = kHeadDim, view.positions = positions;
      kernels::cached_attention(qkv.data(), out.data(), view, &last, 1);
    }
  }
};

// gpt2-small's decode products at batch 1: each layer's qkv, projection, fc1 and fc2, then
// the output layer, every weight its own value.
struct DecodeProducts {
  struct Shape {
    int out, in;
  };
  std::vector<Shape> shapes;
  FirstTouchVector<float> w, x, y;
  FirstTouchVector<kernels::bf16_t> w16, x16;
  explicit DecodeProducts(const ModelConfig& c) {
    const int h = c.hidden_size, f = c.ffn();
    for (int l = 0; l < c.num_layers; ++l)
      shapes.insert(shapes.end(), {{3 * h, h}, {h, h}, {f, h}, {h, f}});
    shapes.push_back({c.vocab_size, h});
    assign_parallel(w, weights(), 0.f);
    vary(w.data(), weights(), 0.02f);
    assign_parallel(w16, weights(), kernels::bf16_t{0});
#pragma omp parallel for schedule(static)
    for (long i = 0; i < weights(); ++i) w16[i] = kernels::bf16_from_float(w[i]);
    assign_parallel(x, (long)std::max(h, f), 0.5f);
    assign_parallel(x16, (long)std::max(h, f), kernels::bf16_from_float(0.5f));
    assign_parallel(y, (long)std::max(c.vocab_size, f), 0.f);
  }
  long weights() const {
    long n = 0;
    for (const Shape& s : shapes) n += (long)s.out * s.in;
    return n;
  }
  void step(bool bf16) {
    long offset = 0;
    for (const Shape& s : shapes) {
      if (bf16)
        kernels::skinny_linear_forward_bf16(x16.data(), w16.data() + offset, y.data(), 1, s.in,
                                            s.out);
      else
        kernels::skinny_linear_forward(x.data(), w.data() + offset, y.data(), 1, s.in, s.out);
      offset += (long)s.out * s.in;
    }
  }
};

// gpt2-small with random weights, one process; decode steps of one sequence, fp32 or bf16.
struct DecodeStep {
  static constexpr int kDecodePosition = 128;
  ModelConfig config = preset_model("gpt2-small");
  comm::SingleRankCommunicator tp{"tensor"};
  GPTModel weights{config, tp, 1, 16};
  distributed::ProcessGrid grid{1, 1, 1};
  distributed::ProcessGroups groups = distributed::make_single_rank_groups();
  engine::RankContext rank{0, &grid, &groups, {"local"}};
  std::ostringstream log;
  std::unique_ptr<generation::InferenceModel> model;
  explicit DecodeStep(bool bf16) {
    weights.parameters().initialize(1, 0.02f, config.num_layers);
    generation::InferenceOptions o;
    o.max_batch = 1, o.max_sequence_length = kDecodePosition + 1, o.bf16 = bf16;
    o.model = &config, o.weights = &weights.parameters();
    model = std::make_unique<generation::InferenceModel>(o, rank, log);
    generation::Segment prompt{0, 0, std::vector<int>(kDecodePosition, 13), 1};
    model->step({prompt});
  }
  void step() { model->step({generation::Segment{0, kDecodePosition, {42}, 1}}); }
  // Every parameter once (generation.py's roofline), plus the cached keys and values.
  double bytes(int element) const {
    const double cached = 2.0 * config.num_layers * (kDecodePosition + 1) * config.hidden_size;
    return element * ((double)weights.parameters().size() + cached);
  }
};

// Back-to-back calls for at least kWindowSeconds: one call of the bf16 decode products is
// ~8 ms, short enough for one hiccup of the host to halve its figure.
constexpr double kWindowSeconds = 0.04;
double gb_per_s_of(const Kernel& k) {
  const auto t0 = std::chrono::steady_clock::now();
  double seconds = 0;
  int calls = 0;
  do {
    k.run();
    ++calls;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (seconds < kWindowSeconds);
  return k.bytes * calls / seconds / 1e9;
}

void print_row(const Kernel& k) {
  const auto [lo, hi] = std::minmax_element(k.ratios.begin(), k.ratios.end());
  std::printf("%-34s %8.1f GB/s   roofline %.3f (median)  %.3f-%.3f (rounds)\n", k.name.c_str(),
              median(k.gbs), median(k.ratios), *lo, *hi);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const long params = (long)((argc > 2 ? std::atof(argv[2]) : 124.0) * 1e6);
  const int positions = argc > 3 ? std::atoi(argv[3]) : 2048;
  const long band_floats = 1L << 28;  // 1 GiB
  FirstTouchVector<float> band;
  assign_parallel(band, band_floats, 1.f);
  AdamWBuffers a(params);
  KvBuffers kv(positions);
  DecodeProducts decode(preset_model("gpt2-small"));
  DecodeStep step32(false), step16(true);
  const kernels::AdamWStep step{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.f};
  const double kv_bytes = 2.0 * KvBuffers::kLayers * kv.layer_floats();
  std::vector<Kernel> kernels = {
      {"adamw fp32 (28 B/param)", 28.0 * params, Traffic::kAdamW,
       [&] {
         kernels::adamw_update(a.p.data(), a.g.data(), a.m.data(), a.v.data(), params, step, true);
       }},
      {"adamw + bf16 copy (30 B/param)", 30.0 * params, Traffic::kAdamW,
       [&] {
         kernels::adamw_update(a.p.data(), a.g.data(), a.m.data(), a.v.data(), params, step, true,
                               a.low.data());
       }},
      {"kv-cache attention fp32", kv_bytes * 4, Traffic::kRead, [&] { kv.decode(false); }},
      {"kv-cache attention bf16", kv_bytes * 2, Traffic::kRead, [&] { kv.decode(true); }},
      {"decode products fp32", 4.0 * decode.weights(), Traffic::kRead, [&] { decode.step(false); }},
      {"decode products bf16", 2.0 * decode.weights(), Traffic::kRead, [&] { decode.step(true); }},
      {"decode step fp32 (batch 1)", step32.bytes(4), Traffic::kRead, [&] { step32.step(); }},
      {"decode step bf16 (batch 1)", step16.bytes(2), Traffic::kRead, [&] { step16.step(); }},
  };
  // Written: param, m, grad (v stays as AdamW left it: its square root must stay real).
  float* const adamw_arrays[] = {a.p.data(), a.m.data(), a.g.data(), a.v.data()};
  double sink = 0;
  std::vector<double> read_bw, stream_bw;
  for (Kernel& k : kernels) k.run();  // warm-up: code, page tables
  // The first read pass after that warm-up has read at a quarter of the later ones (7.9
  // against 26.5-31.9 GB/s on a Zen 3 VM), which made that round's ratios 2.5-9 "of the
  // roofline"; one pass of each kind before the rounds, discarded.
  bench::read_gb_per_s(band.data(), band_floats, &sink);
  bench::stream_gb_per_s<4, 3>(adamw_arrays, params);
  // Each kernel right after its own bandwidth pass, so both see the same moment of the host.
  for (int r = 0; r < rounds; ++r)
    for (Kernel& k : kernels) {
      const bool read = k.traffic == Traffic::kRead;
      const double bandwidth = read ? bench::read_gb_per_s(band.data(), band_floats, &sink)
                                    : bench::stream_gb_per_s<4, 3>(adamw_arrays, params);
      (read ? read_bw : stream_bw).push_back(bandwidth);
      const double gbs = gb_per_s_of(k);
      k.gbs.push_back(gbs);
      k.ratios.push_back(gbs / bandwidth);
    }
  std::printf(
      "read bandwidth %.1f GB/s, read 4 + write 3 stream %.1f GB/s (medians of the passes; %d "
      "rounds, %d threads; check %.0f)\n",
      median(read_bw), median(stream_bw), rounds, omp_get_max_threads(), sink);
  for (const Kernel& k : kernels) print_row(k);
  return 0;
}
