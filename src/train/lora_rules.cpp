#include "train/lora_rules.h"

#include "train/training_config.h"

namespace trident::train {

namespace {
// Grouped-query attention: the fused q|kv projection (no biases) with its key/value rows
// split over t, as the adapters' B follows them.
void check_attention(const TrainingConfig& c, std::vector<std::string>& errors) {
  const ModelConfig& m = c.model;
  if (!m.group_query_attention || !m.lora.targets("linear_qkv")) return;
  if (m.qkv_bias())
    errors.push_back(
        "--lora-target-modules linear_qkv with --add-qkv-bias (separate q and kv products) "
        "is not implemented in trident yet");
  if (m.query_groups() % c.tensor_model_parallel_size != 0)
    errors.push_back(
        "--lora-target-modules linear_qkv needs --num-query-groups divisible by "
        "--tensor-model-parallel-size (replicated key/value rows are not built with LoRA)");
}
}  // namespace

void check_lora(const TrainingConfig& c, std::vector<std::string>& errors) {
  if (!c.model.lora.enabled()) return;
  auto refuse = [&](bool bad, const std::string& what) {
    if (bad) errors.push_back("--lora-rank with " + what + " is not implemented in trident yet");
  };
  refuse(c.model.moe.enabled(), "--num-experts (MoE layers)");
  refuse(c.fp16, "--fp16 (LoRA runs in fp32 or --bf16)");
  refuse(data_parallel::shards_gradients(c.sharding_strategy()),
         "--data-parallel-sharding-strategy optim_grads / optim_grads_params (ZeRO-2 / 3)");
  refuse(c.pipeline_schedule == "zb-h1", "--pipeline-schedule zb-h1");
  check_attention(c, errors);
}

}  // namespace trident::train
