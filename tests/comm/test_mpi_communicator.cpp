// The MPI communicator's collectives under mpirun (3 ranks), with and without the hang
// watchdog (which turns every blocking call into a non-blocking one and a watched wait):
// every result against the sum or copy worked out here from each rank's known inputs, the
// in-place and out-of-place forms, slices past the per-call limit, uneven blocks, and the
// counters (calls, bytes, and the seconds a rank spends waiting for a late peer). Also the
// pipeline bubble replayed from op CPU times gathered over the group (p = 3), against the
// analytic bubbles of 1F1B, interleaved and ZB-H1.
//   mpirun -np 3 test_communicator
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/watchdog.h"
#include "pipeline_parallel/simulator.h"
#include "pipeline_parallel/timeline.h"

namespace trident::comm {
namespace {

struct Fixture {
  std::vector<std::string> nodes;
};
Fixture* g_fixture = nullptr;  // set once by main (MPI is initialised there)

// A fresh communicator over a duplicate of the world, watched or not.
std::unique_ptr<MpiCommunicator> make(bool watched) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  auto watchdog =
      watched ? std::make_shared<Watchdog>(120.0, "test_communicator", g_fixture->nodes) : nullptr;
  return std::make_unique<MpiCommunicator>(dup, "world", watchdog);
}

// Rank r's value at (block b, index i): small integers, so every sum is exact in float.
float value(int r, int b, long i) {
  return (float)(r * 1000 + b * 10 + i % 7);
}

// The sum over ranks of value(r, b, i).
float summed(int ranks, int b, long i) {
  float s = 0;
  for (int r = 0; r < ranks; ++r) s += value(r, b, i);
  return s;
}

std::vector<float> blocks_of(int rank, int ranks, long n) {
  std::vector<float> v((size_t)ranks * n);
  for (int b = 0; b < ranks; ++b)
    for (long i = 0; i < n; ++i) v[(size_t)b * n + i] = value(rank, b, i);
  return v;
}

long mismatches(const float* got, int ranks, int block, long n) {
  long bad = 0;
  for (long i = 0; i < n; ++i) bad += got[i] != summed(ranks, block, i);
  return bad;
}

class Collectives : public ::testing::TestWithParam<bool> {};

TEST_P(Collectives, ReduceScatterOutOfPlaceAndInPlace) {
  auto c = make(GetParam());
  const int r = c->rank(), p = c->size();
  for (long n : {1L, 1000L, (1L << 22) + 5}) {  // the last crosses a slice boundary
    std::vector<float> send = blocks_of(r, p, n), recv(n, -1.f);
    c->reduce_scatter(send.data(), recv.data(), n);
    EXPECT_EQ(mismatches(recv.data(), p, r, n), 0) << "out of place, n = " << n;
    EXPECT_EQ(send, blocks_of(r, p, n)) << "the send buffer is left alone";
    c->reduce_scatter(send.data(), send.data(), n);
    EXPECT_EQ(mismatches(send.data() + (long)r * n, p, r, n), 0) << "in place, n = " << n;
  }
}

TEST_P(Collectives, NonBlockingReduceScatter) {
  auto c = make(GetParam());
  const int r = c->rank(), p = c->size();
  const long n = 4099;
  std::vector<float> send = blocks_of(r, p, n), recv(n, -1.f), inplace = blocks_of(r, p, n);
  auto a = c->ireduce_scatter(send.data(), recv.data(), n);
  auto b = c->ireduce_scatter(inplace.data(), inplace.data(), n);
  a->wait(), b->wait();
  EXPECT_EQ(mismatches(recv.data(), p, r, n), 0);
  EXPECT_EQ(mismatches(inplace.data() + (long)r * n, p, r, n), 0);
}

TEST_P(Collectives, UnevenReduceScatterAndAllGather) {
  auto c = make(GetParam());
  const int r = c->rank(), p = c->size();
  const std::vector<long> counts = {5, 0, 11};  // a rank may own nothing
  const long total = std::accumulate(counts.begin(), counts.end(), 0L);
  std::vector<float> data(total);
  for (long i = 0; i < total; ++i) data[i] = value(r, 0, i);
  c->ireduce_scatter_v(data.data(), counts)->wait();
  const long mine = std::accumulate(counts.begin(), counts.begin() + r, 0L);
  for (long i = mine; i < mine + counts[r]; ++i) EXPECT_EQ(data[i], summed(p, 0, i)) << i;
  c->iall_gather_v(data.data(), counts)->wait();
  for (long i = 0; i < total; ++i) EXPECT_EQ(data[i], summed(p, 0, i)) << "gathered " << i;
}

TEST_P(Collectives, AllReduceAllGatherBroadcast) {
  auto c = make(GetParam());
  const int r = c->rank(), p = c->size();
  const long n = 777;
  std::vector<float> x(n);
  for (long i = 0; i < n; ++i) x[i] = value(r, 1, i);
  c->all_reduce(x.data(), n, ReduceOp::kSum);
  EXPECT_EQ(mismatches(x.data(), p, 1, n), 0);
  std::vector<double> d = {(double)r + 0.25};
  c->all_reduce(d.data(), 1, ReduceOp::kMax);
  EXPECT_EQ(d[0], p - 1 + 0.25);
  std::vector<float> gathered((size_t)p * n, 0.f), own(n, (float)r);
  c->all_gather(own.data(), gathered.data(), n);
  for (int b = 0; b < p; ++b) EXPECT_EQ(gathered[(size_t)b * n + n - 1], (float)b);
  std::vector<int> ids = {r, r + 1};
  c->broadcast(ids.data(), 2, p - 1);
  EXPECT_EQ(ids, (std::vector<int>{p - 1, p}));
}

// Rank r sends (r + q) % 4 floats to rank q (some blocks empty), each float naming sender,
// receiver and position; every received block is checked against what its sender wrote.
TEST_P(Collectives, AllToAllWithUnevenAndEmptyBlocks) {
  auto c = make(GetParam());
  const int r = c->rank(), p = c->size();
  auto sent = [](int from, int to, long i) { return (float)(from * 100 + to * 10 + i); };
  std::vector<long> send_counts(p), recv_counts(p);
  for (int q = 0; q < p; ++q) send_counts[q] = (r + q) % 4, recv_counts[q] = (q + r) % 4;
  std::vector<float> send, recv(std::accumulate(recv_counts.begin(), recv_counts.end(), 0L), -1.f);
  for (int q = 0; q < p; ++q)
    for (long i = 0; i < send_counts[q]; ++i) send.push_back(sent(r, q, i));
  c->reset_counters();
  c->all_to_all_v(send.data(), send_counts, recv.data(), recv_counts);
  long at = 0;
  for (int q = 0; q < p; ++q)
    for (long i = 0; i < recv_counts[q]; ++i, ++at) EXPECT_EQ(recv[at], sent(q, r, i)) << q << i;
  EXPECT_EQ(c->counters().all_to_all.calls, 1);
  const long to_others =
      std::accumulate(send_counts.begin(), send_counts.end(), 0L) - send_counts[r];
  EXPECT_EQ(c->counters().all_to_all.bytes, to_others * (long)sizeof(float));
}

TEST_P(Collectives, RingOfSendsAndReceives) {
  auto c = make(GetParam());
  const int r = c->rank(), p = c->size();
  std::vector<float> out(64, (float)r), in(64, -1.f);
  auto receive = c->irecv(in.data(), 64, (r + p - 1) % p, 7);
  c->send(out.data(), 64, (r + 1) % p, 7);
  receive->wait();
  EXPECT_EQ(in[63], (float)((r + p - 1) % p));
}

TEST_P(Collectives, CountersHoldCallsBytesAndWaitingTime) {
  auto c = make(GetParam());
  const int r = c->rank(), p = c->size();
  std::vector<float> x(100, 1.f), blocks((size_t)p * 100, 1.f), one(100);
  // Rank 0 waits for a peer that arrives 50 ms late, in a blocking call and in the wait of
  // a non-blocking one: both times land in rank 0's counters.
  auto late = [&] {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  late();
  c->all_reduce(x.data(), 100, ReduceOp::kSum);
  late();
  c->ireduce_scatter(blocks.data(), one.data(), 100)->wait();
  const CollectiveCounters& k = c->counters();
  EXPECT_EQ(k.all_reduce.calls, 1);
  EXPECT_EQ(k.all_reduce.bytes, 400);
  EXPECT_EQ(k.reduce_scatter.calls, 1);
  EXPECT_EQ(k.reduce_scatter.bytes, 400L * p);
  if (r == 0) {
    EXPECT_GE(k.all_reduce.seconds, 0.04);
    EXPECT_GE(k.reduce_scatter.seconds, 0.04);
  }
  EXPECT_LT(k.all_reduce.seconds, 5.0);
  EXPECT_EQ(k.all_gather.seconds, 0.0);
}

// Each rank's compute ops of one step as the executor records them, with CPU times F, B, W
// per chunk (the last stage's forward `last_forward` when given) and no wall-clock meaning.
std::vector<pipeline_parallel::TraceEvent> step_of(const pipeline_parallel::ScheduleConfig& c,
                                                   int stage, double f, double b, double w,
                                                   double last_forward = 0) {
  namespace pp = pipeline_parallel;
  std::vector<pp::TraceEvent> events;
  for (const pp::PipelineOp& op : pp::build_schedule(c, stage)) {
    const bool last = stage == c.stages - 1 && op.chunk == c.chunks - 1;
    if (op.type == pp::OpType::kForward)
      events.push_back(
          {"F", "forward", stage, 0, 0, last && last_forward ? last_forward : f, op.chunk});
    if (op.type == pp::OpType::kBackward)
      events.push_back({"B", "backward", stage, 0, 0, b, op.chunk});
    if (op.type == pp::OpType::kWeight) events.push_back({"W", "weight", stage, 0, 0, w, op.chunk});
  }
  return events;
}

TEST(ReplayedBubble, GathersEveryStagesOpTimesAndMatchesTheAnalyticBubble) {
  namespace pp = pipeline_parallel;
  auto world = make(false);
  const int p = world->size(), me = world->rank();
  for (int m : {3, 6}) {
    pp::ScheduleConfig one{pp::ScheduleKind::kOneFOneB, p, 1, m};
    auto got = pp::replayed_bubble(step_of(one, me, 1000, 2000, 0), one, *world);
    for (double b : got.per_stage) EXPECT_NEAR(b, (p - 1.0) / m, 1e-9) << "1f1b m=" << m;
    pp::ScheduleConfig inter{pp::ScheduleKind::kInterleaved, p, 2, m};
    got = pp::replayed_bubble(step_of(inter, me, 500, 1000, 0), inter, *world);
    for (double b : got.per_stage) EXPECT_NEAR(b, (p - 1.0) / (2 * m), 1e-9) << "interleaved";
    pp::ScheduleConfig zb{pp::ScheduleKind::kZeroBubbleH1, p, 1, m};
    got = pp::replayed_bubble(step_of(zb, me, 1000, 1000, 1000), zb, *world);
    for (double b : got.per_stage) EXPECT_NEAR(b, (p - 1.0) / (3 * m), 1e-9) << "zb-h1";
  }
  // The output layer makes the last stage the busiest: its idle is the pipeline's bubble.
  pp::ScheduleConfig one{pp::ScheduleKind::kOneFOneB, p, 1, 6};
  auto got = pp::replayed_bubble(step_of(one, me, 1000, 2000, 0, 1500), one, *world);
  EXPECT_EQ(got.busiest, p - 1);
  EXPECT_LT(got.pipeline(), got.per_stage[0]);
}

INSTANTIATE_TEST_SUITE_P(WatchedOrNot, Collectives, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "watched" : "plain"; });

}  // namespace
}  // namespace trident::comm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  trident::comm::MpiRuntime mpi(&argc, &argv);
  if (mpi.world_size() != 3) {
    std::fprintf(stderr, "test_communicator: run it on 3 ranks\n");
    return 2;
  }
  trident::comm::Fixture fixture{mpi.node_names()};
  trident::comm::g_fixture = &fixture;
  // Only rank 0 prints; every rank's result decides mpirun's exit status.
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
