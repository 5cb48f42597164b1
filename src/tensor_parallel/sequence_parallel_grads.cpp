#include "tensor_parallel/sequence_parallel_grads.h"

#include <algorithm>
#include <vector>

namespace trident::tensor_parallel {

bool is_sequence_parallel_param(const ParamSpec& spec) {
  return spec.name.find("layernorm.") != std::string::npos;
}

bool is_router_param(const ParamSpec& spec) {
  return spec.name.find(".mlp.router.weight") != std::string::npos;
}

bool is_qk_norm_param(const ParamSpec& spec) {
  return spec.name.find("self_attention.q_layernorm.") != std::string::npos ||
         spec.name.find("self_attention.k_layernorm.") != std::string::npos;
}

bool is_replicated_kv_param(const ParamSpec& spec) {
  return spec.shard.dim < 0 && spec.name.find("self_attention.linear_kv.") != std::string::npos;
}

void allreduce_sequence_parallel_grads(Parameters& params, comm::Communicator& tp,
                                       bool sequence_parallel, bool routers_see_own_rows) {
  if (tp.size() == 1 || !params.has_gradients()) return;
  std::vector<const ParamSpec*> specs;
  long total = 0;
  for (const ParamSpec& s : params.layout().specs())
    if ((sequence_parallel && is_sequence_parallel_param(s)) || is_replicated_kv_param(s) ||
        is_qk_norm_param(s) || (routers_see_own_rows && is_router_param(s)))
      specs.push_back(&s), total += s.numel();
  if (total == 0) return;
  std::vector<float> packed(total);
  float* grads = params.grads();
  long at = 0;
  for (const ParamSpec* s : specs) {
    std::copy_n(grads + s->offset, s->numel(), packed.data() + at);
    at += s->numel();
  }
  tp.all_reduce(packed.data(), total, comm::ReduceOp::kSum);
  at = 0;
  for (const ParamSpec* s : specs) {
    std::copy_n(packed.data() + at, s->numel(), grads + s->offset);
    at += s->numel();
  }
}

}  // namespace trident::tensor_parallel
