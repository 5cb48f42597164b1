#pragma once
namespace trident::kernels {

// out[i] = table[ids[i] - vocab_start] for ids inside this shard [vocab_start,
// vocab_start + vocab_rows), zeros otherwise (the vocabulary-parallel lookup).
void embedding_forward(const int* ids, int n, const float* table, int vocab_start, int vocab_rows,
                       int cols, float* out);
// dtable[ids[i] - vocab_start] += dout[i] for ids in the shard. Threads own column
// ranges, so there are no races and the summation order is fixed.
void embedding_backward(const int* ids, int n, const float* dout, int vocab_start, int vocab_rows,
                        int cols, float* dtable);

// out[b, t] += pos[t], or pos[positions[b * seq + t]] when positions are given (packed
// documents whose positions restart).
void add_position_embedding(float* out, const float* pos, int batch, int seq, int cols,
                            const int* positions = nullptr);
// The same for rows [first_row, first_row + rows) of the [batch * seq] rows only (a
// sequence-parallel rank's block): out[r] += pos[(first_row + r) % seq] (or its position).
void add_position_embedding_rows(float* out, const float* pos, long first_row, long rows, int seq,
                                 int cols, const int* positions = nullptr);
// dpos[t] += sum_b dout[b, t] (dpos[positions[r]] += dout[r] with positions; threads then
// own column ranges, and rows are added in order).
void position_embedding_backward(const float* dout, float* dpos, int batch, int seq, int cols,
                                 const int* positions = nullptr);

}  // namespace trident::kernels
