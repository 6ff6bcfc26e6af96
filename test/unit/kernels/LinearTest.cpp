//===- LinearTest.cpp - helm_k_linear against a float64 reference ------------------===//
//
// The path CPUID (or HELM_KERNEL_ISA) picks, on 1-3 threads, against the float64 reference and the
// rigorous gamma_(K+1) * sum |x w| bound of LinearCheck.h; LinearIsaTest forces each path.
//
//===----------------------------------------------------------------------===//
#include "LinearCheck.h"

#include "kernels/common/ThreadPool.h"
#include "contract/helm_contract.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

using namespace helm::test;

namespace {

class LinearTest : public ::testing::TestWithParam<LinearParam> {
protected:
  void TearDown() override { helm::kernels::setThreads(1); }
};

TEST_P(LinearTest, MatchesFloat64Reference) {
  auto [xt, wt, yt, transposed] = GetParam();
  std::mt19937_64 rng(1234 + int(xt) * 100 + int(wt) * 10 + int(yt) + (transposed ? 1000 : 0));
  for (const LinearShape &s : kLinearShapes) {
    const LinearCase c(xt, wt, transposed, s, rng);
    for (int threads : {1, 2, 3}) {
      helm::kernels::setThreads(threads);
      SCOPED_TRACE("threads=" + std::to_string(threads));
      ASSERT_NO_FATAL_FAILURE(c.run(yt));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LinearTest, allLinearParams(), linearParamName);

// Exact cases (LinearCheck.h): small integers, both layouts, several threads.
TEST(Linear, ExactIntegerProducts) {
  for (int threads : {1, 3}) {
    helm::kernels::setThreads(threads);
    ASSERT_NO_FATAL_FAILURE(checkExactIntegerProducts(3, 37, 45)) << "threads " << threads;
  }
  helm::kernels::setThreads(1);
}

// M or N of zero is an empty product: nothing is written.
TEST(Linear, EmptyOutputWritesNothing) {
  std::vector<float> x(16, 1.0f), w(16, 1.0f), y(16, 42.0f);
  helm_k_linear(x.data(), 0, w.data(), 0, 0, y.data(), 0, 0, 4, 4);
  helm_k_linear(x.data(), 0, w.data(), 0, 1, y.data(), 0, 4, 4, 0);
  for (float v : y)
    EXPECT_EQ(v, 42.0f);
}

// A dtype code outside 0..2 or a negative K is a one-line error, not a jump through a table.
TEST(LinearDeathTest, InvalidCallIsAClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> x(16, 1.0f), w(16, 1.0f), y(16, 0.0f);
  EXPECT_DEATH(helm_k_linear(x.data(), 0, w.data(), 42, 0, y.data(), 0, 2, 2, 2),
               "helm_k_linear: invalid call: dtype codes x 0, w 42, y 0");
  // A block-format weight (q8_0) whose rows of K = 2 cannot hold its blocks of 32.
  EXPECT_DEATH(helm_k_linear(x.data(), 0, w.data(), HELM_DTYPE_Q8_0, 0, y.data(), 0, 2, 2, 2),
               "helm_k_linear: invalid call: .*K");
  EXPECT_DEATH(helm_k_linear(x.data(), 9, w.data(), HELM_DTYPE_Q4_0, 0, y.data(), 0, 2, 32, 2),
               "helm_k_linear: invalid call: dtype code 9 is not f32, f16 or bf16");
  EXPECT_DEATH(helm_k_linear(x.data(), -1, w.data(), 0, 1, y.data(), 0, 2, 2, 2),
               "dtype codes x -1");
  EXPECT_DEATH(helm_k_linear(x.data(), 0, w.data(), 0, 0, y.data(), 7, 2, 2, 2), "y 7");
  EXPECT_DEATH(helm_k_linear(x.data(), 0, w.data(), 0, 0, y.data(), 0, 2, -1, 2), "K = -1");
}

} // namespace
