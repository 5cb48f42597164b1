#include "kernels/rope.h"

#include <cmath>
#include <mutex>

namespace trident::kernels {

// Angles in double then rounded once: HF forms them in fp32, which differs by an ulp or so
// at large positions; both are within the tests' tolerance.
RopeTable::RopeTable(const RopeConfig& c, int positions) : half(c.rotary_dim / 2) {
  cos.resize((size_t)positions * half);
  sin.resize((size_t)positions * half);
  for (int i = 0; i < half; ++i) {
    const double inv_freq = std::pow((double)c.base, -2.0 * i / c.rotary_dim);
    for (int p = 0; p < positions; ++p) {
      cos[(size_t)p * half + i] = (float)std::cos(p * inv_freq);
      sin[(size_t)p * half + i] = (float)std::sin(p * inv_freq);
    }
  }
}

std::shared_ptr<const RopeTable> shared_rope_table(const RopeConfig& c, int positions) {
  static std::mutex mutex;
  static RopeConfig config;
  static int held = 0;
  static std::shared_ptr<const RopeTable> table;
  std::lock_guard<std::mutex> lock(mutex);
  const bool same =
      config.head_dim == c.head_dim && config.rotary_dim == c.rotary_dim && config.base == c.base;
  if (!table || !same || held < positions) {
    table = std::make_shared<const RopeTable>(c, positions);
    config = c, held = positions;
  }
  return table;
}

void rope_apply(float* x, long rows, long row_stride, int heads, const int* positions,
                const RopeTable& table, const RopeConfig& c, bool inverse) {
  const int half = table.half;
  const float sign = inverse ? -1.f : 1.f;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    const float* cs = table.cos.data() + (size_t)positions[r] * half;
    const float* sn = table.sin.data() + (size_t)positions[r] * half;
    for (int h = 0; h < heads; ++h) {
      float* lo = x + r * row_stride + (long)h * c.head_dim;
      float* hi = lo + half;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        const float a = lo[i], b = hi[i], s = sign * sn[i];
        lo[i] = a * cs[i] - b * s;
        hi[i] = b * cs[i] + a * s;
      }
    }
  }
}

void rope_qkv(float* qkv, int batch, int seq, int heads, const RopeConfig& c, bool inverse) {
  const RopeTable table(c, seq);
  std::vector<int> positions((size_t)batch * seq);
  for (size_t r = 0; r < positions.size(); ++r) positions[r] = (int)(r % seq);
  const long stride = 3L * heads * c.head_dim;
  // q and k of a token are adjacent: 2 * heads heads from the row's start.
  rope_apply(qkv, (long)batch * seq, stride, 2 * heads, positions.data(), table, c, inverse);
}

}  // namespace trident::kernels
