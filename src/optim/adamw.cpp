#include "optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "kernels/adamw.h"

namespace trident::optim {

namespace {
// The squares of the ranges' owned gradients, each counted once over the tensor group (a
// tensor cut into parts over it summed, a whole one, replicated or a whole expert at
// --expert-tensor-parallel-size 1, not), then summed over `data` (the groups whose ranks
// hold disjoint parts).
double squares_over(const std::vector<GradRange>& ranges, comm::Communicator& tp,
                    std::initializer_list<comm::Communicator*> data) {
  double sq[2] = {0.0, 0.0};  // sharded over tensor parallelism, replicated
  for (const GradRange& r : ranges)
    for (const ParamSpec& s : r.params->layout().specs()) {
      long lo = std::max(r.begin, s.offset), hi = std::min(r.end, s.offset + s.numel());
      if (!s.owned || lo >= hi) continue;
      const bool split = s.shard.dim >= 0 && s.shard.parts > 1;
      sq[split ? 0 : 1] += kernels::sum_of_squares(r.params->grads() + lo, hi - lo);
    }
  tp.all_reduce(&sq[0], 1, comm::ReduceOp::kSum);
  double total = sq[0] + sq[1];
  for (comm::Communicator* group : data) group->all_reduce(&total, 1, comm::ReduceOp::kSum);
  return total;
}
}  // namespace

double global_grad_norm(const std::vector<GradRange>& ranges, comm::Communicator& tp,
                        comm::Communicator& pp, comm::Communicator& data) {
  double total = squares_over(ranges, tp, {&data});
  pp.all_reduce(&total, 1, comm::ReduceOp::kSum);
  return std::sqrt(total);
}

double global_grad_norm(const std::vector<GradRange>& ranges, comm::Communicator& tp,
                        comm::Communicator& pp, comm::Communicator& data,
                        const ExpertGroupsForNorm& experts) {
  double total = squares_over(ranges, tp, {&data}) +
                 squares_over(experts.ranges, tp, {&experts.expert_data, &experts.expert});
  pp.all_reduce(&total, 1, comm::ReduceOp::kSum);
  return std::sqrt(total);
}

double global_grad_norm(const std::vector<const Parameters*>& chunks, comm::Communicator& tp,
                        comm::Communicator& pp) {
  std::vector<GradRange> ranges;
  for (const Parameters* p : chunks) ranges.push_back({p, 0, p->size()});
  comm::SingleRankCommunicator replicas("data");
  return global_grad_norm(ranges, tp, pp, replicas);
}

float clip_coefficient(double norm, float clip) {
  return clip > 0.f && norm > clip ? (float)(clip / (norm + 1e-6)) : 1.f;
}

AdamW::AdamW(const AdamWConfig& config, long begin, long end)
    : config_(config), begin_(begin), end_(end) {
  assign_parallel(exp_avg_, end - begin, 0.f);
  assign_parallel(exp_avg_sq_, end - begin, 0.f);
}

void AdamW::update(Parameters& params, float lr, float grad_scale) {
  start_step();
  update_range(params, lr, grad_scale, begin_, end_);
}

void AdamW::update_range(Parameters& params, float lr, float grad_scale, long first, long last) {
  kernels::AdamWStep s{lr,    config_.beta1, config_.beta2, config_.eps, config_.weight_decay,
                       step_, grad_scale};
  // Updating the whole buffer, the kernel refreshes the 16-bit copy too (the padding
  // between tensors is zero in both); a shard leaves that to whoever gathers the values.
  const bool whole = begin_ == 0 && end_ == params.size() && first == 0 && last == end_;
  std::uint16_t* low = whole ? params.low_values() : nullptr;
  float* values = params.values();
  first = std::max(first, begin_), last = std::min(last, end_);
  for (const ParamSpec& spec : params.layout().specs()) {
    long lo = std::max(first, spec.offset), hi = std::min(last, spec.offset + spec.numel());
    if (lo >= hi) continue;
    kernels::adamw_update(values + lo, params.grads() + lo, exp_avg_.data() + (lo - begin_),
                          exp_avg_sq_.data() + (lo - begin_), hi - lo, s, spec.weight_decay,
                          low ? low + lo : nullptr, params.low_precision());
  }
  if (low) params.mark_low_precision_current();
}

double AdamW::step(Parameters& params, float lr, comm::Communicator& tp) {
  comm::SingleRankCommunicator no_pipeline("pipeline");
  double norm = global_grad_norm({&params}, tp, no_pipeline);
  update(params, lr, clip_coefficient(norm, config_.clip_grad));
  return norm;
}

}  // namespace trident::optim
