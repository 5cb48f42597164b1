// TrainingConfig -> the engine's RankLayout and RankModelOptions: the one place training's
// flags become the layout that training, checkpoints and the planner share.
#include "context_parallel/rules.h"
#include "train/training_config.h"

namespace trident::train {

data_parallel::ShardingStrategy TrainingConfig::sharding_strategy() const {
  if (data_parallel_sharding_strategy.empty())
    return use_distributed_optimizer ? data_parallel::ShardingStrategy::kOptim
                                     : data_parallel::ShardingStrategy::kNoShard;
  // An unknown name is refused by the rules (check_sharding).
  return data_parallel::parse_sharding_strategy(data_parallel_sharding_strategy)
      .value_or(data_parallel::ShardingStrategy::kNoShard);
}

engine::RankLayout TrainingConfig::rank_layout() const {
  engine::RankLayout l;
  l.model = model;
  l.tensor = tensor_model_parallel_size;
  l.pipeline = pipeline_model_parallel_size;
  // The weights are replicated over the d x c ranks of Megatron's data-parallel group with
  // context parallel: gradients, the distributed optimizer and ZeRO work over all of them.
  l.data = data_parallel_size() * context_parallel_size;
  l.context = context_parallel_size;
  l.cp_comm_type = context_parallel::parse_cp_comm_type(cp_comm_type)
                       .value_or(context_parallel::CpCommType::kP2p);
  l.virtual_stages = virtual_stages();
  l.split = layers_per_virtual_stage();
  l.split_by_cost =
      pipeline_split == "balanced" ||
      (pipeline_split.empty() && decoder_first_pipeline_num_layers == 0 &&
       decoder_last_pipeline_num_layers == 0 && !account_for_embedding_in_pipeline_split &&
       !account_for_loss_in_pipeline_split);
  l.micro_batch = micro_batch_size;
  l.precision = precision();
  l.dropout = dropout();
  l.recompute_granularity = recompute_granularity;
  l.recompute_method = recompute_method;
  l.recompute_num_layers = recompute_num_layers;
  l.distributed_optimizer = distributed_optimizer();
  l.shard_gradients = data_parallel::shards_gradients(sharding_strategy());
  l.shard_parameters = data_parallel::shards_parameters(sharding_strategy());
  l.ddp_bucket_size = ddp_bucket_size;
  l.sequence_parallel = sequence_parallel_active();
  l.logits_chunk_rows = logits_chunk_rows;
  // One load-balancing type (train/moe_rules.cpp): aux_loss with its coefficient, or none.
  const bool aux_loss =
      moe_router_load_balancing_type.size() == 1 && moe_router_load_balancing_type[0] == "aux_loss";
  l.moe_aux_loss_coeff = aux_loss && !moe_aux_loss_coeff.empty() ? moe_aux_loss_coeff[0] : 0.0;
  l.moe_z_loss_coeff = moe_z_loss_coeff;
  l.expert_parallel = model.moe.enabled() ? expert_model_parallel_size : 1;
  l.expert_tensor_parallel = model.moe.enabled() ? expert_tensor_parallel() : 0;
  l.packed = packed;
  return l;
}

engine::RankModelOptions TrainingConfig::rank_model_options() const {
  engine::RankModelOptions o;
  o.layout = rank_layout();
  o.schedule = pipeline_schedule_of(*this);
  const long unit = (long)micro_batch_size * data_parallel_size();
  for (long gbs : batch_schedule().sizes())
    o.schedules.push_back(pipeline_schedule_of(*this, (int)(gbs / unit)));
  o.reduce.bucket_floats = ddp_bucket_size;  // 0: Megatron's default for d
  o.reduce.overlap = overlap_grad_reduce;
  o.reduce.distributed_optimizer = distributed_optimizer();
  o.reduce.shard_gradients = o.layout.shard_gradients;
  o.reduce.overlap_param_gather = overlap_param_gather;
  o.adam = adam;
  if (fp16)
    o.scaler = loss_scale > 0 ? optim::LossScaler::constant(loss_scale)
                              : optim::LossScaler::dynamic(initial_loss_scale, min_loss_scale,
                                                           loss_scale_window, hysteresis);
  o.seed = seed;
  o.load_hf = load_hf;
  o.async_save = async_save && !save.empty();
  return o;
}

}  // namespace trident::train
