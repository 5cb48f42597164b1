#include "kernels/grouped_qkv.h"

#include <algorithm>

namespace trident::kernels {

void expand_grouped_qkv(const float* q, long q_stride, const float* kv, long kv_stride, float* qkv,
                        long rows, const QueryGroups& g) {
  const long d = g.head_dim, hd = g.heads * d;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    float* out = qkv + r * 3 * hd;
    const float* k = kv + r * kv_stride;
    const float* v = k + g.groups * d;
    std::copy_n(q + r * q_stride, hd, out);
    for (int h = 0; h < g.heads; ++h) {
      std::copy_n(k + g.group_of(h) * d, d, out + hd + h * d);
      std::copy_n(v + g.group_of(h) * d, d, out + 2 * hd + h * d);
    }
  }
}

void reduce_grouped_qkv_grad(const float* dqkv, float* dq, long q_stride, float* dkv,
                             long kv_stride, long rows, const QueryGroups& g) {
  const long d = g.head_dim, hd = g.heads * d, kvd = 2L * g.groups * d;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    const float* in = dqkv + r * 3 * hd;
    float* dk = dkv + r * kv_stride;
    float* dv = dk + g.groups * d;
    std::copy_n(in, hd, dq + r * q_stride);
    std::fill_n(dk, kvd, 0.f);
    for (int h = 0; h < g.heads; ++h) {
      const float* ik = in + hd + h * d;
      const float* iv = in + 2 * hd + h * d;
      float* ok = dk + g.group_of(h) * d;
      float* ov = dv + g.group_of(h) * d;
      for (long i = 0; i < d; ++i) ok[i] += ik[i], ov[i] += iv[i];
    }
  }
}

}  // namespace trident::kernels
