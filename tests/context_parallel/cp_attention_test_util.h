#pragma once
// Context-parallel attention against the one-process kernel: a problem on the whole sequence
// (grouped q | k | v rows, packed documents, RoPE positions, dropout), each cp rank's rows
// cut from it by the load-balanced split, the ranks run as threads, and every rank's out,
// lse and dqkv compared with the one-process kernel's rows at the same global positions.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "context_parallel/context_parallel.h"
#include "kernels/attention.h"
#include "kernels/rope.h"
#include "tensor_parallel/thread_group.h"
#include "test_util.h"

namespace trident::cp_test {

struct Case {
  int c, batch, seq, heads, kv_heads, head_dim;
  int window = 0;
  bool documents = false;        // packed documents (--reset-attention-mask)
  bool reset_positions = false;  // RoPE positions restart per document (--reset-position-ids)
  bool rope = false;
  float dropout = 0.f;
  kernels::Precision precision = kernels::Precision::kFp32;
};

// One attention path's forward and backward, as the cp dispatch calls them.
struct Path {
  std::function<void(const float*, const kernels::QkvLayout&, float*, float*,
                     const kernels::AttentionShape&, const kernels::AttentionDropout&,
                     kernels::Precision, const kernels::RopeTable*,
                     const context_parallel::ContextParallel&)>
      forward;
  std::function<void(const float*, const kernels::QkvLayout&, const float*, const float*,
                     const float*, float*, const kernels::AttentionShape&,
                     const kernels::AttentionDropout&, kernels::Precision,
                     const kernels::RopeTable*, const context_parallel::ContextParallel&)>
      backward;
  context_parallel::CpCommType type;
};

// The rows of one problem: [batch, seq] tokens, q | k | v of each (fused grouped layout).
struct Problem {
  Case k;
  long width;  // floats of a qkv row
  kernels::QkvLayout layout;
  std::vector<float> qkv, dout;
  std::vector<int> doc_start, positions;  // [batch, seq]
};

inline kernels::QkvLayout fused_layout(const Case& k) {
  const long q = (long)k.heads * k.head_dim, kv = (long)k.kv_heads * k.head_dim;
  return {q + 2 * kv, q + 2 * kv, q, q + kv, k.kv_heads, k.heads / k.kv_heads, 0};
}

// Documents of uneven lengths (a new one every 5 to 40 tokens, at other places per sample).
inline Problem make_problem(const Case& k) {
  Problem p{k, 0, fused_layout(k), {}, {}, {}, {}};
  p.width = p.layout.q_stride;
  p.qkv = testing::random_vector((long)k.batch * k.seq * p.width, 101);
  p.dout = testing::random_vector((long)k.batch * k.seq * k.heads * k.head_dim, 102);
  p.doc_start.resize((size_t)k.batch * k.seq);
  p.positions.resize(p.doc_start.size());
  for (int b = 0; b < k.batch; ++b) {
    int start = 0, next = 5 + 13 * b;
    for (int t = 0; t < k.seq; ++t) {
      if (k.documents && t == next) start = t, next = t + 5 + (t * 7 + 11 * b) % 36;
      p.doc_start[(size_t)b * k.seq + t] = start;
      p.positions[(size_t)b * k.seq + t] = k.reset_positions ? t - start : t;
    }
  }
  return p;
}

inline kernels::AttentionDropout dropout_of(const Case& k) {
  return {k.dropout, 77, 5, k.dropout > 0.f ? 3 : -1, 0};
}

inline std::unique_ptr<kernels::RopeTable> rope_of(const Case& k) {
  if (!k.rope) return nullptr;
  return std::make_unique<kernels::RopeTable>(
      kernels::RopeConfig{k.head_dim, k.head_dim / 2 * 2, 10000.f}, k.seq);
}

// out [batch, seq, heads, hd], lse [batch, heads, seq], dqkv laid out as qkv.
struct Result {
  std::vector<float> out, lse, dqkv;
};

// The one-process kernel on the whole sequence.
inline Result one_process(const Problem& p) {
  const Case& k = p.k;
  const kernels::AttentionShape s{k.batch,           k.seq,
                                  k.heads,           k.head_dim,
                                  k.window,          k.documents ? p.doc_start.data() : nullptr,
                                  p.positions.data()};
  auto rope = rope_of(k);
  Result r{std::vector<float>(p.dout.size()), std::vector<float>((size_t)k.batch * k.heads * k.seq),
           std::vector<float>(p.qkv.size())};
  kernels::flash_attention_forward(p.qkv.data(), p.layout, r.out.data(), r.lse.data(), s,
                                   dropout_of(k), k.precision, rope.get());
  kernels::flash_attention_backward(p.qkv.data(), p.layout, r.out.data(), p.dout.data(),
                                    r.lse.data(), r.dqkv.data(), s, dropout_of(k), k.precision,
                                    rope.get());
  return r;
}

// Global position of local token t of cp rank `rank`.
inline int global_of(const Case& k, int t, int rank) {
  return context_parallel::global_position(t, k.seq, rank, k.c);
}

// Rows of a [batch, seq, width] tensor that cp rank `rank` holds, [batch, seq / c, width].
template <typename T>
std::vector<T> local_rows(const std::vector<T>& x, const Case& k, long width, int rank) {
  const int local = k.seq / k.c;
  std::vector<T> y((size_t)k.batch * local * width);
  for (int b = 0; b < k.batch; ++b)
    for (int t = 0; t < local; ++t)
      std::copy_n(x.data() + ((long)b * k.seq + global_of(k, t, rank)) * width, width,
                  y.data() + ((long)b * local + t) * width);
  return y;
}

// The largest |local - global| over rank `rank`'s rows of a [batch, seq, width] tensor
// (transposed: [batch, width, seq], as lse), relative to the largest |global| (at least 1).
inline double row_error(const std::vector<float>& mine, const std::vector<float>& all,
                        const Case& k, long width, int rank, bool transposed = false) {
  const int local = k.seq / k.c;
  double worst = 0, scale = 1;
  for (float x : all) scale = std::max(scale, (double)std::abs(x));
  for (int b = 0; b < k.batch; ++b)
    for (int t = 0; t < local; ++t)
      for (long i = 0; i < width; ++i) {
        const long g = global_of(k, t, rank);
        const float a = transposed ? mine[((long)b * width + i) * local + t]
                                   : mine[((long)b * local + t) * width + i];
        const float e = transposed ? all[((long)b * width + i) * k.seq + g]
                                   : all[((long)b * k.seq + g) * width + i];
        worst = std::max(worst, (double)std::abs(a - e));
      }
  return worst / scale;
}

struct Errors {
  double out = 0, lse = 0, dqkv = 0;
  long sent_floats = 0;  // by rank 0 in the forward
};

// Every cp rank runs `path` on its rows (a thread each); the worst errors over the ranks.
inline Errors run_cp(const Problem& p, const Path& path) {
  const Case& k = p.k;
  const Result want = one_process(p);
  const int local = k.seq / k.c;
  auto rope = rope_of(k);
  Errors worst;
  std::mutex mutex;
  tensor_parallel_test::run_group(k.c, [&](comm::Communicator& group) {
    const int rank = group.rank();
    const context_parallel::ContextParallel cp{k.c, rank, &group, path.type};
    std::vector<float> qkv = local_rows(p.qkv, k, p.width, rank);
    std::vector<float> dout = local_rows(p.dout, k, (long)k.heads * k.head_dim, rank);
    std::vector<int> doc = local_rows(p.doc_start, k, 1, rank);
    std::vector<int> pos = local_rows(p.positions, k, 1, rank);
    const kernels::AttentionShape s{k.batch,    local,    k.heads,
                                    k.head_dim, k.window, k.documents ? doc.data() : nullptr,
                                    pos.data()};
    Result got{std::vector<float>(dout.size()),
               std::vector<float>((size_t)k.batch * k.heads * local),
               std::vector<float>(qkv.size(), 1e9f)};  // every element must be written
    path.forward(qkv.data(), p.layout, got.out.data(), got.lse.data(), s, dropout_of(k),
                 k.precision, rope.get(), cp);
    const long sent = group.counters().send.bytes / (long)sizeof(float) +
                      group.counters().all_to_all.bytes / (long)sizeof(float);
    path.backward(qkv.data(), p.layout, got.out.data(), dout.data(), got.lse.data(),
                  got.dqkv.data(), s, dropout_of(k), k.precision, rope.get(), cp);
    const long hd = (long)k.heads * k.head_dim;
    const Errors e{row_error(got.out, want.out, k, hd, rank),
                   row_error(got.lse, want.lse, k, k.heads, rank, true),
                   row_error(got.dqkv, want.dqkv, k, p.width, rank), sent};
    std::lock_guard<std::mutex> lock(mutex);
    worst.out = std::max(worst.out, e.out);
    worst.lse = std::max(worst.lse, e.lse);
    worst.dqkv = std::max(worst.dqkv, e.dqkv);
    if (rank == 0) worst.sent_floats = sent;
  });
  std::printf(
      "  c %d seq %d heads %d/%d window %d docs %d rope %d dropout %.1f %s: out %.1e "
      "lse %.1e dqkv %.1e\n",
      k.c, k.seq, k.heads, k.kv_heads, k.window, k.documents, k.rope, k.dropout,
      kernels::precision_name(k.precision), worst.out, worst.lse, worst.dqkv);
  return worst;
}

// fp32: float rounding of sums taken in another order; bf16: the probabilities are
// rounded to bf16 relative to another running maximum.
inline double tolerance(const Case& k) {
  return k.precision == kernels::Precision::kFp32 ? 1e-5 : 5e-3;
}

}  // namespace trident::cp_test
