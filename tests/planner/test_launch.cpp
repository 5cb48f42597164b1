// `trident plan --launch`: the command carries every flag of the layout and the workload,
// trident train reads it back to the same layout, and the launch runs end to end.
#include <gtest/gtest.h>

#include <array>

#include "cli/train_args.h"
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
  Layout l{2, 2, 2, 1, 1, Recompute::kNone, false};
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

TEST(PlannerLaunch, TrainReadsBackTheSameLayout) {
  const Workload w = workload();
  for (Layout l : {Layout{2, 2, 2, 2, 2, Recompute::kFull, true, true},
                   Layout{1, 4, 1, 1, 1, Recompute::kSelective, false, false, true},
                   Layout{4, 1, 2, 4, 1, Recompute::kNone, true}}) {
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
    EXPECT_EQ(config.virtual_stages(), l.virtual_stages);
    EXPECT_EQ(config.micro_batch_size, l.micro_batch);
    EXPECT_EQ(config.global_batch_size, w.global_batch);
    EXPECT_EQ(config.use_distributed_optimizer, l.distributed_optimizer);
    EXPECT_EQ(config.sequence_parallel, l.sequence_parallel);
    EXPECT_EQ(config.pipeline_schedule, l.zero_bubble ? "zb-h1" : "");
    EXPECT_EQ(config.recompute_granularity, l.recompute == Recompute::kFull        ? "full"
                                            : l.recompute == Recompute::kSelective ? "selective"
                                                                                   : "");
    EXPECT_EQ(config.model.hidden_size, 256);
    EXPECT_TRUE(config.bf16);
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

}  // namespace
}  // namespace trident::planner
