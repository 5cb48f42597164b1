#include "context_parallel/ring_attention.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "context_parallel/buffers.h"

namespace trident::context_parallel {

namespace {

// Point-to-point tags on the cp group: a key/value block, and a block's d k and d v.
constexpr int kRingKvTag = 3701, kRingGradTag = 3702;

void check_ring(const kernels::AttentionShape& local, const ContextParallel& cp) {
  if (!cp.group || cp.group->size() != cp.size || cp.group->rank() != cp.rank)
    throw std::invalid_argument("ring attention: the cp group must have size " +
                                std::to_string(cp.size) + " and this rank " +
                                std::to_string(cp.rank));
  if (local.seq % 2 != 0)
    throw std::invalid_argument("ring attention: the local sequence (" + std::to_string(local.seq) +
                                " tokens) must hold two equal chunks (sequence divisible by 2c)");
  if (!local.positions)
    throw std::invalid_argument("ring attention: local.positions must be given at cp > 1");
}

// The rows of cp rank `rank` as two runs of consecutive global positions: chunk rank, then
// chunk 2c - 1 - rank.
std::vector<kernels::PositionRun> chunk_runs(int rank, int size, int local_seq) {
  const int chunk = local_seq / 2, seq = local_seq * size;
  return {{0, chunk, global_position(0, seq, rank, size)},
          {chunk, chunk, global_position(chunk, seq, rank, size)}};
}

// What every step shares: the sizes of the head-major buffers and the block of each owner.
struct Ring {
  const kernels::AttentionShape& local;
  const ContextParallel& cp;
  int heads_per_kv, n_kv;
  // The sizes of every buffer below (context_parallel/buffers.h, which the memory plan sizes
  // its row with): q_elems floats of q (and out), kv_elems of k (and of v), head-major.
  RingBuffers sizes;
  long q_elems, kv_elems;
  Ring(const kernels::AttentionShape& s, const kernels::QkvLayout& l, const ContextParallel& c)
      : local(s),
        cp(c),
        heads_per_kv(l.heads_per_kv),
        n_kv(kernels::kv_heads_read(l, s.heads)),
        sizes(ring_buffers({s.batch, s.seq, s.heads, n_kv, s.head_dim, c.size})),
        q_elems(sizes.q),
        kv_elems(sizes.kv) {}
  int next() const { return (cp.rank + 1) % cp.size; }
  int prev() const { return (cp.rank + cp.size - 1) % cp.size; }
  int owner(int step) const { return (cp.rank - step + cp.size) % cp.size; }
  // This rank's queries against the key / value block of cp rank `owner`.
  kernels::AttentionBlock block(int owner) const {
    const kernels::AttentionShape& s = local;
    return {s.batch,
            s.heads,
            heads_per_kv,
            s.head_dim,
            s.seq,
            s.seq,
            chunk_runs(cp.rank, cp.size, s.seq),
            chunk_runs(owner, cp.size, s.seq),
            s.seq * cp.size,
            s.window,
            s.doc_start};
  }
};

// This rank's key / value heads, head-major, k then v in one buffer (one message a step).
// Keys are rotated here by their owner's positions before they travel: the receivers need no
// positions of other ranks, and the owner, which has them, rotates d k back (RoPE's backward)
// when the block's gradient comes home.
std::vector<float> pack_kv(const float* qkv, const kernels::QkvLayout& l,
                           const kernels::AttentionShape& s, const Ring& ring,
                           const kernels::RopeTable* rope) {
  std::vector<float> kv(ring.sizes.block());
  const long first = (long)l.first_kv * s.head_dim;
  kernels::gather_heads(qkv + l.k_offset + first, l.kv_stride, s.batch, s.seq, ring.n_kv,
                        s.head_dim, kv.data(), rope, s.positions);
  kernels::gather_heads(qkv + l.v_offset + first, l.kv_stride, s.batch, s.seq, ring.n_kv,
                        s.head_dim, kv.data() + ring.kv_elems, nullptr, nullptr);
  return kv;
}

// A send to the next rank and a receive from the previous one, both in flight.
struct Exchange {
  std::unique_ptr<comm::Request> send, recv;
  void post(const Ring& ring, const float* out, float* in, long count, int tag) {
    if (ring.cp.size == 1) {  // the ring of one: the block is home
      std::copy_n(out, count, in);
      return;
    }
    send = ring.cp.group->isend(out, count, ring.next(), tag);
    recv = ring.cp.group->irecv(in, count, ring.prev(), tag);
  }
  void wait() {
    if (send) send->wait();
    if (recv) recv->wait();
    send.reset(), recv.reset();
  }
};

// The ring's own account of its overlap, added to the cp group's counters at the end of a
// call (comm::CollectiveCounters::Overlap): a step's attention compute while a transfer is
// in flight, the wait after it, and the waits with nothing to hide behind.
class RingClock {
 public:
  using Clock = std::chrono::steady_clock;
  static Clock::time_point now() { return Clock::now(); }
  static double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }
  // One step's compute (from `begin` to `computed`) and its waits for `bytes` sent.
  void step(Clock::time_point begin, Clock::time_point computed, double waited, long floats) {
    if (floats == 0) return;  // nothing in flight: the last forward step
    overlap_.compute_seconds += std::chrono::duration<double>(computed - begin).count();
    overlap_.waited_seconds += waited;
    overlap_.overlapped_bytes += floats * (long)sizeof(float);
  }
  void alone(double waited, long floats) {
    overlap_.alone_seconds += waited;
    overlap_.alone_bytes += floats * (long)sizeof(float);
  }
  void report(const ContextParallel& cp) const {
    if (cp.size > 1) cp.group->add_overlap(overlap_);
  }

 private:
  comm::CollectiveCounters::Overlap overlap_;
};

}  // namespace

void ring_attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out,
                            float* lse, const kernels::AttentionShape& local,
                            const kernels::AttentionDropout& dropout, kernels::Precision precision,
                            const kernels::RopeTable* rope, const ContextParallel& cp) {
  check_ring(local, cp);
  const Ring ring(local, layout, cp);
  const int hd = local.head_dim;
  const long rows = ring.sizes.rows;
  std::vector<float> q(ring.q_elems), o(ring.q_elems), part_o(ring.q_elems), part_lse(rows);
  kernels::gather_heads(qkv, layout.q_stride, local.batch, local.seq, local.heads, hd, q.data(),
                        rope, local.positions);
  std::vector<float> kv = pack_kv(qkv, layout, local, ring, rope), next_kv(kv.size());
  Exchange exchange;
  RingClock clock;
  for (int step = 0; step < cp.size; ++step) {
    const long in_flight = step + 1 < cp.size ? (long)kv.size() : 0;
    if (in_flight) exchange.post(ring, kv.data(), next_kv.data(), in_flight, kRingKvTag);
    const auto begin = RingClock::now();
    const kernels::AttentionBlock block = ring.block(ring.owner(step));
    const float *k = kv.data(), *v = k + ring.kv_elems;
    if (step == 0) {  // the first block's result is the running one (lse: [batch, heads, seq])
      kernels::attention_block_forward(q.data(), k, v, o.data(), lse, block, dropout, precision);
    } else {
      kernels::attention_block_forward(q.data(), k, v, part_o.data(), part_lse.data(), block,
                                       dropout, precision);
      kernels::attention_merge(o.data(), lse, part_o.data(), part_lse.data(), rows, hd);
    }
    const auto computed = RingClock::now();
    exchange.wait();
    clock.step(begin, computed, RingClock::since(computed), in_flight);
    std::swap(kv, next_kv);
  }
  clock.report(cp);
  kernels::scatter_heads(o.data(), local.batch, local.seq, local.heads, hd, out,
                         (long)local.heads * hd, nullptr, nullptr);
}

namespace {

// The backward's head-major operands of this rank's queries.
struct QueryGrads {
  std::vector<float> q, o, dout, delta, dq;
};

QueryGrads query_operands(const float* qkv, const kernels::QkvLayout& l, const float* out,
                          const float* dout, const kernels::AttentionShape& s, const Ring& ring,
                          const kernels::RopeTable* rope) {
  const int hd = s.head_dim;
  const long stride = (long)s.heads * hd, rows = ring.sizes.rows;
  QueryGrads x{std::vector<float>(ring.q_elems), std::vector<float>(ring.q_elems),
               std::vector<float>(ring.q_elems), std::vector<float>(rows),
               std::vector<float>(ring.q_elems, 0.f)};
  kernels::gather_heads(qkv, l.q_stride, s.batch, s.seq, s.heads, hd, x.q.data(), rope,
                        s.positions);
  kernels::gather_heads(out, stride, s.batch, s.seq, s.heads, hd, x.o.data(), nullptr, nullptr);
  kernels::gather_heads(dout, stride, s.batch, s.seq, s.heads, hd, x.dout.data(), nullptr, nullptr);
  kernels::attention_row_delta(x.o.data(), x.dout.data(), rows, hd, x.delta.data());
  return x;
}

// dq, and this rank's own block's d k and d v (head-major, k then v), into dqkv's layout.
void store_grads(const std::vector<float>& dq, const std::vector<float>& dkv,
                 const kernels::QkvLayout& l, const kernels::AttentionShape& s, const Ring& ring,
                 const kernels::RopeTable* rope, float* dqkv) {
  const int hd = s.head_dim;
  const long first = (long)l.first_kv * hd;
  kernels::scatter_heads(dq.data(), s.batch, s.seq, s.heads, hd, dqkv, l.q_stride, rope,
                         s.positions);
  kernels::scatter_heads(dkv.data(), s.batch, s.seq, ring.n_kv, hd, dqkv + l.k_offset + first,
                         l.kv_stride, rope, s.positions);
  kernels::scatter_heads(dkv.data() + ring.kv_elems, s.batch, s.seq, ring.n_kv, hd,
                         dqkv + l.v_offset + first, l.kv_stride, nullptr, nullptr);
  kernels::zero_unread_kv_grads(dqkv, l, s.heads, (long)s.batch * s.seq, hd);
}

}  // namespace

void ring_attention_backward(const float* qkv, const kernels::QkvLayout& layout, const float* out,
                             const float* dout, const float* lse, float* dqkv,
                             const kernels::AttentionShape& local,
                             const kernels::AttentionDropout& dropout, kernels::Precision precision,
                             const kernels::RopeTable* rope, const ContextParallel& cp) {
  check_ring(local, cp);
  const Ring ring(local, layout, cp);
  QueryGrads x = query_operands(qkv, layout, out, dout, local, ring, rope);
  std::vector<float> kv = pack_kv(qkv, layout, local, ring, rope), next_kv(kv.size());
  // The step's share of the held block's d k, d v (part), the running sum received from the
  // previous rank (grad_in) and the sum passed on (grad_out).
  std::vector<float> part(kv.size()), grad_in(kv.size()), grad_out(kv.size());
  Exchange kv_exchange, grad_exchange;
  RingClock clock;
  for (int step = 0; step < cp.size; ++step) {
    const long kv_in_flight = step + 1 < cp.size ? (long)kv.size() : 0;
    const long grad_in_flight = step > 0 ? (long)part.size() : 0;  // posted by the last step
    if (kv_in_flight) kv_exchange.post(ring, kv.data(), next_kv.data(), kv_in_flight, kRingKvTag);
    const auto begin = RingClock::now();
    std::fill(part.begin(), part.end(), 0.f);
    const float *k = kv.data(), *v = k + ring.kv_elems;
    kernels::attention_block_backward(x.q.data(), k, v, x.dout.data(), lse, x.delta.data(),
                                      x.dq.data(), part.data(), part.data() + ring.kv_elems,
                                      ring.block(ring.owner(step)), dropout, precision);
    const auto computed = RingClock::now();
    // The block's sum so far arrived from the previous rank while this step computed.
    grad_exchange.wait();
    double waited = RingClock::since(computed);
    if (step == 0) {
      std::swap(grad_out, part);
    } else {
      for (size_t i = 0; i < part.size(); ++i) grad_in[i] += part[i];
      std::swap(grad_out, grad_in);
    }
    // At the last step this sends the next rank its own block's finished gradient.
    grad_exchange.post(ring, grad_out.data(), grad_in.data(), (long)grad_out.size(), kRingGradTag);
    const auto kv_wait = RingClock::now();
    kv_exchange.wait();
    waited += RingClock::since(kv_wait);
    clock.step(begin, computed, waited, kv_in_flight + grad_in_flight);
    std::swap(kv, next_kv);
  }
  // The last gradient's transfer has no work left to hide behind: a transfer alone.
  const auto last = RingClock::now();
  grad_exchange.wait();
  clock.alone(RingClock::since(last), (long)grad_in.size());
  clock.report(cp);
  store_grads(x.dq, grad_in, layout, local, ring, rope, dqkv);
}

}  // namespace trident::context_parallel
