// --cp-comm-type allgather (context_parallel/attention.h): gather the whole sequence, run the
// one-process kernel, keep this rank's rows.
#include <algorithm>
#include <vector>

#include "context_parallel/attention.h"

namespace trident::context_parallel {

namespace {

// Rows of `width` floats in `outer` blocks of seq rows each: [outer, seq, width]. Activations
// are [batch, seq, width]; lse is [batch x heads, seq, 1].
struct RowBlocks {
  long outer, local_seq, width;
  long local_floats() const { return outer * local_seq * width; }
};

// All-gathers every cp rank's [outer, local seq, width] and puts the rows in global order:
// rank r's local row t of a block is the block's row global_position(t, seq, r, c).
std::vector<float> gather_rows(const float* local, const RowBlocks& b, const ContextParallel& cp) {
  const int c = cp.size, seq = (int)b.local_seq * c;
  std::vector<float> all((size_t)b.local_floats() * c), global(all.size());
  cp.group->all_gather(local, all.data(), b.local_floats());
  for (int r = 0; r < c; ++r)
    for (long o = 0; o < b.outer; ++o)
      for (int t = 0; t < b.local_seq; ++t) {
        const float* from = all.data() + r * b.local_floats() + (o * b.local_seq + t) * b.width;
        const long g = global_position(t, seq, r, c);
        std::copy_n(from, b.width, global.data() + (o * seq + g) * b.width);
      }
  return global;
}

// This rank's rows of a global [outer, seq, width].
void keep_rows(const float* global, float* local, const RowBlocks& b, const ContextParallel& cp) {
  const int seq = (int)b.local_seq * cp.size;
  for (long o = 0; o < b.outer; ++o)
    for (int t = 0; t < b.local_seq; ++t) {
      const long g = global_position(t, seq, cp.rank, cp.size);
      std::copy_n(global + (o * seq + g) * b.width, b.width,
                  local + (o * b.local_seq + t) * b.width);
    }
}

// Integers per token (positions, document starts) travel as floats, exact below 2^24.
std::vector<int> gather_ints(const int* local, long batch, long local_seq,
                             const ContextParallel& cp) {
  const std::vector<float> as_float(local, local + batch * local_seq);
  const std::vector<float> global = gather_rows(as_float.data(), {batch, local_seq, 1}, cp);
  return std::vector<int>(global.begin(), global.end());
}

// One token's q (heads) and k and v (the layout's kv heads) side by side, packed: the whole
// sequence's q, k and v then travel in one all-gather whatever the local layout.
struct PackedQkv {
  kernels::QkvLayout local;
  int heads, head_dim;
  long q_width() const { return (long)heads * head_dim; }
  long kv_width() const { return (long)local.kv_heads * head_dim; }
  long width() const { return q_width() + 2 * kv_width(); }
  kernels::QkvLayout global() const {
    kernels::QkvLayout g = local;
    g.q_stride = g.kv_stride = width();
    g.k_offset = q_width(), g.v_offset = q_width() + kv_width();
    return g;
  }
  void pack(const float* qkv, long rows, float* out) const {
    for (long r = 0; r < rows; ++r) {
      float* row = out + r * width();
      std::copy_n(qkv + r * local.q_stride, q_width(), row);
      std::copy_n(qkv + local.k_offset + r * local.kv_stride, kv_width(), row + q_width());
      std::copy_n(qkv + local.v_offset + r * local.kv_stride, kv_width(),
                  row + q_width() + kv_width());
    }
  }
  void unpack(const float* packed, long rows, float* qkv) const {
    for (long r = 0; r < rows; ++r) {
      const float* row = packed + r * width();
      std::copy_n(row, q_width(), qkv + r * local.q_stride);
      std::copy_n(row + q_width(), kv_width(), qkv + local.k_offset + r * local.kv_stride);
      std::copy_n(row + q_width() + kv_width(), kv_width(),
                  qkv + local.v_offset + r * local.kv_stride);
    }
  }
};

// The whole sequence's shape, its positions and document starts, and its packed q, k, v.
struct GlobalInputs {
  kernels::AttentionShape shape;
  std::vector<int> positions, doc_start;
  PackedQkv packing;
  std::vector<float> qkv;
};

GlobalInputs gather_inputs(const float* qkv, const kernels::QkvLayout& layout,
                           const kernels::AttentionShape& local, const ContextParallel& cp) {
  GlobalInputs g{local, {}, {}, {layout, local.heads, local.head_dim}, {}};
  const long rows = (long)local.batch * local.seq;
  g.shape.seq = local.seq * cp.size;
  g.positions = gather_ints(local.positions, local.batch, local.seq, cp);
  g.shape.positions = g.positions.data();
  if (local.doc_start) {
    g.doc_start = gather_ints(local.doc_start, local.batch, local.seq, cp);
    g.shape.doc_start = g.doc_start.data();
  }
  std::vector<float> packed((size_t)(rows * g.packing.width()));
  g.packing.pack(qkv, rows, packed.data());
  g.qkv = gather_rows(packed.data(), {local.batch, local.seq, g.packing.width()}, cp);
  return g;
}

RowBlocks out_rows(const kernels::AttentionShape& s) {
  return {s.batch, s.seq, (long)s.heads * s.head_dim};
}

RowBlocks lse_rows(const kernels::AttentionShape& s) {
  return {(long)s.batch * s.heads, s.seq, 1};
}

void check_contract(const kernels::AttentionShape& local, const ContextParallel& cp) {
  if (!cp.group || cp.group->size() != cp.size || !local.positions)
    throw std::logic_error(
        "context-parallel attention needs the cp group and every local token's position");
}

}  // namespace

void allgather_attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out,
                                 float* lse, const kernels::AttentionShape& local,
                                 const kernels::AttentionDropout& dropout,
                                 kernels::Precision precision, const kernels::RopeTable* rope,
                                 const ContextParallel& cp) {
  check_contract(local, cp);
  GlobalInputs g = gather_inputs(qkv, layout, local, cp);
  std::vector<float> global_out((size_t)out_rows(g.shape).local_floats());
  std::vector<float> global_lse((size_t)lse_rows(g.shape).local_floats());
  kernels::flash_attention_forward(g.qkv.data(), g.packing.global(), global_out.data(),
                                   global_lse.data(), g.shape, dropout, precision, rope);
  keep_rows(global_out.data(), out, out_rows(local), cp);
  keep_rows(global_lse.data(), lse, lse_rows(local), cp);
}

void allgather_attention_backward(const float* qkv, const kernels::QkvLayout& layout,
                                  const float* out, const float* dout, const float* lse,
                                  float* dqkv, const kernels::AttentionShape& local,
                                  const kernels::AttentionDropout& dropout,
                                  kernels::Precision precision, const kernels::RopeTable* rope,
                                  const ContextParallel& cp) {
  check_contract(local, cp);
  GlobalInputs g = gather_inputs(qkv, layout, local, cp);
  const std::vector<float> global_out = gather_rows(out, out_rows(local), cp);
  const std::vector<float> global_dout = gather_rows(dout, out_rows(local), cp);
  const std::vector<float> global_lse = gather_rows(lse, lse_rows(local), cp);
  std::vector<float> global_dqkv(g.qkv.size());
  kernels::flash_attention_backward(g.qkv.data(), g.packing.global(), global_out.data(),
                                    global_dout.data(), global_lse.data(), global_dqkv.data(),
                                    g.shape, dropout, precision, rope);
  const RowBlocks packed_rows{local.batch, local.seq, g.packing.width()};
  std::vector<float> mine((size_t)packed_rows.local_floats());
  keep_rows(global_dqkv.data(), mine.data(), packed_rows, cp);
  g.packing.unpack(mine.data(), (long)local.batch * local.seq, dqkv);
}

}  // namespace trident::context_parallel
