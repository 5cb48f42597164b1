// All-to-all attention (--cp-comm-type a2a) against the one-process kernel on the whole
// sequence (the harness of test_ring_attention.cpp): heads and key / value groups split
// over c, global positions, documents, dropout's head offset; and heads that do not divide
// refused with the rule.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "context_parallel/a2a_attention.h"
#include "context_parallel/cp_attention_test_util.h"

namespace trident {
namespace {

using cp_test::Case;
using kernels::Precision;

const cp_test::Path kA2a{context_parallel::a2a_attention_forward,
                         context_parallel::a2a_attention_backward,
                         context_parallel::CpCommType::kA2a};

class A2aAttention : public ::testing::TestWithParam<Case> {};

TEST_P(A2aAttention, MatchesTheOneProcessKernel) {
  const Case k = GetParam();
  const cp_test::Errors e = cp_test::run_cp(cp_test::make_problem(k), kA2a);
  EXPECT_LT(e.out, cp_test::tolerance(k));
  EXPECT_LT(e.lse, cp_test::tolerance(k));
  EXPECT_LT(e.dqkv, cp_test::tolerance(k));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, A2aAttention,
    ::testing::Values(Case{2, 2, 48, 2, 2, 8},
                      Case{4, 1, 160, 8, 4, 16, 0, false, false, true},  // GQA, RoPE
                      Case{2, 2, 272, 4, 2, 8, 50}, Case{4, 2, 96, 4, 4, 8, 0, true, true, true},
                      Case{2, 1, 200, 2, 2, 8, 30, true, false, true, 0.2f},
                      Case{2, 2, 136, 4, 2, 16, 0, true, true, true, 0.1f, Precision::kBf16}));

TEST(A2aAttentionInput, HeadsNotDivisibleByCpAreRefused) {
  EXPECT_NO_THROW(context_parallel::check_a2a_heads(8, 4, 2, 4));
  try {
    context_parallel::check_a2a_heads(6, 6, 1, 4);
    FAIL() << "6 heads over 4 ranks accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("divisible by --context-parallel-size (4)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(context_parallel::check_a2a_heads(8, 2, 4, 4), std::invalid_argument);  // groups
  // Through the path itself, on every rank.
  const Case k{2, 1, 8, 3, 3, 4};
  EXPECT_THROW(cp_test::run_cp(cp_test::make_problem(k), kA2a), std::invalid_argument);
}

}  // namespace
}  // namespace trident
