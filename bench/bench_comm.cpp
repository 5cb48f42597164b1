// Latency and bandwidth of trident's communicator between 2 ranks (run under mpirun -np 2):
// point-to-point ping-pong and all-reduce, over the MpiCommunicator with and without the
// hang watchdog (--distributed-timeout-minutes), as training uses them. One JSON line per
// (operation, bytes, watchdog) on rank 0: median microseconds per operation and GB/s
// (p2p: bytes / one-way time; all-reduce: bus bandwidth 2 (n - 1) / n x bytes / time).
//   mpirun -np 2 bench_comm [max MiB] [repetitions]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/watchdog.h"

namespace {

using trident::comm::MpiCommunicator;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Op>
double time_us(MpiCommunicator& c, int reps, Op op) {
  std::vector<double> t;
  op();  // warm-up: connections and buffers
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(c.handle());
    const auto t0 = std::chrono::steady_clock::now();
    op();
    t.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

void report(const char* op, long bytes, bool watched, double us, double gbps) {
  std::printf(
      "{\"op\": \"%s\", \"bytes\": %ld, \"watchdog\": %s, \"us\": %.2f, \"gb_per_s\": %.3f}\n", op,
      bytes, watched ? "true" : "false", us, gbps);
}

void run(MpiCommunicator& c, bool watched, long max_bytes, int reps) {
  std::vector<float> buf(max_bytes / sizeof(float), 1.f);
  const int peer = 1 - c.rank();
  for (long bytes = 8; bytes <= max_bytes; bytes *= 16) {
    const long n = bytes / (long)sizeof(float);
    const int r = bytes > (1 << 20) ? std::max(3, reps / 10) : reps;
    // Ping-pong: half the round trip is the one-way time.
    const double rtt = time_us(c, r, [&] {
      if (c.rank() == 0)
        c.send(buf.data(), n, peer, 0), c.recv(buf.data(), n, peer, 0);
      else
        c.recv(buf.data(), n, peer, 0), c.send(buf.data(), n, peer, 0);
    });
    const double ar = time_us(c, r, [&] {
      c.all_reduce(buf.data(), n, trident::comm::ReduceOp::kSum);
      std::fill(buf.begin(), buf.begin() + n, 1.f);  // keep values finite
    });
    if (c.rank() != 0) continue;
    report("p2p", bytes, watched, rtt / 2, bytes / (rtt / 2) / 1e3);
    report("all-reduce", bytes, watched, ar, bytes * 2.0 * (c.size() - 1) / c.size() / ar / 1e3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  trident::comm::MpiRuntime mpi(&argc, &argv);
  if (mpi.world_size() != 2) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "bench_comm: run it on 2 ranks\n");
    return 2;
  }
  const long max_bytes = (long)((argc > 1 ? std::atof(argv[1]) : 64) * (1 << 20));
  const int reps = argc > 2 ? std::atoi(argv[2]) : 200;
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::fprintf(stderr, "bench_comm: rank %d on %s\n", mpi.world_rank(), name);
  for (bool watched : {false, true}) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    auto watchdog =
        watched ? std::make_shared<trident::comm::Watchdog>(600.0, "bench_comm", mpi.node_names())
                : nullptr;
    MpiCommunicator c(dup, "world", watchdog);
    run(c, watched, max_bytes, reps);
  }
  return 0;
}
