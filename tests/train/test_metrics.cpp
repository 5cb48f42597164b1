// The log lines' number format: Megatron's %E (capital E) in the loss of the iteration,
// validation and test lines alike; values worked by hand (exp(0) = 1, exp(2.5) = 12.18249...).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train/metrics.h"

using namespace trident::train;

TEST(LogLines, TestAndValidationLossesUseMegatronsCapitalE) {
  EXPECT_EQ(format_test_line(0.0),
            " test loss at the end | lm loss value: 0.000000E+00 | lm loss PPL: 1.000000E+00 |");
  EXPECT_EQ(format_test_line(2.5),
            " test loss at the end | lm loss value: 2.500000E+00 | lm loss PPL: 1.218249E+01 |");
  ValidationStats v;
  v.iteration = 50;
  v.loss = 2.5;
  EXPECT_EQ(format_validation_line(v),
            " validation loss at iteration 50 | lm loss value: 2.500000E+00 | lm loss PPL: "
            "1.218249E+01 |");
}

// fp16: a line whose interval had no step that updated the weights says so in words, with
// the loss scale; a line with some steps taken does not.
TEST(LogLines, AnIntervalOfSkippedStepsSaysSo) {
  IterationStats s;
  s.iteration = 4, s.train_iters = 4, s.loss = NAN, s.grad_norm = NAN;
  s.loss_scale = 1e30, s.skipped_iterations = 4;
  s.interval_iterations = 2, s.interval_skipped = 2;
  const std::string all = format_log_line(s);
  EXPECT_NE(all.find(" all 2 iterations in this interval were skipped (fp16 gradient overflow "
                     "at loss scale 1e+30) |"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("lm loss"), std::string::npos);
  s.interval_iterations = 1, s.interval_skipped = 1;
  EXPECT_NE(format_log_line(s).find(" the iteration in this interval was skipped"),
            std::string::npos);
  s.interval_iterations = 3, s.interval_skipped = 2, s.loss = 2.5, s.grad_norm = 1;
  EXPECT_EQ(format_log_line(s).find("skipped ("), std::string::npos);
  s.loss_scale = 0, s.interval_skipped = 3;  // bf16 and fp32 never skip: nothing said
  EXPECT_EQ(format_log_line(s).find("skipped"), std::string::npos);
}

// MoE: Megatron's load_balancing_loss and z_loss after the loss, only where logged (NaN
// otherwise: a dense run's line is as it was).
TEST(LogLines, MoeRouterLossesFollowTheLossWhenLogged) {
  IterationStats s;
  s.iteration = 2, s.train_iters = 4, s.loss = 2.5, s.grad_norm = 1;
  const std::string dense = format_log_line(s);
  EXPECT_EQ(dense.find("load_balancing_loss"), std::string::npos);
  EXPECT_EQ(dense.find("z_loss"), std::string::npos);
  s.load_balancing_loss = 1.0, s.z_loss = 2.5;
  const std::string moe = format_log_line(s);
  EXPECT_NE(moe.find(" grad norm: 1.000 | load_balancing_loss: 1.000000E+00 | z_loss: "
                     "2.500000E+00 | tokens/s:"),
            std::string::npos)
      << moe;
  s.z_loss = NAN;
  EXPECT_EQ(format_log_line(s).find("z_loss"), std::string::npos);
}

// The experts' load: the line shows the least and most loaded expert of any MoE layer over
// an even share (worked by hand: layer 1 [10, 30, 20] of mean 20 -> 0.5 and 1.5; layer 3
// [16, 24, 20] -> 0.8 and 1.2); the metrics file lists every layer's tokens, and its losses
// only with --moe-per-layer-logging.
TEST(LogLines, ExpertLoadIsTheLeastAndMostLoadedExpertOverAnEvenShare) {
  IterationStats s;
  s.loss = 2.0;
  MoeLayerLog one, three;
  one.layer = 1, one.tokens_per_expert = {10, 30, 20}, one.load_balancing_loss = 1.25;
  three.layer = 3, three.tokens_per_expert = {16, 24, 20}, three.load_balancing_loss = 1.5;
  s.moe_layers = {one, three};
  EXPECT_DOUBLE_EQ(one.min_load(), 0.5);
  EXPECT_DOUBLE_EQ(one.max_load(), 1.5);
  EXPECT_DOUBLE_EQ(three.min_tokens(), 16);
  EXPECT_NE(format_log_line(s).find(" expert load min/max: 0.500/1.500 |"), std::string::npos)
      << format_log_line(s);
  const std::string path = ::testing::TempDir() + "moe_metrics.jsonl";
  for (bool per_layer : {false, true}) {
    s.moe_per_layer_logging = per_layer;
    {
      MetricsWriter w(path);
      w.write(s);
    }
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    ASSERT_EQ(j["moe_layers"].size(), 2u);
    EXPECT_EQ(j["moe_layers"][1]["layer"], 3);
    EXPECT_EQ(j["moe_layers"][1]["tokens_per_expert"], nlohmann::json({16.0, 24.0, 20.0}));
    EXPECT_EQ(j["moe_layers"][1]["max_tokens"], 24.0);
    EXPECT_EQ(j["moe_layers"][0].contains("load_balancing_loss"), per_layer);
    if (per_layer) EXPECT_EQ(j["moe_layers"][0]["load_balancing_loss"], 1.25);
  }
  EXPECT_EQ(format_log_line(IterationStats{}).find("expert load"), std::string::npos);
}
