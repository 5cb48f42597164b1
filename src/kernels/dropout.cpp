#include "kernels/dropout.h"

#include <algorithm>
#include <vector>

#include "kernels/elementwise.h"

namespace trident::kernels {

namespace {

constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  std::uint64_t p = (std::uint64_t)a * b;
  hi = (std::uint32_t)(p >> 32), lo = (std::uint32_t)p;
}

// Elements are kept when the 32-bit draw is at or above p * 2^32.
inline std::uint32_t drop_threshold(float p) {
  return (std::uint32_t)std::min(4294967295.0, (double)p * 4294967296.0);
}

}  // namespace

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> c,
                                           std::array<std::uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], hi0, lo0);
    mulhilo(kMul1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0, k[1] += kWeyl1;
  }
  return c;
}

std::uint32_t dropout_site(int layer, DropoutKind kind) {
  return (std::uint32_t)layer * 4u + (std::uint32_t)kind;
}

std::uint32_t lora_dropout_site(int layer, int module) {
  return 0x80000000u | ((std::uint32_t)layer * 4u + (std::uint32_t)module);
}

void dropout_keep_mask(const DropoutStream& s, std::uint64_t first, int n, std::uint8_t* keep) {
  const std::uint32_t threshold = drop_threshold(s.probability);
  const std::array<std::uint32_t, 2> key{(std::uint32_t)s.seed, (std::uint32_t)(s.seed >> 32)};
  std::uint64_t index = first;
  for (int k = 0; k < n;) {
    const std::uint64_t group = index >> 2;
    auto r =
        philox4x32_10({(std::uint32_t)group, (std::uint32_t)(group >> 32), s.site, s.sample}, key);
    for (int lane = (int)(index & 3); lane < 4 && k < n; ++lane, ++k, ++index)
      keep[k] = r[lane] >= threshold;
  }
}

bool dropout_keeps(const DropoutStream& s, std::uint64_t index) {
  std::uint8_t keep;
  dropout_keep_mask(s, index, 1, &keep);
  return keep;
}

namespace {

// Applies f(row, keep-mask of that row, 1 / (1 - p)) to every row, or returns false when
// dropout is off for this call. The rows hold columns [first_col, first_col + cols) of
// full_cols (full_cols 0: cols, all of them).
template <typename RowFn>
bool for_each_dropout_row(int rows, int cols, const DropoutBatch& b, std::uint32_t site, float p,
                          RowFn f, long first_col = 0, long full_cols = 0) {
  if (!b.training() || p <= 0.f) return false;
  const float scale = 1.f / (1.f - p);
  const long width = full_cols > 0 ? full_cols : cols;
#pragma omp parallel
  {
    std::vector<std::uint8_t> keep(cols);
#pragma omp for schedule(static)
    for (int r = 0; r < rows; ++r) {
      const long row = b.first_row + r;  // in the whole micro-batch
      DropoutStream s{b.config->seed, site, (std::uint32_t)(b.first_sample + row / b.seq), p};
      const long token = b.token_position ? b.token_position[row % b.seq] : row % b.seq;
      dropout_keep_mask(s, (std::uint64_t)token * width + first_col, cols, keep.data());
      f(r, keep.data(), scale);
    }
  }
  return true;
}

}  // namespace

// The row loops below compute the kept value before choosing it over 0: a load made only when
// keep[c] is set is a masked load of floats under a byte mask, which GCC does not vectorise on
// AVX2; an unconditional load and a select it does. Dropped elements stay exactly 0.
void bias_dropout_residual_add(const float* residual, const float* y, const float* bias, float* out,
                               int rows, int cols, const DropoutBatch& batch, std::uint32_t site) {
  auto row = [&](int r, const std::uint8_t* keep, float scale) {
    const long o = (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      const float kept = (y[o + c] + (bias ? bias[c] : 0.f)) * scale;
      out[o + c] = residual[o + c] + (keep[c] ? kept : 0.f);
    }
  };
  const float p = batch.config ? batch.config->hidden : 0.f;
  if (!for_each_dropout_row(rows, cols, batch, site, p, row))
    bias_residual_add(residual, y, bias, out, rows, cols);
}

const float* dropout_backward(const float* dout, float* dy, int rows, int cols,
                              const DropoutBatch& batch, std::uint32_t site) {
  auto row = [&](int r, const std::uint8_t* keep, float scale) {
    const long o = (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      const float kept = dout[o + c] * scale;
      dy[o + c] = keep[c] ? kept : 0.f;
    }
  };
  const float p = batch.config ? batch.config->hidden : 0.f;
  return for_each_dropout_row(rows, cols, batch, site, p, row) ? dy : dout;
}

void dropout_inplace(float* x, int rows, int cols, const DropoutBatch& batch, std::uint32_t site) {
  auto row = [&](int r, const std::uint8_t* keep, float scale) {
    const long o = (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      const float kept = x[o + c] * scale;
      x[o + c] = keep[c] ? kept : 0.f;
    }
  };
  const float p = batch.config ? batch.config->hidden : 0.f;
  for_each_dropout_row(rows, cols, batch, site, p, row);
}

bool lora_dropout_on(const DropoutBatch& batch) {
  return batch.training() && batch.config->lora > 0.f;
}

namespace {

// The LoRA branch's dropout rows: the call's rows are the whole micro-batch's (first_row 0),
// its columns a slice of the linear's input (where).
template <typename RowFn>
bool for_each_lora_dropout_row(int rows, int cols, const DropoutBatch& batch,
                               const DropoutColumns& where, RowFn f) {
  DropoutBatch all = batch;
  all.first_row = 0;
  const float p = batch.config ? batch.config->lora : 0.f;
  return for_each_dropout_row(rows, cols, all, where.site, p, f, where.first_col, where.full_cols);
}

}  // namespace

void dropout_copy(const float* x, float* out, int rows, int cols, const DropoutBatch& batch,
                  const DropoutColumns& where) {
  auto row = [&](int r, const std::uint8_t* keep, float scale) {
    const long o = (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      const float kept = x[o + c] * scale;
      out[o + c] = keep[c] ? kept : 0.f;
    }
  };
  if (!for_each_lora_dropout_row(rows, cols, batch, where, row))
    std::copy_n(x, (long)rows * cols, out);
}

void dropout_accumulate(const float* d, float* dx, int rows, int cols, const DropoutBatch& batch,
                        const DropoutColumns& where) {
  auto row = [&](int r, const std::uint8_t* keep, float scale) {
    const long o = (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      const float kept = d[o + c] * scale;
      dx[o + c] += keep[c] ? kept : 0.f;
    }
  };
  if (!for_each_lora_dropout_row(rows, cols, batch, where, row))
    accumulate(dx, d, (long)rows * cols);
}

}  // namespace trident::kernels
