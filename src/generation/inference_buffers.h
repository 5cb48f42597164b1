#pragma once
// InferenceModel's step buffers (private to generation/): carved from one arena that the
// memory plan sizes, see InferenceModel::plan_buffers.
#include <memory>
#include <vector>

#include "generation/inference_model.h"
#include "kernels/cached_attention.h"
#include "kernels/mixed_linear.h"
#include "model/transformer_layer.h"

namespace trident::generation {

struct InferenceModel::Buffers {
  std::unique_ptr<Arena> arena;
  float *x = nullptr, *y = nullptr;  // hidden states in and out of a layer
  CachedLayerBuffers layer{};
  kernels::LinearPrecision precision;
  float *final_in = nullptr, *final_mean = nullptr, *final_rstd = nullptr;
  kernels::GemmOperandBuffer final_ln;
  float *logits_local = nullptr, *logits_gathered = nullptr, *logits = nullptr;
  std::vector<int> ids;
  std::vector<kernels::CachedSegment> segments;
};

}  // namespace trident::generation
