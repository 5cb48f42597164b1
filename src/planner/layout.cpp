#include "planner/layout.h"

#include "context_parallel/rules.h"
#include "pipeline_parallel/schedules.h"

namespace trident::planner {

std::string recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

std::string sharding_short_name(data_parallel::ShardingStrategy s) {
  switch (s) {
    case data_parallel::ShardingStrategy::kNoShard:
      return "";
    case data_parallel::ShardingStrategy::kOptim:
      return "zero-1";
    case data_parallel::ShardingStrategy::kOptimGrads:
      return "zero-2";
    case data_parallel::ShardingStrategy::kOptimGradsParams:
      return "zero-3";
  }
  return "?";
}

pipeline_parallel::ScheduleKind Layout::schedule() const {
  if (zero_bubble) return pipeline_parallel::ScheduleKind::kZeroBubbleH1;
  return virtual_stages > 1 ? pipeline_parallel::ScheduleKind::kInterleaved
                            : pipeline_parallel::ScheduleKind::kOneFOneB;
}

std::string Layout::describe() const {
  std::string s = "t=" + std::to_string(tensor);
  if (context > 1) {
    s += " c=" + std::to_string(context);
    if (cp_comm_type != context_parallel::CpCommType::kP2p)
      s += " cp=" + context_parallel::cp_comm_type_name(cp_comm_type);
  }
  s += " p=" + std::to_string(pipeline) + " d=" + std::to_string(data) +
       " b=" + std::to_string(micro_batch) + " v=" + std::to_string(virtual_stages);
  if (recompute != Recompute::kNone) s += " recompute=" + recompute_name(recompute);
  if (distributed_optimizer()) s += " " + sharding_short_name(sharding);
  if (sequence_parallel) s += " sp";
  if (zero_bubble) s += " zb-h1";
  if (expert > 1) s += " ep=" + std::to_string(expert);
  return s;
}

namespace {

// Training's MoE rules (src/train/moe_rules.cpp), the same words, for the layout's part.
void moe_violations(const Layout& l, const Workload& w, std::vector<std::string>& errors) {
  const ModelConfig& m = w.model;
  const std::string ep = "--expert-model-parallel-size (" + std::to_string(l.expert) + ")";
  if (!m.moe.enabled()) {
    if (l.expert != 1) errors.push_back(ep + " needs --num-experts");
    return;
  }
  if (l.expert < 1 || m.moe.num_experts % l.expert)
    errors.push_back("--num-experts (" + std::to_string(m.moe.num_experts) +
                     ") must be divisible by " + ep);
  if (l.expert < 1 || l.data % l.expert)
    errors.push_back(ep + " must divide the data-parallel size (" + std::to_string(l.data) +
                     "): expert-parallel ranks are taken from the data-parallel group");
  if (l.tensor > 1 && !l.sequence_parallel)
    errors.push_back("--num-experts with --tensor-model-parallel-size " + std::to_string(l.tensor) +
                     " needs --sequence-parallel (Megatron's rule)");
}

// LoRA (--lora-rank): what training builds with it (src/train/lora_rules.cpp).
void lora_violations(const Layout& l, const Workload& w, std::vector<std::string>& errors) {
  if (!w.model.lora.enabled()) return;
  if (data_parallel::shards_gradients(l.sharding))
    errors.push_back(std::string("--lora-rank with --data-parallel-sharding-strategy ") +
                     data_parallel::sharding_strategy_name(l.sharding) + " is not built");
  if (l.zero_bubble) errors.push_back("--lora-rank with --pipeline-schedule zb-h1 is not built");
  if (w.precision == kernels::Precision::kFp16)
    errors.push_back("--lora-rank with --fp16 is not built yet (fp32 or bf16 LoRA)");
  const ModelConfig& m = w.model;
  if (m.group_query_attention && m.lora.targets("linear_qkv") && m.query_groups() % l.tensor)
    errors.push_back("--lora-target-modules linear_qkv needs --num-query-groups divisible by t");
}

}  // namespace

std::vector<std::string> layout_violations(const Layout& l, const Workload& w) {
  std::vector<std::string> errors = validate_model_config(w.model, l.tensor);
  const ModelConfig& m = w.model;
  const std::string layers = "--num-layers (" + std::to_string(m.num_layers) + ")";
  if (m.num_layers % l.pipeline)
    errors.push_back(layers + " must be divisible by --pipeline-model-parallel-size (" +
                     std::to_string(l.pipeline) + ")");
  else if ((m.num_layers / l.pipeline) % l.virtual_stages)
    errors.push_back(layers + " / p must be divisible by v (" + std::to_string(l.virtual_stages) +
                     ")");
  const long unit = (long)l.micro_batch * l.data;
  if (w.global_batch % unit) {
    errors.push_back("--global-batch-size (" + std::to_string(w.global_batch) +
                     ") must be divisible by --micro-batch-size x d (" + std::to_string(unit) +
                     ")");
    return errors;
  }
  const std::string strategy = data_parallel::sharding_strategy_name(l.sharding);
  // The shards are over the d x c ranks holding the same weights.
  if (l.distributed_optimizer() && l.replicas() < 2)
    errors.push_back("--data-parallel-sharding-strategy " + strategy +
                     " needs d x c >= 2 to shard anything");
  // Training reduce-scatters each micro-batch's gradients as its backward ends; ZB-H1 defers
  // weight gradients past later backwards (src/train's rule, the same words).
  if (data_parallel::shards_gradients(l.sharding) && l.zero_bubble)
    errors.push_back("--data-parallel-sharding-strategy " + strategy +
                     " reduce-scatters each micro-batch's gradients when its backward ends; "
                     "--pipeline-schedule zb-h1 computes weight gradients after later backwards");
  if (l.sequence_parallel && l.tensor < 2)
    errors.push_back("--sequence-parallel needs t >= 2 (it splits the sequence over t)");
  if (l.sequence_parallel && (long)l.micro_batch * m.seq_length % l.tensor)
    errors.push_back("--sequence-parallel needs --micro-batch-size x --seq-length divisible by t");
  if (l.sequence_parallel && w.precision != kernels::Precision::kFp32 && m.hidden_size % 2)
    errors.push_back("--sequence-parallel with --bf16 needs an even --hidden-size");
  if (l.zero_bubble && l.pipeline < 2)
    errors.push_back("--pipeline-schedule zb-h1 needs p >= 2 (it fills a pipeline's bubble)");
  moe_violations(l, w, errors);
  lora_violations(l, w, errors);
  context_parallel::check_context_parallel(m, l.tensor, l.context, l.cp_comm_type, errors);
  pipeline_parallel::ScheduleConfig s{l.schedule(), l.pipeline, l.virtual_stages,
                                      l.microbatches(w.global_batch)};
  for (const std::string& e : pipeline_parallel::validate_schedule(s)) errors.push_back(e);
  return errors;
}

}  // namespace trident::planner
