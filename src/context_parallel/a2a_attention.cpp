#include "context_parallel/a2a_attention.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace trident::context_parallel {

namespace {

// One tensor the all-to-all moves: element (b, t, h, i < width) at
// data + b * batch_stride + t * token_stride + h * head_stride + i, and `heads` heads of it
// per cp rank (rank r's heads are [r heads, (r + 1) heads) of the sequence-split tensor).
struct HeadField {
  float* data;
  long batch_stride, token_stride, head_stride;
  int width, heads;
  float* at(int b, long t, int h) const {
    return data + b * batch_stride + t * token_stride + (long)h * head_stride;
  }
};

// The sizes of the exchange: batch, this rank's tokens (seq), the whole sequence's (full).
struct A2aShape {
  int batch, seq, full;
  const ContextParallel& cp;
  // Floats of one rank's block: every field's heads of its tokens.
  long block(const std::vector<HeadField>& fields) const {
    long n = 0;
    for (const HeadField& f : fields) n += (long)batch * seq * f.heads * f.width;
    return n;
  }
};

// Walks rank p's share of an exchange: for each field, sample, local token t of the
// sequence-split side (global position g on the head-split side) and head h of the
// field's per-rank heads, calls visit(field index, b, t, g, h, packed offset).
template <typename Visit>
void for_block(const A2aShape& a, const std::vector<HeadField>& fields, int p, Visit visit) {
  long at = 0;
  for (size_t f = 0; f < fields.size(); ++f)
    for (int b = 0; b < a.batch; ++b)
      for (int t = 0; t < a.seq; ++t) {
        const int g = global_position(t, a.full, p, a.cp.size);
        for (int h = 0; h < fields[f].heads; ++h, at += fields[f].width) visit(f, b, t, g, h, at);
      }
}

// Sequence split (local: tokens of this rank, every head) to head split (full: every token,
// this rank's heads), or back (to_heads false). local and full list the same fields.
void exchange_heads(const A2aShape& a, const std::vector<HeadField>& local,
                    const std::vector<HeadField>& full, bool to_heads) {
  const int c = a.cp.size, me = a.cp.rank;
  const long block = a.block(local);
  std::vector<float> send(block * c), recv(block * c);
  for (int p = 0; p < c; ++p) {  // pack rank p's block
    float* out = send.data() + p * block;
    for_block(a, local, to_heads ? me : p, [&](size_t f, int b, int t, int g, int h, long at) {
      const float* src = to_heads ? local[f].at(b, t, p * local[f].heads + h) : full[f].at(b, g, h);
      std::copy_n(src, local[f].width, out + at);
    });
  }
  const std::vector<long> counts(c, block);
  a.cp.group->all_to_all_v(send.data(), counts, recv.data(), counts);
  for (int p = 0; p < c; ++p) {  // unpack rank p's block
    const float* in = recv.data() + p * block;
    for_block(a, local, to_heads ? p : me, [&](size_t f, int b, int t, int g, int h, long at) {
      float* dst = to_heads ? full[f].at(b, g, h) : local[f].at(b, t, p * local[f].heads + h);
      std::copy_n(in + at, local[f].width, dst);
    });
  }
}

// Every rank's [batch, seq] integers (positions, document starts) in global order, [batch,
// full]. They travel as floats: exact below 2^24, far above any sequence here.
std::vector<int> gather_positions(const int* mine, const A2aShape& a) {
  const long n = (long)a.batch * a.seq;
  std::vector<float> send(mine, mine + n), all(n * a.cp.size);
  a.cp.group->all_gather(send.data(), all.data(), n);
  std::vector<int> full((long)a.batch * a.full);
  for (int p = 0; p < a.cp.size; ++p)
    for (int b = 0; b < a.batch; ++b)
      for (int t = 0; t < a.seq; ++t)
        full[(long)b * a.full + global_position(t, a.full, p, a.cp.size)] =
            (int)all[p * n + (long)b * a.seq + t];
  return full;
}

// The head-split problem: the whole sequence's q | k | v rows of this rank's heads, and its
// shape, layout, positions and document starts.
struct HeadSplit {
  int heads, kv_heads;  // per rank
  long width;           // floats of a row of qkv: (heads + 2 kv_heads) * head_dim
  std::vector<float> qkv;
  std::vector<int> positions, doc_start;
  kernels::AttentionShape shape;
  kernels::QkvLayout layout;
};

HeadSplit head_split(const kernels::QkvLayout& l, const kernels::AttentionShape& s,
                     const A2aShape& a) {
  HeadSplit x;
  const int c = a.cp.size, hd = s.head_dim;
  x.heads = s.heads / c, x.kv_heads = kernels::kv_heads_read(l, s.heads) / c;
  x.width = (long)(x.heads + 2 * x.kv_heads) * hd;
  x.qkv.resize((size_t)a.batch * a.full * x.width);
  if (s.positions) x.positions = gather_positions(s.positions, a);
  if (s.doc_start) x.doc_start = gather_positions(s.doc_start, a);
  x.shape = {s.batch,
             a.full,
             x.heads,
             hd,
             s.window,
             s.doc_start ? x.doc_start.data() : nullptr,
             s.positions ? x.positions.data() : nullptr};
  x.layout = {
      x.width,        x.width, (long)x.heads * hd, (long)(x.heads + x.kv_heads) * hd, x.kv_heads,
      l.heads_per_kv, 0};
  return x;
}

// The q, k and v fields of a sequence-split tensor laid out as l (qkv or its gradient), and
// of the head-split rows.
std::vector<HeadField> qkv_fields(const float* qkv, const kernels::QkvLayout& l,
                                  const kernels::AttentionShape& s, const HeadSplit& x) {
  float* base = const_cast<float*>(qkv);  // read only when packing (to_heads)
  const int hd = s.head_dim;
  const long first = (long)l.first_kv * hd;
  return {{base, (long)s.seq * l.q_stride, l.q_stride, hd, hd, x.heads},
          {base + l.k_offset + first, (long)s.seq * l.kv_stride, l.kv_stride, hd, hd, x.kv_heads},
          {base + l.v_offset + first, (long)s.seq * l.kv_stride, l.kv_stride, hd, hd, x.kv_heads}};
}

std::vector<HeadField> split_qkv_fields(float* rows, const HeadSplit& x, int full) {
  const int hd = x.shape.head_dim;
  const long batch = (long)full * x.width;
  return {{rows, batch, x.width, hd, hd, x.heads},
          {rows + x.layout.k_offset, batch, x.width, hd, hd, x.kv_heads},
          {rows + x.layout.v_offset, batch, x.width, hd, hd, x.kv_heads}};
}

// An output-like tensor [batch, seq, heads, hd] and an lse-like one [batch, heads, seq].
HeadField rows_field(const float* data, int seq, int heads, int hd, int per_rank) {
  return {const_cast<float*>(data), (long)seq * heads * hd, (long)heads * hd, hd, hd, per_rank};
}
HeadField lse_field(const float* data, int seq, int heads, int per_rank) {
  return {const_cast<float*>(data), (long)heads * seq, 1, seq, 1, per_rank};
}

kernels::AttentionDropout rank_dropout(kernels::AttentionDropout d, const HeadSplit& x, int rank) {
  d.head_offset += rank * x.heads;  // this rank's first head among the sequence's
  return d;
}

}  // namespace

void check_a2a_heads(int heads, int kv_heads, int heads_per_kv, int cp_size) {
  if (heads % cp_size != 0 || kv_heads % cp_size != 0 || (heads / cp_size) % heads_per_kv != 0)
    throw std::invalid_argument(
        "--cp-comm-type a2a: the attention heads (" + std::to_string(heads) +
        ") and key/value heads (" + std::to_string(kv_heads) +
        ") must both be divisible by --context-parallel-size (" + std::to_string(cp_size) + ")");
}

void a2a_attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out,
                           float* lse, const kernels::AttentionShape& local,
                           const kernels::AttentionDropout& dropout, kernels::Precision precision,
                           const kernels::RopeTable* rope, const ContextParallel& cp) {
  const int hd = local.head_dim, H = local.heads;
  check_a2a_heads(H, kernels::kv_heads_read(layout, H), layout.heads_per_kv, cp.size);
  const A2aShape a{local.batch, local.seq, local.seq * cp.size, cp};
  HeadSplit x = head_split(layout, local, a);
  exchange_heads(a, qkv_fields(qkv, layout, local, x), split_qkv_fields(x.qkv.data(), x, a.full),
                 true);
  std::vector<float> o((size_t)a.batch * a.full * x.heads * hd),
      l((size_t)a.batch * x.heads * a.full);
  kernels::flash_attention_forward(x.qkv.data(), x.layout, o.data(), l.data(), x.shape,
                                   rank_dropout(dropout, x, cp.rank), precision, rope);
  exchange_heads(a, {rows_field(out, a.seq, H, hd, x.heads), lse_field(lse, a.seq, H, x.heads)},
                 {rows_field(o.data(), a.full, x.heads, hd, x.heads),
                  lse_field(l.data(), a.full, x.heads, x.heads)},
                 false);
}

void a2a_attention_backward(const float* qkv, const kernels::QkvLayout& layout, const float* out,
                            const float* dout, const float* lse, float* dqkv,
                            const kernels::AttentionShape& local,
                            const kernels::AttentionDropout& dropout, kernels::Precision precision,
                            const kernels::RopeTable* rope, const ContextParallel& cp) {
  const int hd = local.head_dim, H = local.heads;
  check_a2a_heads(H, kernels::kv_heads_read(layout, H), layout.heads_per_kv, cp.size);
  const A2aShape a{local.batch, local.seq, local.seq * cp.size, cp};
  HeadSplit x = head_split(layout, local, a);
  const size_t rows = (size_t)a.batch * a.full * x.heads * hd;
  std::vector<float> o(rows), d(rows), l((size_t)a.batch * x.heads * a.full);
  std::vector<HeadField> mine = qkv_fields(qkv, layout, local, x),
                         split = split_qkv_fields(x.qkv.data(), x, a.full);
  mine.push_back(rows_field(out, a.seq, H, hd, x.heads));
  mine.push_back(rows_field(dout, a.seq, H, hd, x.heads));
  mine.push_back(lse_field(lse, a.seq, H, x.heads));
  split.push_back(rows_field(o.data(), a.full, x.heads, hd, x.heads));
  split.push_back(rows_field(d.data(), a.full, x.heads, hd, x.heads));
  split.push_back(lse_field(l.data(), a.full, x.heads, x.heads));
  exchange_heads(a, mine, split, true);
  std::vector<float> grad(x.qkv.size());
  kernels::flash_attention_backward(x.qkv.data(), x.layout, o.data(), d.data(), l.data(),
                                    grad.data(), x.shape, rank_dropout(dropout, x, cp.rank),
                                    precision, rope);
  exchange_heads(a, qkv_fields(dqkv, layout, local, x), split_qkv_fields(grad.data(), x, a.full),
                 false);
  kernels::zero_unread_kv_grads(dqkv, layout, H, (long)a.batch * a.seq, hd);
}

}  // namespace trident::context_parallel
