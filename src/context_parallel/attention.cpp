#include "context_parallel/attention.h"

#include "context_parallel/a2a_attention.h"
#include "context_parallel/ring_attention.h"

namespace trident::context_parallel {

void attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out, float* lse,
                       const kernels::AttentionShape& local,
                       const kernels::AttentionDropout& dropout, kernels::Precision precision,
                       const kernels::RopeTable* rope, const ContextParallel& cp) {
  switch (cp.type) {
    case CpCommType::kP2p:
      return ring_attention_forward(qkv, layout, out, lse, local, dropout, precision, rope, cp);
    case CpCommType::kA2a:
      return a2a_attention_forward(qkv, layout, out, lse, local, dropout, precision, rope, cp);
    case CpCommType::kAllGather:
      return allgather_attention_forward(qkv, layout, out, lse, local, dropout, precision, rope,
                                         cp);
  }
}

void attention_backward(const float* qkv, const kernels::QkvLayout& layout, const float* out,
                        const float* dout, const float* lse, float* dqkv,
                        const kernels::AttentionShape& local,
                        const kernels::AttentionDropout& dropout, kernels::Precision precision,
                        const kernels::RopeTable* rope, const ContextParallel& cp) {
  switch (cp.type) {
    case CpCommType::kP2p:
      return ring_attention_backward(qkv, layout, out, dout, lse, dqkv, local, dropout, precision,
                                     rope, cp);
    case CpCommType::kA2a:
      return a2a_attention_backward(qkv, layout, out, dout, lse, dqkv, local, dropout, precision,
                                    rope, cp);
    case CpCommType::kAllGather:
      return allgather_attention_backward(qkv, layout, out, dout, lse, dqkv, local, dropout,
                                          precision, rope, cp);
  }
}

}  // namespace trident::context_parallel
