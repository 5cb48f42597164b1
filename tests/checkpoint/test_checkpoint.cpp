// checkpoint::save and load on one rank: what was saved comes back exactly (weights, both
// Adam moments, optimizer steps, position in the run) into a model initialised otherwise;
// weights-only loads leave the optimizer fresh; a damaged file or another model is refused,
// naming the file, before the model changes. Sharded over two data-parallel ranks (threads):
// a save reads nothing of the weights outside each rank's shard, and a load gives every rank
// the whole weights and its shard of the moments.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_test_util.h"
#include "tensor_parallel/thread_group.h"

namespace trident::checkpoint {
namespace {

using testing::OneRank;
using testing::ScratchDir;

// Moments no initialisation produces: each element's own index.
void fill_moments(engine::RankModel& m) {
  optim::AdamW& opt = *m.optimizers[0];
  for (size_t i = 0; i < opt.exp_avg().size(); ++i)
    opt.exp_avg()[i] = 0.5f * (float)i, opt.exp_avg_sq()[i] = 0.25f + (float)i;
  opt.set_steps_taken(17);
}

std::vector<float> values(const engine::RankModel& m) {
  const Parameters& p = m.chunks[0]->parameters();
  return std::vector<float>(p.values(), p.values() + p.size());
}

RunRecord record_of(const engine::RankModelOptions& o) {
  return {o.layout, o.seed, {{"seed", "--seed", o.seed}}, 4};
}

TEST(Checkpoint, ResumeRestoresWeightsMomentsAndPosition) {
  OneRank one;
  ScratchDir dir("trident-ckpt-resume");
  engine::RankModelOptions saved_options = testing::tiny_model_options(1);
  engine::RankModel saved = one.build(saved_options);
  fill_moments(saved);
  std::ostringstream log;
  save(dir.str(), record_of(saved_options), saved, {7, 28, 2, 24}, one.rank, log);
  EXPECT_TRUE(has_checkpoint(dir.str()));
  EXPECT_EQ(latest_checkpoint(dir.str()), (dir.path / "iter_0000007").string());

  engine::RankModel loaded = one.build(testing::tiny_model_options(2));  // other weights
  ASSERT_NE(values(loaded), values(saved));
  TrainingState st =
      load(dir.str(), record_of(saved_options), loaded, one.rank, log, LoadMode::kResume);
  EXPECT_EQ(values(loaded), values(saved));
  EXPECT_EQ(loaded.optimizers[0]->exp_avg(), saved.optimizers[0]->exp_avg());
  EXPECT_EQ(loaded.optimizers[0]->exp_avg_sq(), saved.optimizers[0]->exp_avg_sq());
  EXPECT_EQ(loaded.optimizers[0]->steps_taken(), 17);
  EXPECT_EQ(st.iteration, 7);
  EXPECT_EQ(st.consumed_samples, 28);
  EXPECT_EQ(st.evaluations, 2);
  EXPECT_EQ(st.lr_schedule_samples, 24);
}

TEST(Checkpoint, WeightsOnlyKeepsAFreshOptimizer) {
  OneRank one;
  ScratchDir dir("trident-ckpt-weights");
  engine::RankModelOptions o = testing::tiny_model_options(1);
  engine::RankModel saved = one.build(o);
  fill_moments(saved);
  std::ostringstream log;
  save(dir.str(), record_of(o), saved, {3, 12, 0, 12}, one.rank, log);
  engine::RankModel loaded = one.build(testing::tiny_model_options(2));
  TrainingState st = load(dir.str(), record_of(o), loaded, one.rank, log, LoadMode::kWeightsOnly);
  EXPECT_EQ(values(loaded), values(saved));
  EXPECT_EQ(loaded.optimizers[0]->steps_taken(), 0);
  for (float x : loaded.optimizers[0]->exp_avg()) ASSERT_EQ(x, 0.f);
  EXPECT_EQ(st.iteration, 0);
}

// Damage, then a load that must fail with `expected` in its message and leave the model as
// it was.
void expect_refused(const std::string& dir, const RunRecord& run, const std::string& expected) {
  OneRank one;
  engine::RankModel target = one.build(testing::tiny_model_options(5));
  const std::vector<float> before = values(target);
  std::ostringstream log;
  try {
    load(dir, run, target, one.rank, log, LoadMode::kResume);
    ADD_FAILURE() << "the load succeeded; expected: " << expected;
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  EXPECT_EQ(values(target), before) << "a refused load changed the model";
}

TEST(Checkpoint, RefusesDamageAndMismatchBeforeChangingTheModel) {
  OneRank one;
  ScratchDir dir("trident-ckpt-damage");
  engine::RankModelOptions o = testing::tiny_model_options(1);
  engine::RankModel saved = one.build(o);
  std::ostringstream log;
  save(dir.str(), record_of(o), saved, {1, 4, 0, 4}, one.rank, log);
  const std::string file = (dir.path / "iter_0000001" / "model_tp0_pp0.safetensors").string();

  RunRecord other_seed = record_of(o);
  other_seed.settings = {{"seed", "--seed", 99}};
  expect_refused(dir.str(), other_seed, "--seed: checkpoint 1, this run 99");
  RunRecord wider = record_of(o);
  wider.layout.model.hidden_size = 64;
  expect_refused(dir.str(), wider, "does not match this run's");

  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 8);
  expect_refused(dir.str(), record_of(o), file + ": ");
  expect_refused(dir.str(), record_of(o), "(truncated?)");
  std::filesystem::remove(file);
  expect_refused(dir.str(), record_of(o), file + ": missing");
}

TEST(Checkpoint, OverrideResumesWithTheDifferencesAsWarnings) {
  OneRank one;
  ScratchDir dir("trident-ckpt-override");
  engine::RankModelOptions o = testing::tiny_model_options(1);
  engine::RankModel saved = one.build(o);
  std::ostringstream log;
  save(dir.str(), record_of(o), saved, {1, 4, 0, 4}, one.rank, log);
  RunRecord other = record_of(o);
  other.settings = {{"seed", "--seed", 99}};
  engine::RankModel loaded = one.build(testing::tiny_model_options(2));
  load(dir.str(), other, loaded, one.rank, log, LoadMode::kResumeOverride);
  EXPECT_NE(log.str().find("warning: --override-checkpoint-config: --seed: checkpoint 1, this "
                           "run 99"),
            std::string::npos)
      << log.str();
  EXPECT_EQ(values(loaded), values(saved));
}

// Two data-parallel ranks with the distributed optimizer, each a thread: body(r, model, rank).
void run_two_data_ranks(
    const engine::RankModelOptions& o,
    const std::function<void(int, engine::RankModel&, const engine::RankContext&)>& body) {
  tensor_parallel_test::SharedGroup world(2), data(2);
  distributed::ProcessGrid grid(2, 1, 1);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      distributed::ProcessGroups g = distributed::make_single_rank_groups();
      g.world = std::make_unique<tensor_parallel_test::ThreadCommunicator>(world, r);
      g.data = std::make_unique<tensor_parallel_test::ThreadCommunicator>(data, r);
      engine::RankContext rank{r, &grid, &g, {"local", "local"}};
      try {
        engine::RankModel m = engine::build_rank_model(o, *g.tensor, *g.pipeline, *g.data);
        body(r, m, rank);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        world.fail(), data.fail();
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
}

engine::RankModelOptions sharded_options(std::uint64_t seed) {
  engine::RankModelOptions o = testing::tiny_model_options(seed);
  o.layout.data = 2;
  o.layout.distributed_optimizer = o.reduce.distributed_optimizer = true;
  return o;
}

// Under ZeRO-3 a rank's weights outside its shard are not there: NaN here. The one-process
// load of the sharded save has the initialisation's weights and the moments each rank held.
TEST(Checkpoint, ShardedSaveReadsOnlyEachRanksShard) {
  ScratchDir dir("trident-ckpt-sharded-save");
  const engine::RankModelOptions o = sharded_options(1);
  OneRank one;
  const std::vector<float> initial = values(one.build(testing::tiny_model_options(1)));
  std::vector<float> m(initial.size()), v(initial.size());
  run_two_data_ranks(o, [&](int, engine::RankModel& model, const engine::RankContext& rank) {
    optim::AdamW& opt = *model.optimizers[0];
    float* w = model.chunks[0]->parameters().values();
    const long size = model.chunks[0]->parameters().size();
    std::fill(w, w + opt.range_begin(), std::nanf(""));
    std::fill(w + opt.range_end(), w + size, std::nanf(""));
    for (long g = opt.range_begin(); g < opt.range_end(); ++g) {
      opt.exp_avg()[g - opt.range_begin()] = 0.5f * (float)g;
      opt.exp_avg_sq()[g - opt.range_begin()] = 0.25f + (float)g;
      if (g < (long)m.size()) m[g] = 0.5f * (float)g, v[g] = 0.25f + (float)g;
    }
    std::ostringstream log;
    save(dir.str(), record_of(o), model, {3, 12, 0, 12}, rank, log);
  });
  engine::RankModelOptions whole = testing::tiny_model_options(2);
  engine::RankModel loaded = one.build(whole);
  std::ostringstream log;
  load(dir.str(), record_of(testing::tiny_model_options(1)), loaded, one.rank, log,
       LoadMode::kResume);
  EXPECT_EQ(values(loaded), initial);
  EXPECT_EQ(std::vector<float>(loaded.optimizers[0]->exp_avg().begin(),
                               loaded.optimizers[0]->exp_avg().end()),
            m);
  EXPECT_EQ(std::vector<float>(loaded.optimizers[0]->exp_avg_sq().begin(),
                               loaded.optimizers[0]->exp_avg_sq().end()),
            v);
}

// A one-process checkpoint loaded by two data-parallel ranks: each places its shard, the
// weights are all-gathered (every rank has them whole), the moments are each rank's range.
TEST(Checkpoint, ShardedLoadGivesEveryRankTheWeightsAndItsMoments) {
  ScratchDir dir("trident-ckpt-sharded-load");
  OneRank one;
  const engine::RankModelOptions o = testing::tiny_model_options(1);
  engine::RankModel saved = one.build(o);
  fill_moments(saved);
  std::ostringstream log;
  save(dir.str(), record_of(o), saved, {7, 28, 2, 24}, one.rank, log);
  const std::vector<float> weights = values(saved);
  const FirstTouchVector<float>& m = saved.optimizers[0]->exp_avg();
  run_two_data_ranks(
      sharded_options(2), [&](int, engine::RankModel& model, const engine::RankContext& rank) {
        std::ostringstream rank_log;
        load(dir.str(), record_of(o), model, rank, rank_log, LoadMode::kResume);
        optim::AdamW& opt = *model.optimizers[0];
        std::vector<float> got = values(model);
        got.resize(weights.size());  // the rest is the distributed optimizer's padding: zero
        EXPECT_EQ(got, weights);
        for (long g = opt.range_begin(); g < std::min<long>(opt.range_end(), (long)m.size()); ++g)
          ASSERT_EQ(opt.exp_avg()[g - opt.range_begin()], m[g]) << g;
        EXPECT_EQ(opt.steps_taken(), 17);
      });
}

}  // namespace
}  // namespace trident::checkpoint
