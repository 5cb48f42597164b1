// `trident plan --launch`: the command carries every flag of the layout and the workload,
// trident train reads it back to the same layout, and the launch runs end to end.
#include <gtest/gtest.h>

#include <array>

#include "cli/train_args.h"
#include "context_parallel/rules.h"
#include "planner/launch.h"
#include "test_util.h"

namespace trident::planner {
namespace {

Workload workload() {
  Workload w;
  w.model.num_layers = 8, w.model.hidden_size = 256, w.model.num_attention_heads = 8;
  w.model.seq_length = 64, w.model.vocab_size = 1000;
  w.global_batch = 32;
  w.precision = kernels::Precision::kBf16;
  return w;
}

TEST(PlannerLaunch, MpirunOrSrunWithRootFlag) {
  Layout l{2, 2, 2, 1, 1, Recompute::kNone};
  LaunchContext c{"/bin/trident", {"--mock-data"}, false, true};
  std::vector<std::string> argv = launch_command(l, workload(), c);
  EXPECT_EQ(std::vector<std::string>(argv.begin(), argv.begin() + 6),
            (std::vector<std::string>{"mpirun", "-np", "8", "--allow-run-as-root", "/bin/trident",
                                      "train"}));
  EXPECT_EQ(argv.back(), "--mock-data");
  c.slurm = true;
  argv = launch_command(l, workload(), c);
  EXPECT_EQ(std::vector<std::string>(argv.begin(), argv.begin() + 5),
            (std::vector<std::string>{"srun", "--ntasks", "8", "/bin/trident", "train"}));
}

using data_parallel::ShardingStrategy;

TEST(PlannerLaunch, TrainReadsBackTheSameLayout) {
  const Workload w = workload();
  for (Layout l :
       {Layout{2, 2, 2, 2, 2, Recompute::kFull, ShardingStrategy::kOptim, true},
        Layout{1, 4, 1, 1, 1, Recompute::kSelective, ShardingStrategy::kNoShard, false, true},
        Layout{4, 1, 2, 4, 1, Recompute::kNone, ShardingStrategy::kOptim},
        Layout{1, 2, 4, 1, 1, Recompute::kNone, ShardingStrategy::kOptimGrads},
        Layout{2, 1, 4, 2, 1, Recompute::kFull, ShardingStrategy::kOptimGrads, true},
        Layout{1, 2, 4, 1, 2, Recompute::kSelective, ShardingStrategy::kOptimGradsParams},
        Layout{1, 1, 8, 1, 1, Recompute::kNone, ShardingStrategy::kNoShard},
        Layout{2, 2, 1, 1, 1, Recompute::kNone, ShardingStrategy::kOptim, true, false, 1, 2},
        Layout{1, 1, 2, 2, 1, Recompute::kFull, ShardingStrategy::kNoShard, false, false, 1, 4,
               context_parallel::CpCommType::kA2a}}) {
    LaunchContext c{"trident", {"--mock-data"}, false, false};
    std::vector<std::string> argv = launch_command(l, w, c);
    std::vector<std::string> args(argv.begin() + 5, argv.end());  // after "trident train"
    train::TrainingConfig config;
    config.world_size = (int)l.devices();
    int code = -1;
    ASSERT_TRUE(cli::parse_train_args(args, &config, &code)) << shell_line(argv);
    EXPECT_EQ(config.tensor_model_parallel_size, l.tensor);
    EXPECT_EQ(config.pipeline_model_parallel_size, l.pipeline);
    EXPECT_EQ(config.data_parallel_size(), l.data);
    EXPECT_EQ(config.context_parallel_size, l.context);
    EXPECT_EQ(config.cp_comm_type, context_parallel::cp_comm_type_name(l.cp_comm_type));
    EXPECT_EQ(config.virtual_stages(), l.virtual_stages);
    EXPECT_EQ(config.micro_batch_size, l.micro_batch);
    EXPECT_EQ(config.global_batch_size, w.global_batch);
    EXPECT_EQ(config.sharding_strategy(), l.sharding) << shell_line(argv);
    EXPECT_EQ(config.distributed_optimizer(), l.distributed_optimizer());
    // The overlapped all-gather of the updated values the planner's time assumes.
    EXPECT_EQ(config.overlap_param_gather, l.distributed_optimizer());
    EXPECT_EQ(config.sequence_parallel, l.sequence_parallel);
    EXPECT_EQ(config.pipeline_schedule, l.zero_bubble ? "zb-h1" : "");
    EXPECT_EQ(config.recompute_granularity, l.recompute == Recompute::kFull        ? "full"
                                            : l.recompute == Recompute::kSelective ? "selective"
                                                                                   : "");
    EXPECT_EQ(config.model.hidden_size, 256);
    EXPECT_TRUE(config.bf16);
  }
}

// An MoE plan's line carries the MoE shape (the per-layer pattern as a list) and EP, and
// train reads back the same model and layout.
TEST(PlannerLaunch, TrainReadsBackTheSameMoeModelAndExpertParallelSize) {
  Workload w = workload();
  w.precision = kernels::Precision::kFp32;
  MoeConfig& moe = w.model.moe;
  moe.num_experts = 8, moe.router_topk = 3, moe.ffn_hidden_size = 96;
  moe.router_pre_softmax = true;
  moe.layer_pattern = {true, false, true, true, false, true, true, true};
  Layout l{1, 1, 4, 1, 1, Recompute::kNone};
  l.expert = 2;
  const std::vector<std::string> argv = launch_command(l, w, {"trident", {"--mock-data"}});
  std::vector<std::string> args(argv.begin() + 5, argv.end());
  train::TrainingConfig config;
  config.world_size = 4;
  int code = -1;
  ASSERT_TRUE(cli::parse_train_args(args, &config, &code)) << shell_line(argv);
  EXPECT_EQ(config.expert_model_parallel_size, 2) << shell_line(argv);
  EXPECT_EQ(config.model.moe.num_experts, 8);
  EXPECT_EQ(config.model.moe.router_topk, 3);
  EXPECT_EQ(config.model.moe.ffn_hidden_size, 96);
  EXPECT_TRUE(config.model.moe.router_pre_softmax);
  EXPECT_EQ(config.model.moe.layer_pattern, moe.layer_pattern);
}

// ZeRO-1 keeps Megatron's --use-distributed-optimizer; ZeRO-2 and ZeRO-3 are named by
// Megatron-FSDP's --data-parallel-sharding-strategy.
TEST(PlannerLaunch, TheStrategyIsNamedByMegatronsFlags) {
  auto flags_of = [](ShardingStrategy s) {
    const Layout l{1, 1, 4, 1, 1, Recompute::kNone, s};
    const std::vector<std::string> argv = launch_command(l, workload(), {"trident", {}});
    return shell_line(argv);
  };
  const std::string none = flags_of(ShardingStrategy::kNoShard);
  EXPECT_EQ(none.find("--use-distributed-optimizer"), std::string::npos) << none;
  EXPECT_EQ(none.find("--data-parallel-sharding-strategy"), std::string::npos) << none;
  EXPECT_NE(flags_of(ShardingStrategy::kOptim).find("--use-distributed-optimizer"),
            std::string::npos);
  EXPECT_NE(flags_of(ShardingStrategy::kOptimGrads)
                .find("--data-parallel-sharding-strategy optim_grads --overlap-param-gather"),
            std::string::npos);
  EXPECT_NE(flags_of(ShardingStrategy::kOptimGradsParams)
                .find("--data-parallel-sharding-strategy optim_grads_params"),
            std::string::npos);
}

// The architecture options of today's open models (as --load-hf reads them from config.json)
// come back from the launch line: llama3 scaling with other factors, linear scaling, a window,
// an explicit head width, Qwen's options and epsilon.
TEST(PlannerLaunch, TrainReadsBackTheSameModel) {
  Workload llama3 = workload();
  ModelConfig& m = llama3.model;
  m.normalization = "RMSNorm", m.position_embedding_type = "rope", m.swiglu = true;
  m.group_query_attention = true, m.num_query_groups = 2, m.ffn_hidden_size = 640;
  m.untie_embeddings_and_output_weights = true, m.disable_bias_linear = true;
  m.rotary_base = 500000.f, m.layernorm_epsilon = 1e-6f, m.kv_channels = 48;
  m.use_rope_scaling = true, m.rope_scaling_type = "llama3", m.rope_scaling_factor = 32.f;
  m.rope_low_freq_factor = 0.5f, m.rope_high_freq_factor = 3.25f;
  m.rope_original_max_positions = 4096;
  Workload linear = llama3;
  linear.model.rope_scaling_type = "linear", linear.model.rope_scaling_factor = 2.5f;
  linear.model.window_size = 21, linear.model.add_qkv_bias = true;
  Workload qwen3 = llama3;
  qwen3.model.use_rope_scaling = false, qwen3.model.qk_layernorm = true;
  qwen3.model.rotary_base = 1e6f, qwen3.model.rope_scaling_factor = 8.f;
  qwen3.model.rope_low_freq_factor = 1.f, qwen3.model.rope_high_freq_factor = 4.f;
  qwen3.model.rope_original_max_positions = 8192;
  for (const Workload& w : {llama3, linear, qwen3}) {
    const Layout l{2, 1, 1, 1, 1, Recompute::kNone};
    const std::vector<std::string> argv = launch_command(l, w, {"trident", {"--mock-data"}});
    std::vector<std::string> args(argv.begin() + 5, argv.end());
    train::TrainingConfig config;
    config.world_size = 2;
    int code = -1;
    ASSERT_TRUE(cli::parse_train_args(args, &config, &code)) << shell_line(argv);
    const ModelConfig& want = w.model;
    const ModelConfig& got = config.model;
    SCOPED_TRACE(shell_line(argv));
    EXPECT_EQ(got.normalization, want.normalization);
    EXPECT_EQ(got.position_embedding_type, want.position_embedding_type);
    EXPECT_EQ(got.rotary_base, want.rotary_base);
    EXPECT_EQ(got.rotary_percent, want.rotary_percent);
    EXPECT_EQ(got.layernorm_epsilon, want.layernorm_epsilon);
    EXPECT_EQ(got.swiglu, want.swiglu);
    EXPECT_EQ(got.ffn(), want.ffn());
    EXPECT_EQ(got.query_groups(), want.query_groups());
    EXPECT_EQ(got.tied_output(), want.tied_output());
    EXPECT_EQ(got.disable_bias_linear, want.disable_bias_linear);
    EXPECT_EQ(got.add_qkv_bias, want.add_qkv_bias);
    EXPECT_EQ(got.qk_layernorm, want.qk_layernorm);
    EXPECT_EQ(got.head_dim(), want.head_dim());
    EXPECT_EQ(got.use_rope_scaling, want.use_rope_scaling);
    EXPECT_EQ(got.rope_scaling_type, want.rope_scaling_type);
    EXPECT_EQ(got.rope_scaling_factor, want.rope_scaling_factor);
    if (want.use_rope_scaling && want.rope_scaling_type == "llama3") {  // linear has none
      EXPECT_EQ(got.rope_low_freq_factor, want.rope_low_freq_factor);
      EXPECT_EQ(got.rope_high_freq_factor, want.rope_high_freq_factor);
      EXPECT_EQ(got.rope_original_max_positions, want.rope_original_max_positions);
    }
    EXPECT_EQ(got.window_size, want.window_size);
  }
}

TEST(PlannerLaunch, ShellLineQuotesWhatNeedsIt) {
  EXPECT_EQ(shell_line({"a", "b c", "it's", "--x=1"}), "a 'b c' 'it'\\''s' --x=1");
}

TEST(PlanCommand, LaunchRunsTheBestPlanHere) {
  std::string cmd = std::string(TRIDENT_BINARY) +
                    " plan --cluster " TRIDENT_SOURCE_DIR
                    "/clusters/this-machine.toml --num-devices 1 --num-layers 2 "
                    "--hidden-size 64 --num-attention-heads 2 --seq-length 32 --vocab-size 500 "
                    "--global-batch-size 4 --launch -- --mock-data --train-iters 2 "
                    "--log-interval 1 2>&1";
  const auto [exit_code, out] = trident::testing::run_shell(cmd);
  EXPECT_EQ(exit_code, 0) << out;
  EXPECT_NE(out.find("launch: mpirun -np 1"), std::string::npos) << out;
  EXPECT_NE(out.find("iteration        2/       2"), std::string::npos) << out;
}

// ZeRO-3 launches and trains: fixed on both ranks here, the plan runs as d = 2 with the
// weights sharded.
TEST(PlanCommand, LaunchRunsZeroThree) {
  std::string cmd = std::string(TRIDENT_BINARY) +
                    " plan --cluster " TRIDENT_SOURCE_DIR
                    "/clusters/this-machine.toml --num-devices 2 --num-layers 2 "
                    "--hidden-size 64 --num-attention-heads 2 --seq-length 32 --vocab-size 500 "
                    "--global-batch-size 4 --data-parallel-sharding-strategy optim_grads_params "
                    "--launch -- --mock-data --train-iters 2 --log-interval 1 2>&1";
  const auto [exit_code, out] = trident::testing::run_shell(cmd);
  EXPECT_EQ(exit_code, 0) << out;
  EXPECT_NE(out.find("launch: mpirun -np 2"), std::string::npos) << out;
  EXPECT_NE(out.find("--data-parallel-sharding-strategy optim_grads_params"), std::string::npos)
      << out;
  EXPECT_NE(out.find("iteration        2/       2"), std::string::npos) << out;
}

}  // namespace
}  // namespace trident::planner
