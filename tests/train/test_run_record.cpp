// The run settings a checkpoint records: the learning-rate schedule as the run uses it, in
// samples (iterations x global batch, Megatron's conversion), worked out by hand here.
#include <gtest/gtest.h>

#include "train/run_record.h"

namespace trident::train {
namespace {

nlohmann::ordered_json setting(const TrainingConfig& c, const std::string& key) {
  for (const checkpoint::RunSetting& s : run_record(c).settings)
    if (s.key == key) return s.value;
  ADD_FAILURE() << key << " is not recorded";
  return nullptr;
}

TrainingConfig iteration_run() {
  TrainingConfig c;
  c.mock_data = true, c.micro_batch_size = 2, c.global_batch_size = 8;
  c.train_iters = 10, c.lr_warmup_iters = 2;
  return c;
}

TEST(RunRecord, TheScheduleIsRecordedInSamplesAsTheRunUsesIt) {
  TrainingConfig c = iteration_run();
  EXPECT_EQ(setting(c, "lr_schedule_warmup_samples"), 16.0);  // 2 x 8
  EXPECT_EQ(setting(c, "lr_schedule_decay_samples"), 80);     // the training length, 10 x 8
  // The case: a longer run moves a decay that defaulted to the training length...
  TrainingConfig longer = c;
  longer.train_iters = 20;
  EXPECT_EQ(setting(longer, "lr_schedule_decay_samples"), 160);
  // ...but not one given explicitly, however it was given.
  c.lr_decay_iters = 10, longer.lr_decay_iters = 10;
  EXPECT_EQ(setting(longer, "lr_schedule_decay_samples"), setting(c, "lr_schedule_decay_samples"));
  TrainingConfig samples;
  samples.mock_data = true, samples.micro_batch_size = 2, samples.global_batch_size = 8;
  samples.train_samples = 160, samples.lr_warmup_samples = 16, samples.lr_decay_samples = 80;
  for (const char* key : {"lr_schedule_warmup_samples", "lr_schedule_decay_samples"})
    EXPECT_EQ(setting(samples, key), setting(c, key)) << key;
  // A warm-up fraction of the decay: 0.25 x 80.
  samples.lr_warmup_samples = 0, samples.lr_warmup_fraction = 0.25;
  EXPECT_EQ(setting(samples, "lr_schedule_warmup_samples"), 20.0);
}

TEST(RunRecord, ScheduleSettingsAreTheOverridablePart) {
  std::vector<std::string> keys;
  for (const checkpoint::RunSetting& s : lr_schedule_settings(iteration_run()))
    keys.push_back(s.key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"lr", "min_lr", "lr_decay_style",
                                      "lr_schedule_warmup_samples", "lr_schedule_decay_samples"}));
}

TEST(RunRecord, WsdRecordsItsAnnealingInSamples) {
  TrainingConfig c = iteration_run();
  for (const checkpoint::RunSetting& s : run_record(c).settings)
    EXPECT_EQ(s.key.find("wsd"), std::string::npos) << "cosine records no WSD setting";
  c.lr_decay_style = "WSD", c.lr_wsd_decay_iters = 3;
  EXPECT_EQ(setting(c, "lr_wsd_decay_style"), "exponential");  // Megatron's default
  EXPECT_EQ(setting(c, "lr_schedule_wsd_decay_samples"), 24);  // 3 x 8
  TrainingConfig samples = c;
  samples.train_iters = 0, samples.lr_warmup_iters = 0, samples.lr_wsd_decay_iters = 0;
  samples.train_samples = 80, samples.lr_warmup_samples = 16, samples.lr_wsd_decay_samples = 24;
  samples.lr_wsd_decay_style = "exponential";
  for (const checkpoint::RunSetting& s : run_record(c).settings)
    EXPECT_EQ(setting(samples, s.key), s.value) << s.key << ": the same schedule in samples";
  samples.lr_wsd_decay_style = "minus_sqrt";
  EXPECT_EQ(setting(samples, "lr_wsd_decay_style"), "minus_sqrt");
}

}  // namespace
}  // namespace trident::train
