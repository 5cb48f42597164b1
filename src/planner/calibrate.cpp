#include "planner/calibrate.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/peak.h"
#include "model/flops.h"
#include "model/gpt_model.h"
#include "planner/layer_costs.h"

namespace trident::planner {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Every rank leaves together (MPI may return from an empty all-reduce at once).
void barrier(comm::Communicator& world) {
  double x = 0;
  world.all_reduce(&x, 1, comm::ReduceOp::kSum);
}

double mean_over_ranks(comm::Communicator& world, double x) {
  world.all_reduce(&x, 1, comm::ReduceOp::kSum);
  return x / world.size();
}

// Layer-like products: rows = tokens of a micro-batch, columns and depth = widths of h / t.
// Fills the efficiency by FLOPs (the mean over shapes of one size) and the grid by shape.
void gemm_table(comm::Communicator& world, double peak, const CalibrationOptions& o,
                std::ostream& log, GemmEfficiency& out) {
  std::map<double, std::vector<double>> by_gflop;
  out.grid_rows = {128, 512, 2048};
  out.grid_width = {128, 256, 512, 1024, 2048};
  out.grid.clear();
  for (int m : {128, 512, 2048})
    for (int n : {128, 256, 512, 1024, 2048}) {
      barrier(world);  // start together
      // The best of several short runs: on a shared machine that is the machine's rate,
      // not the neighbours' share of it.
      double tflops = 0;
      for (int r = 0; r < 4; ++r)
        tflops = std::max(tflops, kernels::measure_gemm_peak_tflops(
                                      m, n, n, o.seconds_per_point / 4, o.precision));
      const double efficiency = std::clamp(mean_over_ranks(world, tflops) / peak, 1e-3, 1.0);
      const double gflop = 2.0 * m * n * n / 1e9;
      log << "  gemm " << m << " x " << n << " x " << n << ": " << gflop << " GFLOP, "
          << efficiency * peak << " TFLOP/s per rank = " << efficiency << " of peak\n";
      by_gflop[gflop].push_back(efficiency);
      out.grid.push_back(efficiency);
    }
  out.table.clear();
  for (const auto& [gflop, values] : by_gflop) {
    double sum = 0;
    for (double v : values) sum += v;
    out.table.emplace_back(gflop, sum / values.size());
  }
}

// Read + write bandwidth of this rank's threads over 256 MiB (b[i] = a[i] * s + b[i] moves
// 12 bytes an element: two reads, one write).
double memory_bandwidth_gbs(comm::Communicator& world, double seconds) {
  const long n = 32L << 20;
  std::vector<float> a(n, 1.f), b(n, 2.f);
  double rate = 0;
  barrier(world);
  const double start = now_seconds();
  do {  // the best pass
    const double pass = now_seconds();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) b[i] = a[i] * 0.5f + b[i];
    rate = std::max(rate, 12.0 * n / (now_seconds() - pass) / 1e9);
  } while (now_seconds() - start < seconds);
  volatile float sink = b[n / 2];  // the stream's result is used
  (void)sink;
  return mean_over_ranks(world, rate);
}

// Half the round trip of `count` floats between ranks 0 and 1 (others wait).
double ping_pong_seconds(comm::Communicator& world, long count, int repeats) {
  std::vector<float> buf(std::max(1L, count));
  double elapsed = 0;
  if (world.rank() < 2) {
    const int peer = 1 - world.rank();
    elapsed = 1e300;
    for (int r = 0; r < repeats; ++r) {  // the best round trip
      const double start = now_seconds();
      if (world.rank() == 0) {
        world.send(buf.data(), count, peer, 7);
        world.recv(buf.data(), count, peer, 8);
      } else {
        world.recv(buf.data(), count, peer, 7);
        world.send(buf.data(), count, peer, 8);
      }
      elapsed = std::min(elapsed, (now_seconds() - start) / 2);
    }
  }
  world.all_reduce(&elapsed, 1, comm::ReduceOp::kMax);
  return elapsed;
}

double all_reduce_seconds(comm::Communicator& world, long count, int repeats) {
  std::vector<float> buf(count, 1.f);
  world.all_reduce(buf.data(), count, comm::ReduceOp::kSum);  // warm-up
  double elapsed = 1e300;
  for (int r = 0; r < repeats; ++r) {  // the best
    barrier(world);
    const double start = now_seconds();
    world.all_reduce(buf.data(), count, comm::ReduceOp::kSum);
    elapsed = std::min(elapsed, now_seconds() - start);
  }
  world.all_reduce(&elapsed, 1, comm::ReduceOp::kMax);
  return elapsed;
}

LinkSpec measure_link(comm::Communicator& world, std::ostream& log) {
  LinkSpec link{1, 1};
  if (world.size() < 2) {
    log << "  one rank: no link to measure (run under mpirun -np <devices>)\n";
    return link;
  }
  const double latency = ping_pong_seconds(world, 2, 200);
  const long big = 16L << 20;  // 64 MiB of floats
  const double p2p = ping_pong_seconds(world, big, 5);
  const double reduce = all_reduce_seconds(world, big, 5);
  const int n = world.size();
  const double bytes = 4.0 * big;
  // The ring all-reduce moves 2 (n - 1) / n of the buffer through each link in 2 (n - 1)
  // steps: the bandwidth that makes that model give the measured time.
  const double ring_bytes = 2.0 * (n - 1) / n * bytes;
  link.latency_us = std::max(0.01, latency * 1e6);
  link.bandwidth_gbs = ring_bytes / std::max(1e-9, reduce - 2.0 * (n - 1) * latency) / 1e9;
  log << "  point-to-point: latency " << link.latency_us << " us, 64 MiB at "
      << bytes / std::max(1e-9, p2p - latency) / 1e9 << " GB/s; all-reduce of 64 MiB over " << n
      << " ranks " << reduce * 1e3 << " ms = " << link.bandwidth_gbs
      << " GB/s per link in the ring model\n";
  return link;
}

// Best seconds of one forward + backward of a micro-batch through a chunk trident builds.
double chunk_seconds(comm::Communicator& world, const ModelConfig& m, int micro_batch,
                     ChunkPlacement placement, kernels::Precision precision, int repeats) {
  comm::SingleRankCommunicator tp("tensor");
  ChunkOptions o;
  o.placement = placement;
  o.precision = precision;
  GPTModel chunk(m, tp, micro_batch, m.seq_length, o);
  chunk.parameters().initialize(1234, 0.02f, m.num_layers);
  std::vector<int> tokens((size_t)micro_batch * (m.seq_length + 1), 1);
  std::vector<double> times;
  barrier(world);
  for (int r = 0; r <= repeats; ++r) {
    const double start = now_seconds();
    chunk.forward_chunk(0, tokens.data(), micro_batch, m.seq_length, 1.f);
    chunk.backward_chunk(0, micro_batch, m.seq_length);
    if (r > 0) times.push_back(now_seconds() - start);  // the first warms up
  }
  std::sort(times.begin(), times.end());
  return mean_over_ranks(world, times.front());  // the best run, as for the GEMMs
}

// The attention core and element-wise kernels, from whole layers trident runs: two shapes
// with the same tokens and width (so the same element-wise work) and 8x apart in attention
// FLOPs separate the two; what the calibrated GEMMs and the weight-gradient accumulation do
// not explain is theirs.
void calibrate_layer_kernels(comm::Communicator& world, Cluster& c, const CalibrationOptions& o,
                             std::ostream& log) {
  ModelConfig m;
  m.num_layers = 2, m.hidden_size = 256, m.num_attention_heads = 4, m.vocab_size = 1000;
  double residual[2], attention[2], elementwise = 0;
  // Same tokens (b x s), attention FLOPs 8x apart at the default long sequence of 1024.
  const int seqs[2] = {128, o.long_sequence}, batches[2] = {o.long_sequence / 128, 1};
  for (int i = 0; i < 2; ++i) {
    m.seq_length = seqs[i];
    const double measured =
        chunk_seconds(world, m, batches[i], {0, 2, false, false}, o.precision, o.repeats) / 2;
    const LayerWork w = transformer_layer_work(m, 1, batches[i]);
    double gemm = 0;
    for (const Gemm& g : w.gemms) gemm += 3 * gemm_seconds(c, g);
    residual[i] = measured - gemm - layer_accumulate_seconds(c, w, o.precision);
    attention[i] = 3 * w.attention_flops;
    elementwise = 3 * w.elementwise;
    log << "  layer h 256, b " << batches[i] << ", s " << seqs[i] << ": " << measured * 1e3
        << " ms forward + backward, " << gemm * 1e3 << " ms of it matrix products\n";
  }
  const double per_flop = std::max((residual[1] - residual[0]) / (attention[1] - attention[0]),
                                   1 / (c.device.peak_tflops * 1e12));
  // At most 1: per_flop is bounded by the peak, but 1 / (1 / x * x) may round above 1.
  c.kernels.attention_efficiency = std::min(1.0, 1 / (per_flop * c.device.peak_tflops * 1e12));
  c.kernels.elementwise_ns_per_element =
      std::max(1e-4, (residual[0] - per_flop * attention[0]) / elementwise * 1e9);
  log << "  attention core at " << c.kernels.attention_efficiency << " of peak; element-wise "
      << c.kernels.elementwise_ns_per_element << " ns per element access\n";
}

// The softmax and cross-entropy over the logits: an output layer alone (no transformer
// layers) over GPT-2's vocabulary, less its matrix products and final LayerNorm.
void calibrate_cross_entropy(comm::Communicator& world, Cluster& c, const CalibrationOptions& o,
                             std::ostream& log) {
  ModelConfig m;
  m.num_layers = 1, m.hidden_size = 256, m.num_attention_heads = 4, m.seq_length = 128;
  m.vocab_size = o.vocabulary;
  const int b = 8;
  const double measured = chunk_seconds(world, m, b, {0, 0, false, true}, o.precision, o.repeats);
  const HeadWork w = output_layer_work(m, 1, b);
  const double known = head_forward_seconds(c, w).gemm + elementwise_seconds(c, 3 * w.elementwise) +
                       head_accumulate_seconds(c, w, o.precision, m.hidden_size);
  c.kernels.cross_entropy_ns_per_logit =
      std::max(1e-4, (measured - known) / w.logits_elements * 1e9);
  log << "  output layer + loss, " << w.logits_elements / 1e6 << "M logits: " << measured * 1e3
      << " ms, " << c.kernels.cross_entropy_ns_per_logit << " ns per logit besides its "
      << "products\n";
}

// The gradient norm and AdamW (with the bf16 copy) over 8M parameters: four 32 MiB fp32
// arrays, larger than the caches, as a training rank's are.
void calibrate_optimizer(comm::Communicator& world, Cluster& c, const CalibrationOptions& o,
                         std::ostream& log) {
  const long n = 8L << 20;
  std::vector<float> param(n, 0.1f), grad(n, 1e-3f), exp_avg(n, 0.f), exp_avg_sq(n, 0.f);
  std::vector<std::uint16_t> low(n);
  kernels::AdamWStep step{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
  double best = 1e300;
  barrier(world);
  for (int r = 0; r <= std::max(2, o.repeats); ++r) {
    const double start = now_seconds();
    volatile double norm = kernels::sum_of_squares(grad.data(), n);
    (void)norm;
    kernels::adamw_update(param.data(), grad.data(), exp_avg.data(), exp_avg_sq.data(), n, step,
                          true, o.precision == kernels::Precision::kFp32 ? nullptr : low.data(),
                          o.precision);
    if (r > 0) best = std::min(best, now_seconds() - start);  // the first warms up
    ++step.step;
  }
  c.kernels.optimizer_ns_per_parameter = mean_over_ranks(world, best) / n * 1e9;
  log << "  optimizer (gradient norm + AdamW): " << c.kernels.optimizer_ns_per_parameter
      << " ns per parameter\n";
}

// This process's resident memory now, before calibration allocates anything: the code,
// MPI and the allocator, which every training rank holds besides its planned buffers.
double resident_gib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return (double)resident * sysconf(_SC_PAGE_SIZE) / (1L << 30);
}

}  // namespace

namespace {

// Intra-node: every node's ranks at once (as tensor-parallel groups run side by side);
// inter-node: one rank per node, the others waiting.
void measure_links(comm::Communicator& world, const NodeGroups& g, Cluster& c, std::ostream& log) {
  if (!g.node) {
    c.intra_node = c.inter_node = measure_link(world, log);
    return;
  }
  log << "  inside each node (" << g.node->size() << " ranks):\n";
  if (g.node->size() > 1) c.intra_node = measure_link(*g.node, log);
  barrier(world);
  log << "  between nodes (" << g.nodes << ", one rank each):\n";
  if (g.leaders) c.inter_node = measure_link(*g.leaders, log);
  // Every rank returns the same cluster: the first rank's figures.
  float links[4] = {(float)c.intra_node.latency_us, (float)c.intra_node.bandwidth_gbs,
                    (float)c.inter_node.latency_us, (float)c.inter_node.bandwidth_gbs};
  world.broadcast(links, 4, 0);
  c.intra_node = {links[1], links[0]};
  c.inter_node = {links[3], links[2]};
  if (g.node->size() == 1) c.intra_node = c.inter_node;
}

}  // namespace

Cluster calibrate_this_machine(comm::Communicator& world, const CalibrationOptions& o,
                               std::ostream& log, const NodeGroups& groups) {
  Cluster c;
  c.device.runtime_memory_gib = mean_over_ranks(world, resident_gib());
  c.source = "calibration";
  c.kernels.separate_gradient_accumulation = true;  // trident's kernels add in a second pass
  c.nodes = groups.node ? groups.nodes : 1;
  c.devices_per_node = groups.node ? groups.node->size() : world.size();
  // The loop runs on every rank's threads at once, so ranks that share a core (SMT siblings)
  // measure the rate they really get together.
  // Careful: the cluster file keeps this peak.
  const int threads = omp_get_max_threads();
  barrier(world);
  kernels::PeakMeasurement peak =
      kernels::measure_peak_tflops(o.precision, threads, kernels::kCarefulPeakTrials);
  c.device.name = std::string("CPU rank (") + kernels::precision_name(o.precision) + ", " +
                  std::to_string(threads) + " thread" + (threads > 1 ? "s)" : ")");
  c.device.peak_tflops = mean_over_ranks(world, peak.tflops);
  log << "calibrating " << world.size() << " ranks: peak " << c.device.peak_tflops
      << " TFLOP/s per rank (" << kernels::precision_name(o.precision) << " multiply-add loop)\n";
  const double bytes = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE);
  c.device.memory_gib = bytes / std::max(1, o.ranks_on_node) / (1L << 30);
  c.device.memory_bandwidth_gbs = memory_bandwidth_gbs(world, o.bandwidth_seconds);
  log << "  memory: " << c.device.memory_gib << " GiB and " << c.device.memory_bandwidth_gbs
      << " GB/s (read + write) per rank; a process holds " << c.device.runtime_memory_gib * 1024
      << " MiB before any buffer\n";
  gemm_table(world, c.device.peak_tflops, o, log, c.gemm);
  calibrate_layer_kernels(world, c, o, log);
  calibrate_cross_entropy(world, c, o, log);
  calibrate_optimizer(world, c, o, log);
  measure_links(world, groups, c, log);
  return c;
}

}  // namespace trident::planner
