#include "kernels/rope.h"

#include <cmath>
#include <mutex>

namespace trident::kernels {

double rope_inv_freq(const RopeConfig& c, int i) {
  const double inv_freq = std::pow((double)c.base, -2.0 * i / c.rotary_dim);
  const RopeScaling& s = c.scaling;
  switch (s.type) {
    case RopeScaling::Type::kNone:
      return inv_freq;
    case RopeScaling::Type::kLinear:
      return inv_freq / s.factor;
    case RopeScaling::Type::kLlama3:
      break;
  }
  // Llama 3.1's NTK-by-parts rule as HF's _compute_llama3_parameters defines it: by the
  // wavelength 2 pi / inv_freq against the original context's low and high bounds.
  const double original = s.original_max_positions, wavelength = 2 * M_PI / inv_freq;
  const double low_bound = original / s.low_freq_factor, high_bound = original / s.high_freq_factor;
  if (wavelength < high_bound) return inv_freq;            // high frequencies: kept
  if (wavelength > low_bound) return inv_freq / s.factor;  // low frequencies: scaled
  const double smooth =
      (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

// Angles in double then rounded once: HF forms them in fp32, which differs by an ulp or so
// at large positions; both are within the tests' tolerance.
RopeTable::RopeTable(const RopeConfig& c, int positions) : half(c.rotary_dim / 2) {
  cos.resize((size_t)positions * half);
  sin.resize((size_t)positions * half);
  for (int i = 0; i < half; ++i) {
    const double inv_freq = rope_inv_freq(c, i);
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
  const bool same = config.head_dim == c.head_dim && config.rotary_dim == c.rotary_dim &&
                    config.base == c.base && config.scaling == c.scaling;
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
