// InferenceModel::run: one step through this rank's stage. The first stage embeds the new
// tokens at their positions, every stage runs its layers against the cache, the last stage
// forms the logits asked for and rank 0 receives them over the full vocabulary.
#include <algorithm>

#include "generation/inference_buffers.h"
#include "generation/inference_model.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "tensor_parallel/mappings.h"

namespace trident::generation {

namespace {

constexpr int kHiddenTag = 7101, kLogitsTag = 7102;

}  // namespace

void InferenceModel::embed(const std::vector<Segment>& segments, float* out) {
  const GPTModel& m = *model_.chunks[0];
  const tensor_parallel::VocabParallelEmbedding& e = m.embedding();
  Buffers& b = *buffers_;
  const int rows = (int)b.ids.size(), h = e.hidden;
  kernels::embedding_forward(b.ids.data(), rows, e.word.value, e.vocab_start, e.vocab_local, h,
                             out);
  tensor_parallel::reduce_from_region_forward(*rank_.groups->tensor, out, (long)rows * h);
  if (!e.position.value) return;  // RoPE: positions enter in attention
  for (const kernels::CachedSegment& s : b.segments)
    for (int i = 0; i < s.count; ++i) {
      float* row = out + (long)(s.row + i) * h;
      const float* pos = e.position.value + (long)(s.start + i) * h;
      for (int c = 0; c < h; ++c) row[c] += pos[c];
    }
  (void)segments;
}

void InferenceModel::run(const std::vector<Segment>& segments) {
  GPTModel& m = *model_.chunks[0];
  Buffers& b = *buffers_;
  comm::Communicator& pp = *rank_.groups->pipeline;
  b.ids.clear();
  b.segments.clear();
  for (const Segment& s : segments) {
    b.segments.push_back({s.slot, s.start, (int)s.tokens.size(), (int)b.ids.size()});
    b.ids.insert(b.ids.end(), s.tokens.begin(), s.tokens.end());
  }
  const int rows = (int)b.ids.size(), h = layout_.model.hidden_size;
  float *x = b.x, *y = b.y;
  if (m.placement().pre_process)
    embed(segments, x);
  else
    pp.recv(x, (long)rows * h, pp.rank() - 1, kHiddenTag);
  const CachedCall call{b.segments.data(), (int)b.segments.size(), rows, &b.precision};
  const auto& layers = m.layers();
  for (size_t l = 0; l < layers.size(); ++l) {
    layers[l].forward_cached(x, y, cache_.layer((int)l), b.layer, call);
    std::swap(x, y);
  }
  if (!m.placement().post_process) {
    pp.send(x, (long)rows * h, pp.rank() + 1, kHiddenTag);
  } else {
    output_logits(segments, x);
  }
  long wanted = 0;
  for (const Segment& s : segments) wanted += s.logit_rows;
  // The last stage's tensor rank 0 holds the logits; the coordinator is pipeline rank 0 of
  // its group.
  const bool holder = m.placement().post_process && rank_.groups->tensor->rank() == 0;
  if (pp.size() > 1 && wanted > 0) {
    if (holder)
      pp.send(b.logits, wanted * vocab(), 0, kLogitsTag);
    else if (coordinator())
      pp.recv(b.logits, wanted * vocab(), pp.size() - 1, kLogitsTag);
  }
}

void InferenceModel::output_logits(const std::vector<Segment>& segments, const float* hidden) {
  GPTModel& m = *model_.chunks[0];
  Buffers& b = *buffers_;
  comm::Communicator& tp = *rank_.groups->tensor;
  const int h = layout_.model.hidden_size, t = tp.size();
  long n = 0;
  for (size_t k = 0; k < segments.size(); ++k) {
    const kernels::CachedSegment& s = b.segments[k];
    const int keep = segments[k].logit_rows;
    std::copy_n(hidden + (long)(s.row + s.count - keep) * h, (long)keep * h, b.final_in + n * h);
    n += keep;
  }
  if (n == 0) return;
  m.final_norm().forward(b.final_in, b.final_ln, b.final_mean, b.final_rstd, (int)n, h);
  tensor_parallel::ColumnParallelLinear out = m.output_layer();
  out.precision = &b.precision;
  out.forward(b.final_ln.operand(), b.logits_local, (int)n);
  const long local = out.out_local;
  const float* shards = b.logits_local;
  if (t > 1) {
    tp.all_gather(b.logits_local, b.logits_gathered, n * local);
    shards = b.logits_gathered;
  }
  if (tp.rank() != 0) return;
  // Row r of rank j's shard holds vocabulary ids [j * local, (j + 1) * local); padding ids
  // past the vocabulary are dropped.
  float* dst = b.logits;
  const int V = vocab();
  for (long r = 0; r < n; ++r)
    for (int j = 0; j < t; ++j) {
      const long first = (long)j * local, count = std::clamp<long>(V - first, 0, local);
      std::copy_n(shards + ((long)j * n + r) * local, count, dst + r * V + first);
    }
}

}  // namespace trident::generation
