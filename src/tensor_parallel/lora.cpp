#include "tensor_parallel/lora.h"

#include <algorithm>
#include <vector>

#include "kernels/gemm.h"

namespace trident::tensor_parallel {

namespace {
using kernels::bf16_t;
using kernels::GemmOperand;
using kernels::Trans;

bool dropping(const LoraCall& call) {
  return kernels::lora_dropout_on(call.dropout);
}

// One call's buffers: the call's scratch, or (none given) vectors of this call's own.
struct Buffers {
  float *u, *du, *x;
  bf16_t* low;
  std::vector<float> own;
  std::vector<bf16_t> own_low;
  Buffers(const LoraScratch& s, int rows, int rank, int in, int out, bool fp32_input, bool bf16_dy)
      : u(s.u), du(s.du), x(s.x), low(s.low) {
    const long small = (long)rows * rank, wide = fp32_input ? 0 : (long)rows * in;
    if (!u || !du || (wide && !x)) {
      own.resize(2 * small + wide);
      u = own.data(), du = u + small, x = du + small;
    }
    if (bf16_dy && !low) {
      own_low.resize(small + (long)out * rank);
      low = own_low.data();
    }
  }
};

// The branch's input in fp32: x itself, or (--lora-dropout in training, or a bf16 x) its
// fp32, dropped copy in b.x.
const float* branch_input(const LoraBranch& l, GemmOperand x, int rows, int in,
                          const LoraCall& call, Buffers& b) {
  if (x.fp32 && !dropping(call)) return x.fp32;
  const float* wide = x.fp32;
  if (!wide) kernels::from_bf16(x.bf16, b.x, (long)rows * in), wide = b.x;
  if (dropping(call)) kernels::dropout_copy(wide, b.x, rows, in, call.dropout, l.dropout);
  return b.x;
}

// u [rows, R] = x [rows, in] A^T
void down_projection(const LoraBranch& l, const float* x, float* u, int rows, int in) {
  kernels::gemm(Trans::kNo, Trans::kYes, rows, l.rank, in, 1.f, x, in, l.a.value, in, 0.f, u,
                l.rank);
}

// bf16(s v) of n floats.
void scaled_bf16(const float* v, float s, bf16_t* out, long n) {
  for (long i = 0; i < n; ++i) out[i] = kernels::bf16_from_float(s * v[i]);
}

// dB [out, R] += s dy^T u, then du [rows, R] = s dy B. A bf16 dy (as the base's products
// take it in bf16 runs) is multiplied by bf16(s u) and bf16(s B).
void up_projection_backward(const LoraBranch& l, GemmOperand dy, const float* u, float* du,
                            int rows, int out, Buffers& b) {
  const int r = l.rank;
  if (dy.fp32) {
    if (l.b.grad)
      kernels::gemm(Trans::kYes, Trans::kNo, out, r, rows, l.scale, dy.fp32, out, u, r, 1.f,
                    l.b.grad, r);
    kernels::gemm(Trans::kNo, Trans::kNo, rows, r, out, l.scale, dy.fp32, out, l.b.value, r, 0.f,
                  du, r);
    return;
  }
  bf16_t *su = b.low, *sb = b.low + (long)rows * r;
  scaled_bf16(u, l.scale, su, (long)rows * r);
  scaled_bf16(l.b.value, l.scale, sb, (long)out * r);
  if (l.b.grad)
    kernels::gemm_bf16(Trans::kYes, Trans::kNo, out, r, rows, dy.bf16, out, su, r, 1.f, l.b.grad,
                       r);
  kernels::gemm_bf16(Trans::kNo, Trans::kNo, rows, r, out, dy.bf16, out, sb, r, 0.f, du, r);
}

// dx [rows, in] += du A, through the input's dropout mask when there is one (b.x, free by
// then, holds du A first).
void input_grad(const LoraBranch& l, const float* du, float* dx, int rows, int in,
                const LoraCall& call, Buffers& b) {
  if (!dropping(call)) {
    kernels::gemm(Trans::kNo, Trans::kNo, rows, in, l.rank, 1.f, du, l.rank, l.a.value, in, 1.f, dx,
                  in);
    return;
  }
  kernels::gemm(Trans::kNo, Trans::kNo, rows, in, l.rank, 1.f, du, l.rank, l.a.value, in, 0.f, b.x,
                in);
  kernels::dropout_accumulate(b.x, dx, rows, in, call.dropout, l.dropout);
}

// dA [R, in] += du^T x (x the branch's input, dropped)
void down_projection_grad(const LoraBranch& l, const float* du, const float* x, int rows, int in) {
  if (!l.a.grad) return;
  kernels::gemm(Trans::kYes, Trans::kNo, l.rank, in, rows, 1.f, du, l.rank, x, in, 1.f, l.a.grad,
                in);
}
}  // namespace

void LoraBranch::forward(GemmOperand x, float* y, int rows, int in, int out,
                         const LoraCall& call) const {
  Buffers b(call.scratch, rows, rank, in, out, x.fp32 && !dropping(call), false);
  down_projection(*this, branch_input(*this, x, rows, in, call, b), b.u, rows, in);
  kernels::gemm(Trans::kNo, Trans::kYes, rows, out, rank, scale, b.u, rank, this->b.value, rank,
                1.f, y, out);
}

void LoraBranch::backward_column(GemmOperand dy, GemmOperand x, float* dx, int rows, int in,
                                 int out, comm::Communicator& tp, const LoraCall& call) const {
  Buffers b(call.scratch, rows, rank, in, out, x.fp32 && !dropping(call), !dy.fp32);
  const float* xd = branch_input(*this, x, rows, in, call, b);
  down_projection(*this, xd, b.u, rows, in);
  up_projection_backward(*this, dy, b.u, b.du, rows, out, b);
  const long n = (long)rows * rank;
  if (!dropping(call)) {
    input_grad(*this, b.du, dx, rows, in, call, b);  // partial, as the base's dx
    if (tp.size() > 1) tp.all_reduce(b.du, n, comm::ReduceOp::kSum);
    down_projection_grad(*this, b.du, xd, rows, in);
    return;
  }
  // Dropout: dA reads the dropped x before its buffer takes du A, so this rank's partial du
  // waits in u's buffer (u is dead) while du is all-reduced.
  std::copy_n(b.du, n, b.u);
  if (tp.size() > 1) tp.all_reduce(b.du, n, comm::ReduceOp::kSum);
  down_projection_grad(*this, b.du, xd, rows, in);
  input_grad(*this, b.u, dx, rows, in, call, b);
}

void LoraBranch::backward_row(GemmOperand dy, GemmOperand x, float* dx, int rows, int in, int out,
                              comm::Communicator& tp, const LoraCall& call) const {
  Buffers b(call.scratch, rows, rank, in, out, x.fp32 && !dropping(call), !dy.fp32);
  const float* xd = branch_input(*this, x, rows, in, call, b);
  down_projection(*this, xd, b.u, rows, in);
  if (tp.size() > 1) tp.all_reduce(b.u, (long)rows * rank, comm::ReduceOp::kSum);
  up_projection_backward(*this, dy, b.u, b.du, rows, out, b);
  down_projection_grad(*this, b.du, xd, rows, in);
  input_grad(*this, b.du, dx, rows, in, call, b);  // the branch's input is dead: b.x is free
}

}  // namespace trident::tensor_parallel
