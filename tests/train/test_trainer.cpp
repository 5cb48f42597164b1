// train_step on one rank, against references it does not produce itself: a plain GPTModel
// forward and backward on the samples read straight from the dataset (the loss train_step
// reports, the norm of the mean loss's gradient, which samples the next step takes), the
// first-order change of that loss along the weights' actual update, and the same global
// batch taken as one micro-batch instead of two.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <vector>

#include "data/mock_dataset.h"
#include "distributed/process_groups.h"
#include "model/gpt_model.h"
#include "train/train_step.h"
#include "train/training_run.h"

namespace trident::train {
namespace {

TrainingConfig tiny_run(int micro_batch, int global_batch, float lr) {
  TrainingConfig c;
  c.model.num_layers = 2, c.model.hidden_size = 32, c.model.num_attention_heads = 2;
  c.model.seq_length = 16, c.model.vocab_size = 64, c.model.make_vocab_size_divisible_by = 64;
  c.micro_batch_size = micro_batch, c.global_batch_size = global_batch;
  c.train_iters = 4, c.lr = lr, c.min_lr = lr, c.lr_decay_style = "constant";
  c.adam.weight_decay = 0;
  c.mock_data = true, c.seed = 11, c.eval_iters = 0;
  c.peak_tflops = 1;  // no peak measurement: MFU is not looked at here
  return c;
}

// One process's groups and the run set up on them (its log kept out of the test output);
// the run refers to the config, so this holds it.
struct OneRankRun {
  const TrainingConfig config;
  distributed::ProcessGrid grid{1, 1, 1};
  distributed::ProcessGroups groups = distributed::make_single_rank_groups();
  engine::RankContext rank{0, &grid, &groups, {"local"}};
  std::ostringstream log;
  TrainingRun run;

  explicit OneRankRun(const TrainingConfig& c) : config(c), run(config, rank, log) {}
  std::vector<float> weights() const {
    const Parameters& p = run.model.chunks[0]->parameters();
    return {p.values(), p.values() + p.size()};
  }
};

// Samples [first, first + n) as the dataset gives them, not as the trainer gathers them.
std::vector<int> samples(const TrainingConfig& c, long first, int n) {
  data::MockGPTDataset source(c.model.vocab_size, c.model.seq_length, c.seed);
  std::vector<int> tokens((size_t)n * (c.model.seq_length + 1));
  for (int k = 0; k < n; ++k)
    source.sample(first + k, tokens.data() + k * (c.model.seq_length + 1));
  return tokens;
}

// A separate whole model holding `weights`: the reference forward and backward.
struct ReferenceModel {
  comm::SingleRankCommunicator tp{"tensor"};
  GPTModel model;
  int batch, seq;

  ReferenceModel(const TrainingConfig& c, int batch_)
      : model(c.model, tp, batch_, c.model.seq_length), batch(batch_), seq(c.model.seq_length) {}
  void load(const std::vector<float>& weights) {
    ASSERT_EQ((size_t)model.parameters().size(), weights.size());
    std::copy(weights.begin(), weights.end(), model.parameters().values());
  }
  double mean_loss(const std::vector<int>& tokens) {
    return model.forward(tokens.data(), batch, seq) / ((double)batch * seq);
  }
  // The gradient of the mean loss over the batch's tokens.
  std::vector<double> mean_loss_gradient(const std::vector<int>& tokens) {
    Parameters& p = model.parameters();
    p.zero_grads();
    model.forward_backward(tokens.data(), batch, seq, 1.f / ((float)batch * seq));
    return {p.grads(), p.grads() + p.size()};
  }
};

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

TEST(TrainStep, LossGradientAndUpdateMatchAPlainModelOnTheSameSamples) {
  const TrainingConfig c = tiny_run(2, 4, 1e-4f);  // 2 micro-batches of 2 per step
  const double tokens_per_step = 4.0 * c.model.seq_length;
  OneRankRun one(c);
  ReferenceModel ref(c, 4);
  const std::vector<float> w0 = one.weights();
  ref.load(w0);
  const std::vector<int> batch1 = samples(c, 0, 4);
  const double loss0 = ref.mean_loss(batch1);
  const std::vector<double> grad = ref.mean_loss_gradient(batch1);

  const StepResult step1 = train_step(one.run, 1);
  EXPECT_EQ(step1.global_batch, 4);
  EXPECT_FALSE(step1.skipped);
  EXPECT_FLOAT_EQ(step1.lr, c.lr);
  EXPECT_NEAR(step1.loss_sum / tokens_per_step, loss0, 1e-6 * loss0);
  // The gradient of the mean over the global batch, not of a micro-batch's sum or mean.
  EXPECT_NEAR(step1.grad_norm, norm(grad), 1e-4 * norm(grad));
  EXPECT_EQ(one.run.progress.consumed_samples, 4);
  EXPECT_EQ(one.run.progress.lr_schedule_samples, 4);

  // The loss on the same batch moves as its gradient predicts along the actual update
  // (first order: at this lr the curvature's part is about 0.1 % of the change).
  const std::vector<float> w1 = one.weights();
  double predicted = 0;
  for (size_t i = 0; i < w0.size(); ++i) predicted += grad[i] * ((double)w1[i] - w0[i]);
  ref.load(w1);
  const double loss1 = ref.mean_loss(batch1);
  EXPECT_LT(predicted, 0);
  EXPECT_NEAR(loss1 - loss0, predicted, 0.01 * std::abs(predicted));

  // The next step reads the next 4 samples, at the updated weights.
  const StepResult step2 = train_step(one.run, 2);
  const double loss2 = ref.mean_loss(samples(c, 4, 4));
  EXPECT_NEAR(step2.loss_sum / tokens_per_step, loss2, 1e-6 * loss2);
  EXPECT_EQ(one.run.progress.consumed_samples, 8);
}

TEST(TrainStep, TwoMicroBatchesEqualOneOfTwiceTheSize) {
  const float lr = 1e-3f;
  OneRankRun two(tiny_run(2, 4, lr)), one(tiny_run(4, 4, lr));
  ASSERT_EQ(two.weights(), one.weights());  // same seed, same initialisation
  const std::vector<float> w0 = one.weights();
  for (long it = 1; it <= 2; ++it) {
    const StepResult a = train_step(two.run, it), b = train_step(one.run, it);
    EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-6 * b.loss_sum) << "iteration " << it;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * b.grad_norm) << "iteration " << it;
  }
  const std::vector<float> wa = two.weights(), wb = one.weights();
  double moved = 0, apart = 0;
  for (size_t i = 0; i < wb.size(); ++i) {
    moved = std::max(moved, (double)std::abs(wb[i] - w0[i]));
    apart = std::max(apart, (double)std::abs(wa[i] - wb[i]));
  }
  EXPECT_GT(moved, lr);  // two Adam steps of about lr each
  EXPECT_LT(apart, 1e-2 * lr);
}

}  // namespace
}  // namespace trident::train
