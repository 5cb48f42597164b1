#include "tensor_parallel/lora.h"

#include <vector>

#include "kernels/gemm.h"

namespace trident::tensor_parallel {

namespace {
using kernels::Trans;

// u [rows, R] = x [rows, in] A^T
std::vector<float> down_projection(const LoraBranch& l, const float* x, int rows, int in) {
  std::vector<float> u((size_t)rows * l.rank);
  kernels::gemm(Trans::kNo, Trans::kYes, rows, l.rank, in, 1.f, x, in, l.a.value, in, 0.f, u.data(),
                l.rank);
  return u;
}

// dB [out, R] += s dy^T u, then du [rows, R] = s dy B.
std::vector<float> up_projection_backward(const LoraBranch& l, const float* dy,
                                          const std::vector<float>& u, int rows, int out) {
  const int r = l.rank;
  if (l.b.grad)
    kernels::gemm(Trans::kYes, Trans::kNo, out, r, rows, l.scale, dy, out, u.data(), r, 1.f,
                  l.b.grad, r);
  std::vector<float> du((size_t)rows * r);
  kernels::gemm(Trans::kNo, Trans::kNo, rows, r, out, l.scale, dy, out, l.b.value, r, 0.f,
                du.data(), r);
  return du;
}

// dx [rows, in] += du A
void input_grad(const LoraBranch& l, const std::vector<float>& du, float* dx, int rows, int in) {
  kernels::gemm(Trans::kNo, Trans::kNo, rows, in, l.rank, 1.f, du.data(), l.rank, l.a.value, in,
                1.f, dx, in);
}

// dA [R, in] += du^T x
void down_projection_grad(const LoraBranch& l, const std::vector<float>& du, const float* x,
                          int rows, int in) {
  if (!l.a.grad) return;
  kernels::gemm(Trans::kYes, Trans::kNo, l.rank, in, rows, 1.f, du.data(), l.rank, x, in, 1.f,
                l.a.grad, in);
}
}  // namespace

void LoraBranch::forward(const float* x, float* y, int rows, int in, int out) const {
  const std::vector<float> u = down_projection(*this, x, rows, in);
  kernels::gemm(Trans::kNo, Trans::kYes, rows, out, rank, scale, u.data(), rank, b.value, rank, 1.f,
                y, out);
}

void LoraBranch::backward_column(const float* dy, const float* x, float* dx, int rows, int in,
                                 int out, comm::Communicator& tp) const {
  const std::vector<float> u = down_projection(*this, x, rows, in);
  std::vector<float> du = up_projection_backward(*this, dy, u, rows, out);
  input_grad(*this, du, dx, rows, in);  // partial, as the base's dx
  if (tp.size() > 1) tp.all_reduce(du.data(), (long)du.size(), comm::ReduceOp::kSum);
  down_projection_grad(*this, du, x, rows, in);
}

void LoraBranch::backward_row(const float* dy, const float* x, float* dx, int rows, int in, int out,
                              comm::Communicator& tp) const {
  std::vector<float> u = down_projection(*this, x, rows, in);
  if (tp.size() > 1) tp.all_reduce(u.data(), (long)u.size(), comm::ReduceOp::kSum);
  const std::vector<float> du = up_projection_backward(*this, dy, u, rows, out);
  down_projection_grad(*this, du, x, rows, in);
  input_grad(*this, du, dx, rows, in);
}

}  // namespace trident::tensor_parallel
