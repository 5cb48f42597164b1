#pragma once
// All-to-all attention (Megatron's --cp-comm-type a2a, DeepSpeed-Ulysses): an all-to-all over
// the cp group turns this rank's [local seq, all heads] into [whole sequence, heads / c]
// (rank r gets query heads [r H / c, (r + 1) H / c) and their key / value groups), the
// one-process kernel runs on the whole sequence for those heads (global RoPE positions,
// document starts and dropout's head offset), and a second all-to-all brings the output
// back to the sequence split. Backward is the mirror. Needs the query heads and key / value
// heads (groups) divisible by c. The contract of the arguments is ring attention's
// (ring_attention.h).
#include "context_parallel/context_parallel.h"
#include "kernels/attention.h"

namespace trident::context_parallel {

// Throws std::invalid_argument naming the rule when heads or key / value heads do not
// divide among the cp ranks.
void check_a2a_heads(int heads, int kv_heads, int heads_per_kv, int cp_size);

void a2a_attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out,
                           float* lse, const kernels::AttentionShape& local,
                           const kernels::AttentionDropout& dropout, kernels::Precision precision,
                           const kernels::RopeTable* rope, const ContextParallel& cp);

void a2a_attention_backward(const float* qkv, const kernels::QkvLayout& layout, const float* out,
                            const float* dout, const float* lse, float* dqkv,
                            const kernels::AttentionShape& local,
                            const kernels::AttentionDropout& dropout, kernels::Precision precision,
                            const kernels::RopeTable* rope, const ContextParallel& cp);

}  // namespace trident::context_parallel
