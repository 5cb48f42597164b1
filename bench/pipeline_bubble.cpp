// Pipeline bubble through the real executor and real MPI messages, with a synthetic stage
// whose forward and backward only sleep (fixed times that do not need a core, so more
// ranks than cores do not distort the schedule). Run under mpirun with p ranks:
//   mpirun -np P bench_pipeline_bubble V M [forward_ms backward_ms [SCHEDULE [weight_ms]]]
// SCHEDULE is 1f1b, interleaved (the default by V), gpipe or zb-h1; backward_ms is the whole
// backward, of which zb-h1 runs weight_ms (default half) as W and the rest as B.
// Prints the measured bubble (idle / compute, per rank) and the analytic one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"
#include "distributed/process_groups.h"
#include "pipeline_parallel/executor.h"
#include "pipeline_parallel/simulator.h"
#include "pipeline_parallel/timeline.h"

namespace {

using namespace trident;

class SleepStage final : public pipeline_parallel::PipelineStage {
 public:
  SleepStage(long floats, int slots, double forward_ms, double backward_ms, double weight_ms)
      : buffers_(3 * slots, std::vector<float>(floats)),
        grad_(floats),
        f_(forward_ms),
        b_(backward_ms),
        w_(weight_ms) {}
  double forward_chunk(int slot, const int*, int, int, float, float*, long) override {
    sleep(f_);
    return 0.0;
  }
  void backward_chunk(int, int, int) override { sleep(b_); }
  void backward_input_chunk(int, int, int, int) override { sleep(b_ - w_); }
  void weight_chunk(int) override { sleep(w_); }
  float* input_buffer(int slot) override { return buffers_[3 * slot].data(); }
  const float* output_buffer(int slot) const override { return buffers_[3 * slot + 1].data(); }
  float* output_grad_buffer(int slot) override { return buffers_[3 * slot + 2].data(); }
  const float* input_grad() const override { return grad_.data(); }

 private:
  std::vector<std::vector<float>> buffers_;
  static void sleep(double ms) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }
  std::vector<float> grad_;
  double f_, b_, w_;
};

}  // namespace

int main(int argc, char** argv) {
  comm::MpiRuntime mpi(&argc, &argv);
  const int p = mpi.world_size(), v = argc > 1 ? std::atoi(argv[1]) : 1;
  const int m = argc > 2 ? std::atoi(argv[2]) : p;
  const double forward_ms = argc > 3 ? std::atof(argv[3]) : 20,
               backward_ms = argc > 4 ? std::atof(argv[4]) : 40;
  const double weight_ms = argc > 6 ? std::atof(argv[6]) : backward_ms / 2;
  pipeline_parallel::ScheduleConfig sc{v > 1 ? pipeline_parallel::ScheduleKind::kInterleaved
                                             : pipeline_parallel::ScheduleKind::kOneFOneB,
                                       p, v, m};
  if (argc > 5) sc.kind = pipeline_parallel::parse_schedule_kind(argv[5]);
  distributed::ProcessGrid grid(p, 1, p);
  distributed::ProcessGroups groups = distributed::make_mpi_groups(grid, mpi.world_rank());
  const int stage = groups.pipeline->rank(), micro = 1, seq = 64, hidden = 256;
  std::vector<int> slots =
      pipeline_parallel::max_in_flight(pipeline_parallel::build_schedule(sc, stage), v);
  std::vector<std::unique_ptr<SleepStage>> owned;
  std::vector<pipeline_parallel::PipelineStage*> chunks;
  for (int j = 0; j < v; ++j) {
    owned.push_back(std::make_unique<SleepStage>((long)micro * seq * hidden, slots[j],
                                                 forward_ms / v, backward_ms / v, weight_ms / v));
    chunks.push_back(owned.back().get());
  }
  pipeline_parallel::PipelineExecutor executor(sc, chunks, *groups.pipeline, *groups.tensor, micro,
                                               seq, hidden, {true, mpi.world_rank()});
  std::vector<int> tokens((size_t)micro * (seq + 1), 0);
  auto tokens_of = [&](int) { return tokens.data(); };
  double worst = 0, mean = 0;
  const int steps = 3;
  for (int step = 0; step <= steps; ++step) {
    executor.train_step(tokens_of, 1.f);
    auto events = executor.take_events();
    if (step == 0) continue;  // warm-up
    for (double bubble : pipeline_parallel::pipeline_bubble(events, *groups.pipeline).per_stage) {
      worst = std::max(worst, bubble);
      mean += bubble / (p * steps);
    }
  }
  const double analytic = pipeline_parallel::analytic_bubble_fraction(
      sc, forward_ms, backward_ms - weight_ms, weight_ms);
  if (mpi.world_rank() == 0)
    std::printf(
        "%-11s p=%d v=%d m=%2d  measured bubble mean %.3f max %.3f  analytic %.3f  (diff %+.1f "
        "points)\n",
        pipeline_parallel::schedule_name(sc.kind).c_str(), p, v, m, mean, worst, analytic,
        100 * (mean - analytic));
  return 0;
}
