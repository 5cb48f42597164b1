// Ring attention (context parallelism, --cp-comm-type p2p) on the ranks of the job against
// the one-process kernel on the whole sequence, forward + backward, gpt2-small's 12 heads of
// 64: time per rank, the ideal (one process / c), and the overlap of the ring's messages
// with the tiles (1 - time waiting in the ring / time of the same exchanges alone).
//   mpirun -np 2 build/bench/bench_cp [seq=4096] [reps=3]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "comm/mpi_communicator.h"
#include "context_parallel/ring_attention.h"
#include "kernels/attention.h"

namespace {

using namespace trident;

// Fastest of reps calls of f, in ms (every rank calls f; the ranks start together).
double best_ms(comm::MpiCommunicator& c, int reps, const std::function<void()>& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(c.handle());
    const auto t0 = std::chrono::steady_clock::now();
    f();
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    c.all_reduce(&ms, 1, comm::ReduceOp::kMax);
    best = std::min(best, ms);
  }
  return best;
}

struct Problem {
  kernels::AttentionShape shape;
  std::vector<float> qkv, out, lse, dqkv;
  std::vector<int> positions;
  Problem(int seq, int heads, int hd) : shape{1, seq, heads, hd} {
    qkv.resize((size_t)seq * 3 * heads * hd);
    for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = 0.01f * (float)(i % 97);
    out.resize((size_t)seq * heads * hd), lse.resize((size_t)heads * seq), dqkv.resize(qkv.size());
  }
  void forward_backward(const context_parallel::ContextParallel* cp) {
    const kernels::QkvLayout l = kernels::QkvLayout::packed(shape.heads, shape.head_dim);
    if (!cp) {
      kernels::flash_attention_forward(qkv.data(), l, out.data(), lse.data(), shape, {},
                                       kernels::Precision::kFp32, nullptr);
      kernels::flash_attention_backward(qkv.data(), l, out.data(), out.data(), lse.data(),
                                        dqkv.data(), shape, {}, kernels::Precision::kFp32, nullptr);
      return;
    }
    context_parallel::ring_attention_forward(qkv.data(), l, out.data(), lse.data(), shape, {},
                                             kernels::Precision::kFp32, nullptr, *cp);
    context_parallel::ring_attention_backward(qkv.data(), l, out.data(), out.data(), lse.data(),
                                              dqkv.data(), shape, {}, kernels::Precision::kFp32,
                                              nullptr, *cp);
  }
};

// The ring's messages alone: forward c - 1 key/value blocks, backward c - 1 blocks and c
// gradient blocks, each a send to the next rank and a receive from the previous.
void exchanges_alone(comm::Communicator& c, long block) {
  std::vector<float> a(block), b(block);
  const int steps = 2 * (c.size() - 1) + c.size();
  for (int s = 0; s < steps; ++s) {
    auto send = c.isend(a.data(), block, (c.rank() + 1) % c.size(), 1);
    auto recv = c.irecv(b.data(), block, (c.rank() + c.size() - 1) % c.size(), 1);
    send->wait(), recv->wait();
  }
}

}  // namespace

int main(int argc, char** argv) {
  comm::MpiRuntime mpi(&argc, &argv);
  const int seq = argc > 1 ? std::atoi(argv[1]) : 4096, reps = argc > 2 ? std::atoi(argv[2]) : 3;
  const int c = mpi.world_size(), heads = 12, hd = 64;
  if (seq % (2 * c) != 0) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "bench_cp: seq must be divisible by 2c\n");
    return 2;
  }
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  comm::MpiCommunicator group(dup, "cp");
  const context_parallel::ContextParallel cp{c, group.rank(), &group};
  Problem whole(seq, heads, hd), local(seq / c, heads, hd);
  local.positions.resize(seq / c);
  for (int t = 0; t < seq / c; ++t)
    local.positions[t] = context_parallel::global_position(t, seq, cp.rank, c);
  local.shape.positions = local.positions.data();
  const double one = best_ms(group, reps, [&] { whole.forward_backward(nullptr); });
  group.reset_counters();
  const double ring = best_ms(group, reps, [&] { local.forward_backward(&cp); });
  const double waited =
      (group.counters().send.seconds + group.counters().recv.seconds) * 1e3 / reps;
  const double alone =
      best_ms(group, reps, [&] { exchanges_alone(group, 2L * heads * (seq / c) * hd); });
  if (cp.rank == 0)
    std::printf(
        "seq %d, %d heads of %d, fwd+bwd: one process %.1f ms; ring over c = %d: %.1f ms per "
        "rank (ideal %.1f); messages alone %.1f ms, waited in the ring %.1f ms: overlap "
        "%.0f%%\n",
        seq, heads, hd, one, c, ring, one / c, alone, waited,
        100.0 * std::max(0.0, 1.0 - waited / alone));
  return 0;
}
