// Sequence parallelism's gradient all-reduce at t = 1, 2 and 4 (a thread per rank,
// thread_group.h): which parameters have partial gradients (every LayerNorm weight and bias
// under sequence parallelism; grouped-query key/value projections replicated when t > G),
// that exactly those are summed over the group in one all-reduce, and that LayerNorm
// gradients of the ranks' row blocks, summed, are the whole micro-batch's against a float64
// LayerNorm written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/model_config.h"
#include "kernels/layernorm.h"
#include "parameters/parameter_layout.h"
#include "parameters/parameters.h"
#include "tensor_parallel/sequence_parallel_grads.h"
#include "tensor_parallel/tensor_parallel_test_util.h"
#include "test_util.h"

namespace trident {
namespace {

using namespace tensor_parallel_test;
using testing::random_vector;
using testing::relative_error;

ModelConfig gpt() {
  ModelConfig c;
  c.num_layers = 2, c.hidden_size = 16, c.num_attention_heads = 4, c.seq_length = 8;
  c.vocab_size = 50;
  return c;
}

// Two key/value groups for four heads: split at t = 2, replicated at t = 4.
ModelConfig grouped() {
  ModelConfig c = gpt();
  c.group_query_attention = true, c.num_query_groups = 2;
  return c;
}

std::set<std::string> flagged(const ModelConfig& c, int t, bool (*is_partial)(const ParamSpec&)) {
  std::set<std::string> names;
  const ParameterLayout layout(c, {0, t});
  for (const ParamSpec& s : layout.specs())
    if (is_partial(s)) names.insert(s.name);
  return names;
}

TEST(SequenceParallelGrads, NamesTheParametersWithPartialGradients) {
  const std::set<std::string> norms = {"layers.0.input_layernorm.weight",
                                       "layers.0.input_layernorm.bias",
                                       "layers.0.post_attention_layernorm.weight",
                                       "layers.0.post_attention_layernorm.bias",
                                       "layers.1.input_layernorm.weight",
                                       "layers.1.input_layernorm.bias",
                                       "layers.1.post_attention_layernorm.weight",
                                       "layers.1.post_attention_layernorm.bias",
                                       "final_layernorm.weight",
                                       "final_layernorm.bias"};
  for (int t : {1, 2, 4}) {
    // Not the other replicated parameters (row-parallel biases, position embedding): their
    // gradients come from all-gathered output gradients of every row.
    EXPECT_EQ(flagged(gpt(), t, tensor_parallel::is_sequence_parallel_param), norms) << "t " << t;
    EXPECT_EQ(flagged(gpt(), t, tensor_parallel::is_replicated_kv_param).size(), 0u) << "t " << t;
  }
  const std::set<std::string> kv = {
      "layers.0.self_attention.linear_kv.weight", "layers.0.self_attention.linear_kv.bias",
      "layers.1.self_attention.linear_kv.weight", "layers.1.self_attention.linear_kv.bias"};
  EXPECT_EQ(flagged(grouped(), 2, tensor_parallel::is_replicated_kv_param).size(), 0u);
  EXPECT_EQ(flagged(grouped(), 4, tensor_parallel::is_replicated_kv_param), kv);
}

class SequenceParallelGradsTest : public ::testing::TestWithParam<int> {};

// Every rank's gradient buffer holds a different draw; afterwards the partial gradients hold
// the sum over ranks (float64 here) and every other gradient is untouched.
TEST_P(SequenceParallelGradsTest, SumsExactlyThePartialGradientsInOneAllReduce) {
  const int t = GetParam();
  struct Case {
    const char* name;
    ModelConfig config;
    bool sequence_parallel;
  };
  for (const Case& k : {Case{"gpt sp", gpt(), true}, Case{"gpt", gpt(), false},
                        Case{"grouped sp", grouped(), true}, Case{"grouped", grouped(), false}}) {
    std::vector<std::vector<float>> before(t), after(t);
    std::vector<std::vector<ParamSpec>> specs(t);
    std::vector<comm::CollectiveCounters> counters(t);
    run_group(t, [&](comm::Communicator& tp) {
      const int r = tp.rank();
      Parameters params(ParameterLayout(k.config, {r, t}));
      before[r] = random_vector(params.size(), 50 + r);
      std::copy(before[r].begin(), before[r].end(), params.grads());
      tensor_parallel::allreduce_sequence_parallel_grads(params, tp, k.sequence_parallel);
      after[r].assign(params.grads(), params.grads() + params.size());
      specs[r] = params.layout().specs();
      counters[r] = tp.counters();
    });
    bool any_partial = false;
    for (int r = 0; r < t; ++r)
      for (size_t i = 0; i < specs[r].size(); ++i) {
        const ParamSpec& s = specs[r][i];
        const bool partial =
            t > 1 && ((k.sequence_parallel && tensor_parallel::is_sequence_parallel_param(s)) ||
                      tensor_parallel::is_replicated_kv_param(s));
        any_partial |= partial;
        std::vector<double> expect(s.numel());
        for (long j = 0; j < s.numel(); ++j) {
          if (!partial) {
            expect[j] = before[r][s.offset + j];
            continue;
          }
          expect[j] = 0;
          for (int q = 0; q < t; ++q) expect[j] += before[q][specs[q][i].offset + j];
        }
        const std::vector<float> got(after[r].begin() + s.offset,
                                     after[r].begin() + s.offset + s.numel());
        EXPECT_LT(relative_error(got, expect), 1e-6) << k.name << " rank " << r << " " << s.name;
      }
    if (t == 1) continue;  // the one-rank communicator counts nothing
    for (int r = 0; r < t; ++r) {
      EXPECT_EQ(counters[r].all_reduce.calls, any_partial ? 1 : 0) << k.name;
      EXPECT_EQ(counters[r].total_calls(), counters[r].all_reduce.calls) << k.name;
    }
  }
}

// Under sequence parallelism rank r normalises rows [r rows / t, (r + 1) rows / t) only: its
// LayerNorm weight and bias gradients cover those rows, and the all-reduce completes them.
TEST_P(SequenceParallelGradsTest, LayerNormGradientsOfRowBlocksSumToTheWholeBatch) {
  const int t = GetParam(), rows = 16, cols = 16, rows_local = rows / t;
  const ModelConfig c = gpt();
  const auto x = random_vector(rows * cols, 61), gamma = random_vector(cols, 62);
  const auto beta = random_vector(cols, 63), dy = random_vector(rows * cols, 64);
  std::vector<std::vector<float>> dgamma(t), dbeta(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    Parameters params(ParameterLayout(c, {r, t}));
    params.zero_grads();
    const ParamSpec& w = params.layout().find("layers.1.post_attention_layernorm.weight");
    const ParamSpec& b = params.layout().find("layers.1.post_attention_layernorm.bias");
    const std::vector<float> x_r = row_block(x, cols, r * rows_local, rows_local);
    const std::vector<float> dy_r = row_block(dy, cols, r * rows_local, rows_local);
    std::vector<float> y(x_r.size()), dx(x_r.size()), mean(rows_local), rstd(rows_local);
    kernels::layernorm_forward(x_r.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                               rstd.data(), rows_local, cols, 1e-5f);
    kernels::layernorm_backward(dy_r.data(), x_r.data(), gamma.data(), mean.data(), rstd.data(),
                                dx.data(), params.grads() + w.offset, params.grads() + b.offset,
                                rows_local, cols, false);
    tensor_parallel::allreduce_sequence_parallel_grads(params, tp, true);
    dgamma[r].assign(params.grads() + w.offset, params.grads() + w.offset + cols);
    dbeta[r].assign(params.grads() + b.offset, params.grads() + b.offset + cols);
  });
  // d gamma[c] = sum over rows of dy * (x - mean) / sqrt(var + eps); d beta[c] = sum of dy.
  std::vector<double> dgamma_ref(cols, 0.0), dbeta_ref(cols, 0.0);
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int k = 0; k < cols; ++k) mean += x[r * cols + k];
    mean /= cols;
    for (int k = 0; k < cols; ++k) var += (x[r * cols + k] - mean) * (x[r * cols + k] - mean);
    const double rstd = 1 / std::sqrt(var / cols + 1e-5);
    for (int k = 0; k < cols; ++k) {
      dgamma_ref[k] += dy[r * cols + k] * (x[r * cols + k] - mean) * rstd;
      dbeta_ref[k] += dy[r * cols + k];
    }
  }
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(dgamma[r], dgamma_ref), 1e-5) << "rank " << r;
    EXPECT_LT(relative_error(dbeta[r], dbeta_ref), 1e-5) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(TensorParallelSizes, SequenceParallelGradsTest, ::testing::Values(1, 2, 4),
                         tensor_parallel_size);

}  // namespace
}  // namespace trident
