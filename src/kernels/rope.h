#pragma once
// Rotary position embedding (Su et al. 2021) in the rotate-half convention of HF's Llama
// and Megatron: within the first rotary_dim dims of a head, dim i < rotary_dim / 2 pairs
// with dim i + rotary_dim / 2 and the pair turns by position * base^(-2i / rotary_dim).
// The remaining dims pass unchanged (--rotary-percent < 1).
#include <memory>
#include <vector>

namespace trident::kernels {

// Frequency scaling for contexts longer than training's (HF's rope_scaling). llama3
// (Llama 3.1): frequencies whose wavelength exceeds original / low_freq_factor are divided
// by factor, those below original / high_freq_factor kept, and those between interpolated.
// linear: every frequency divided by factor (positions / factor).
struct RopeScaling {
  enum class Type { kNone, kLlama3, kLinear } type = Type::kNone;
  float factor = 1.f;
  float low_freq_factor = 1.f, high_freq_factor = 4.f;
  int original_max_positions = 8192;
  bool operator==(const RopeScaling&) const = default;
};

struct RopeConfig {
  int head_dim = 0;
  int rotary_dim = 0;  // even, <= head_dim
  float base = 10000.f;
  RopeScaling scaling{};
};

// The rotation frequency of pair i (< rotary_dim / 2), scaling applied, in double.
double rope_inv_freq(const RopeConfig& c, int i);

// cos and sin of every (position, frequency) a call needs, [positions, rotary_dim / 2] each;
// formed once per call so the per-element work is two multiply-adds.
struct RopeTable {
  std::vector<float> cos, sin;
  int half = 0;
  RopeTable(const RopeConfig& c, int positions);
};

// A table for at least `positions` positions, shared: built once per configuration and
// reused by later calls (each layer's forward and backward) until one needs more positions.
std::shared_ptr<const RopeTable> shared_rope_table(const RopeConfig& c, int positions);

// Rotates `heads` heads of each of `rows` rows in place: row r starts at x + r * row_stride
// and sits at position positions[r]. inverse: the transposed rotation, which is the
// backward pass (dL/dx from dL/dy).
void rope_apply(float* x, long rows, long row_stride, int heads, const int* positions,
                const RopeTable& table, const RopeConfig& c, bool inverse);

// Training's layout, qkv [batch, seq, 3, heads, head_dim]: q and k of token s at position s.
void rope_qkv(float* qkv, int batch, int seq, int heads, const RopeConfig& c, bool inverse);

}  // namespace trident::kernels
