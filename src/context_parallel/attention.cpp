#include "context_parallel/attention.h"

#include <stdexcept>

namespace trident::context_parallel {

namespace {
// The ring (p2p) and all-to-all (a2a) paths (ring_attention_forward / backward and
// a2a_attention_forward / backward, the same signature) are wired in here when they land;
// until then the configuration rules refuse them at c > 1 (train/context_parallel_rules.cpp).
[[noreturn]] void not_built(CpCommType type) {
  throw std::logic_error(std::string("context parallelism: --cp-comm-type ") +
                         (type == CpCommType::kP2p ? "p2p" : "a2a") + " is not built yet");
}
}  // namespace

void attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out, float* lse,
                       const kernels::AttentionShape& local,
                       const kernels::AttentionDropout& dropout, kernels::Precision precision,
                       const kernels::RopeTable* rope, const ContextParallel& cp) {
  if (cp.type != CpCommType::kAllGather) not_built(cp.type);
  allgather_attention_forward(qkv, layout, out, lse, local, dropout, precision, rope, cp);
}

void attention_backward(const float* qkv, const kernels::QkvLayout& layout, const float* out,
                        const float* dout, const float* lse, float* dqkv,
                        const kernels::AttentionShape& local,
                        const kernels::AttentionDropout& dropout, kernels::Precision precision,
                        const kernels::RopeTable* rope, const ContextParallel& cp) {
  if (cp.type != CpCommType::kAllGather) not_built(cp.type);
  allgather_attention_backward(qkv, layout, out, dout, lse, dqkv, local, dropout, precision, rope,
                               cp);
}

}  // namespace trident::context_parallel
