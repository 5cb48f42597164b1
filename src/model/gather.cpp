#include "model/gather.h"

#include <algorithm>
#include <cmath>

namespace trident {

namespace {

std::vector<float> gather(const Parameters& params, const ModelConfig& config,
                          const std::string& name, comm::Communicator& tp, bool gradients) {
  const int t = tp.size();
  const ParamSpec& mine = params.layout().find(name);
  long global = 1;
  for (long d : mine.global_shape) global *= d;
  const float* src = (gradients ? params.grads() : params.values()) + mine.offset;
  if (t == 1) return std::vector<float>(src, src + mine.numel());
  std::vector<float> shards((size_t)mine.numel() * t);
  tp.all_gather(src, shards.data(), mine.numel());
  std::vector<float> out(global, 0.f);
  for (int r = 0; r < t; ++r) {
    const ParameterLayout layout = params.layout().like(config, {r, t});
    const ParamSpec& theirs = layout.find(name);
    for (long i = 0; i < theirs.numel(); ++i)
      out[theirs.global_index(i)] = shards[(size_t)r * mine.numel() + i];
  }
  return out;
}

}  // namespace

Parameters gather_to_single_rank(const Parameters& params, const ModelConfig& config,
                                 comm::Communicator& tp, bool gradients, ChunkPlacement placement) {
  Parameters single(params.layout().like(config, {0, 1}, placement));
  for (const ParamSpec& spec : single.layout().specs()) {
    std::vector<float> full = gather(params, config, spec.name, tp, gradients);
    // The padded vocabulary depends on t; only the real rows carry meaning.
    long n = std::min<long>((long)full.size(), spec.numel());
    float* dst = (gradients ? single.grads() : single.values()) + spec.offset;
    std::copy_n(full.data(), n, dst);
  }
  return single;
}

double replicated_parameter_drift(const Parameters& params, comm::Communicator& tp) {
  double drift = 0.0;
  for (const ParamSpec& spec : params.layout().specs()) {
    if (spec.shard.dim >= 0) continue;
    const float* mine = params.values() + spec.offset;
    std::vector<float> first(mine, mine + spec.numel());
    tp.broadcast(first.data(), spec.numel(), 0);
    for (long i = 0; i < spec.numel(); ++i)
      drift = std::max(drift, (double)std::abs(mine[i] - first[i]));
  }
  tp.all_reduce(&drift, 1, comm::ReduceOp::kMax);
  return drift;
}

}  // namespace trident
