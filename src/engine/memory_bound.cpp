#include "engine/memory_bound.h"

#include <algorithm>
#include <cmath>

#include "context_parallel/rules.h"

namespace trident::engine {

MemoryBound memory_lower_bound(const RankLayout& l) {
  const ModelConfig& m = l.model;
  const ParameterShares<double> s = m.parameter_shares(l.tensor);
  MemoryBound b;
  b.parameters =
      s.word_embedding + s.positions + m.num_layers * s.per_layer + s.final_norm + s.output;
  b.bytes_per_parameter = 8 + 8.0 / (l.distributed_optimizer ? l.data : 1);
  // Pigeonhole: some pipeline rank holds at least ceil(L / p) layers, however uneven the split;
  // the first holds the embedding (with p = 1, one rank holds everything).
  const double layers = std::ceil((double)m.num_layers / l.pipeline);
  const double rows = (double)l.micro_batch * l.local_seq() / (l.sequence_parallel ? l.tensor : 1);
  const double activations = layers / l.recompute_group_size() * rows * m.hidden_size * 4;
  const double with_layers = l.pipeline == 1 ? b.parameters : layers * s.per_layer;
  const double embedding = s.word_embedding + s.positions;
  if (with_layers * b.bytes_per_parameter / l.tensor + activations >=
      embedding * b.bytes_per_parameter / l.tensor)
    b.rank_parameters = with_layers / l.tensor, b.activation_bytes = activations;
  else
    b.rank_parameters = embedding / l.tensor;
  return b;
}

RankLayout most_remedied(const RankLayout& layout) {
  RankLayout l = layout;
  l.pipeline = std::max(l.pipeline, l.model.num_layers / std::max(1, l.virtual_stages));
  l.data *= 1024;
  l.distributed_optimizer = true;
  l.micro_batch = 1;
  l.recompute_granularity = "full", l.recompute_method = "uniform", l.recompute_num_layers = 1;
  l.split.clear();  // not needed by the bound (an even split would be l.pipeline entries long)
  if (const std::vector<int> more = more_context_ranks(layout); !more.empty()) {
    l.data = l.data / l.context * more.back();
    l.context = more.back();
  }
  return l;
}

std::vector<int> more_context_ranks(const RankLayout& l) {
  std::vector<int> out;
  for (long c = 2L * l.context; c <= 1024L * l.context && c <= l.model.seq_length; c *= 2) {
    std::vector<std::string> errors;
    context_parallel::check_context_parallel(l.model, l.tensor, (int)c, l.cp_comm_type, errors);
    if (!errors.empty()) break;  // a larger c breaks the same rule
    out.push_back((int)c);
  }
  return out;
}

}  // namespace trident::engine
