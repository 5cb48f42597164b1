// AsyncSaver on one rank: the checkpoint holds the state at the save, whatever the model does
// while it is written; a second save waits for the first; the end of the run (finish or the
// destructor) waits for the last; a failed write is reported by the next finish, nothing
// committed; the snapshot's buffers are reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "checkpoint/async_save.h"
#include "checkpoint/checkpoint_test_util.h"

namespace trident::checkpoint {
namespace {

using testing::OneRank;
using testing::ScratchDir;

std::vector<float> values(const engine::RankModel& m) {
  const Parameters& p = m.chunks[0]->parameters();
  return std::vector<float>(p.values(), p.values() + p.size());
}

// What training would do after the save: other weights, moments and steps.
void train_on(engine::RankModel& m, float by) {
  Parameters& p = m.chunks[0]->parameters();
  std::for_each(p.values(), p.values() + p.size(), [by](float& x) { x += by; });
  optim::AdamW& opt = *m.optimizers[0];
  for (float& x : opt.exp_avg()) x += by;
  for (float& x : opt.exp_avg_sq()) x += 2 * by;
  opt.set_steps_taken(opt.steps_taken() + 1);
}

RunRecord record_of(const engine::RankModelOptions& o) {
  return {o.layout, o.seed, {{"seed", "--seed", o.seed}}, 4};
}

TEST(AsyncSaver, TheCheckpointIsTheStateAtTheSave) {
  OneRank one;
  ScratchDir dir("trident-async-snapshot");
  const engine::RankModelOptions o = testing::tiny_model_options(1);
  engine::RankModel model = one.build(o);
  train_on(model, 0.5f);
  const std::vector<float> at_save = values(model);
  const auto m_at_save = model.optimizers[0]->exp_avg();  // a copy
  std::ostringstream log;
  AsyncSaver saver;
  saver.save(dir.str(), record_of(o), model, {3, 12, 0, 12}, one.rank, log);
  saver.wait_until_copied();  // as the trainer, before its next optimizer step
  train_on(model, 1.f);       // while it is written
  saver.save(dir.str(), record_of(o), model, {4, 16, 0, 16}, one.rank, log);
  saver.wait_until_copied();
  train_on(model, 1.f);
  saver.finish(one.rank, log);
  EXPECT_EQ(latest_checkpoint(dir.str()), (dir.path / "iter_0000004").string());
  EXPECT_NE(log.str().find("checkpoint iter_0000003: snapshot taken"), std::string::npos);
  EXPECT_NE(log.str().find("in the background"), std::string::npos) << log.str();
  // The snapshot's buffers: weights and both moments, allocated once.
  const long floats = model.chunks[0]->parameters().size();
  EXPECT_EQ(saver.snapshot_bytes(), 3 * floats * (long)sizeof(float));

  engine::RankModel loaded = one.build(testing::tiny_model_options(2));
  const std::string iteration_3 = (dir.path / "iter_0000003").string();
  const TrainingState st =
      load(iteration_3, record_of(o), loaded, one.rank, log, LoadMode::kResume);
  EXPECT_EQ(st.iteration, 3);
  EXPECT_EQ(values(loaded), at_save);
  EXPECT_EQ(loaded.optimizers[0]->exp_avg(), m_at_save);
  EXPECT_EQ(loaded.optimizers[0]->steps_taken(), 1);
}

TEST(AsyncSaver, TheDestructorWaitsForTheLastSave) {
  OneRank one;
  ScratchDir dir("trident-async-destructor");
  const engine::RankModelOptions o = testing::tiny_model_options(1);
  engine::RankModel model = one.build(o);
  std::ostringstream log;
  {
    AsyncSaver saver;
    saver.save(dir.str(), record_of(o), model, {5, 20, 0, 20}, one.rank, log);
  }
  EXPECT_EQ(latest_checkpoint(dir.str()), (dir.path / "iter_0000005").string());
}

TEST(AsyncSaver, AFailedWriteIsReportedAndNothingCommitted) {
  OneRank one;
  ScratchDir dir("trident-async-failure");
  const engine::RankModelOptions o = testing::tiny_model_options(1);
  engine::RankModel model = one.build(o);
  std::ostringstream log;
  AsyncSaver saver;
  saver.save(dir.str(), record_of(o), model, {2, 8, 0, 8}, one.rank, log);
  SaveOptions failing;
  failing.fault = SaveFault::kWriteError;
  saver.save(dir.str(), record_of(o), model, {4, 16, 0, 16}, one.rank, log, failing);
  try {
    saver.finish(one.rank, log);
    FAIL() << "the failed write went unnoticed";
  } catch (const SaveError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint iter_0000004 was not written"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
  }
  EXPECT_EQ(latest_checkpoint(dir.str()), (dir.path / "iter_0000002").string());
  EXPECT_FALSE(std::filesystem::exists(dir.path / "iter_0000004"));
  saver.finish(one.rank, log);  // reported once: nothing in flight any more
}

}  // namespace
}  // namespace trident::checkpoint
