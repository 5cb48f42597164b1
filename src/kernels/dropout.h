#pragma once
// Dropout with a counter-based generator (Philox4x32-10, Salmon et al., SC'11): whether
// element i of a site is kept depends only on (seed, site, sample, i), never on the order
// of draws. So backward regenerates the forward mask instead of storing it, recomputation
// reproduces it, and every tensor- / pipeline- / data-parallel layout draws the same mask
// for the same element of the same training sample.
#include <array>
#include <cstdint>

namespace trident::kernels {

struct DropoutConfig {
  float hidden = 0.f;     // --hidden-dropout: embedding output, attention and MLP outputs
  float attention = 0.f;  // --attention-dropout: attention probabilities
  std::uint64_t seed = 0;
  float lora = 0.f;  // --lora-dropout: the LoRA branches' input (tensor_parallel/lora.h)
  bool any() const { return hidden > 0.f || attention > 0.f || lora > 0.f; }
};

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key);

// One place dropout happens: which site of which training sample.
struct DropoutStream {
  std::uint64_t seed;
  std::uint32_t site;    // dropout_site(layer, kind)
  std::uint32_t sample;  // index of the training sample in the run's sample order
  float probability;     // of dropping
};

enum class DropoutKind : std::uint32_t { kAttentionProbs = 0, kAttentionOut = 1, kMlpOut = 2 };
std::uint32_t dropout_site(int layer, DropoutKind kind);
constexpr std::uint32_t kEmbeddingDropoutSite = 0xfffffff0u;
// The input of layer `layer`'s LoRA branch on linear number `module` (config/lora_config.h's
// lora_modules() order): sites of their own, above every dropout_site.
std::uint32_t lora_dropout_site(int layer, int module);

// keep[k] = 1 if element first + k of the stream is kept, for k in [0, n).
void dropout_keep_mask(const DropoutStream& s, std::uint64_t first, int n, std::uint8_t* keep);
// One element (the reference the fused kernels are tested against).
bool dropout_keeps(const DropoutStream& s, std::uint64_t index);

// Which samples a micro-batch holds: row r (of batch x seq rows) belongs to sample
// first_sample + r / seq. first_sample < 0: evaluation, no dropout. A kernel given only
// some rows of the micro-batch (sequence parallelism: this rank's contiguous 1/t of them)
// starts at row first_row, so its local row r draws the bits of row first_row + r.
// Context parallelism: a rank holds seq of each sample's tokens, not in order;
// token_position ([seq], or null: row r's token is r % seq) gives each one's index in its
// whole sample, so that element (token, column) draws the bit the c = 1 run draws.
struct DropoutBatch {
  const DropoutConfig* config = nullptr;
  long first_sample = -1;
  int seq = 0;
  long first_row = 0;
  const int* token_position = nullptr;
  bool training() const { return config && first_sample >= 0; }
};

// out = residual + dropout(y + bias): a row-parallel linear's bias, hidden dropout and the
// residual add in one pass (dropout off when batch is not training or p = 0).
void bias_dropout_residual_add(const float* residual, const float* y, const float* bias, float* out,
                               int rows, int cols, const DropoutBatch& batch, std::uint32_t site);
// The gradient of the dropped branch: dy = dout * regenerated mask / (1 - p), returned; or
// dout itself, untouched, when dropout is off for this call.
const float* dropout_backward(const float* dout, float* dy, int rows, int cols,
                              const DropoutBatch& batch, std::uint32_t site);
// In place, for the embedding output.
void dropout_inplace(float* x, int rows, int cols, const DropoutBatch& batch, std::uint32_t site);

// LoRA's input dropout (probability config->lora): the rows are all of the micro-batch's
// (batch.first_row is ignored), and this rank holds columns [first_col, first_col + cols)
// of rows of full_cols (a row-parallel linear's input is split by columns), so element
// (row, first_col + c) draws the bit of the unsplit row's element, as every layout does.
struct DropoutColumns {
  std::uint32_t site = 0;
  long first_col = 0;
  long full_cols = 0;
};
bool lora_dropout_on(const DropoutBatch& batch);
// out = x * mask / (1 - p).
void dropout_copy(const float* x, float* out, int rows, int cols, const DropoutBatch& batch,
                  const DropoutColumns& where);
// dx += d * mask / (1 - p): the gradient through the dropped copy, accumulated.
void dropout_accumulate(const float* d, float* dx, int rows, int cols, const DropoutBatch& batch,
                        const DropoutColumns& where);

}  // namespace trident::kernels
