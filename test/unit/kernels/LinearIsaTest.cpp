//===- LinearIsaTest.cpp - helm_k_linear on every instruction-set path --------------===//
//
// The linear kernels have an AVX-512, an AVX2+FMA+F16C and a scalar path (kernels/common/Isa.h).
// Whichever one CPUID picks is what LinearTest checks; this file forces each path this CPU supports
// (setIsaForTesting, the hook behind HELM_KERNEL_ISA) and runs the same float64-reference matrix on
// it: all 27 dtype combinations, both weight layouts, 1-3 threads, and shapes chosen for the
// kernels' blocking: K and N off every vector width and unroll (1..5000), M = 1..8 (each
// micro-kernel row count) and M > 8 (the blocked prefill loop, and the oneDNN GEMM past the
// thresholds of Gemm.h on the vector paths), N across the column chunks.
// The reference and error bound are LinearCheck.h's (gamma_(K+1) * sum |x w|, plus half an ulp for
// f16/bf16 output).
//
//===----------------------------------------------------------------------===//
#include "LinearCheck.h"

#include "kernels/common/Isa.h"
#include "kernels/common/ThreadPool.h"
#include "contract/helm_contract.h"

#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>
#include <vector>

using namespace helm::test;
using helm::kernels::Isa;

namespace {

std::vector<Isa> supportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (helm::kernels::isaSupported(isa))
      out.push_back(isa);
  return out;
}

/// LinearTest's shapes, then shapes chosen for the kernels' blocking.
const std::vector<LinearShape> kShapes = [] {
  std::vector<LinearShape> shapes(std::begin(kLinearShapes), std::end(kLinearShapes));
  shapes.insert(shapes.end(), {
      // every micro-kernel row count, vector tails of 16/32/64-wide unrolled loops
      {3, 97, 131}, {4, 65, 67}, {6, 47, 77}, {7, 33, 130}, {8, 129, 65}, {8, 1, 19},
      // long K, and N past one [K, N] column chunk (8192 / M columns)
      {1, 5000, 37}, {1, 4999, 70}, {1, 3, 8500}, {2, 2, 4500}, {3, 5, 2900},
      // M > 8: blocks of 8 rows plus a remainder, cache-blocked loops
      {9, 63, 45}, {17, 130, 99}, {33, 40, 70}, {12, 700, 300},
      // past the GEMM thresholds of Gemm.h (bf16 x bf16, [N, K], [K, N]): the oneDNN path on the
      // vector ISAs, the GEMV kernels on scalar
      {9, 500, 70}, {16, 301, 200}, {40, 257, 129}, {50, 130, 77},
  });
  return shapes;
}();

class LinearIsaTest : public ::testing::TestWithParam<LinearParam> {
protected:
  void TearDown() override {
    helm::kernels::setThreads(1);
    helm::kernels::resetIsaForTesting();
  }
};

TEST_P(LinearIsaTest, EveryPathMatchesFloat64Reference) {
  auto [xt, wt, yt, transposed] = GetParam();
  std::mt19937_64 rng(777 + int(xt) * 100 + int(wt) * 10 + int(yt) + (transposed ? 1000 : 0));
  const std::vector<Isa> isas = supportedIsas();
  for (const LinearShape &s : kShapes) {
    const LinearCase c(xt, wt, transposed, s, rng);
    for (Isa isa : isas) {
      ASSERT_TRUE(helm::kernels::setIsaForTesting(isa));
      ASSERT_EQ(helm::kernels::activeIsa(), isa);
      for (int threads : {1, 2, 3}) {
        helm::kernels::setThreads(threads);
        SCOPED_TRACE(std::string("isa ") + helm::kernels::isaName(isa) +
                     " threads=" + std::to_string(threads));
        ASSERT_NO_FATAL_FAILURE(c.run(yt));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LinearIsaTest, allLinearParams(), linearParamName);

// Exact cases (LinearCheck.h) on each path, for M from 1 to 12, both layouts, several threads.
TEST(LinearIsa, ExactIntegerProductsOnEveryPath) {
  for (Isa isa : supportedIsas()) {
    ASSERT_TRUE(helm::kernels::setIsaForTesting(isa));
    for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 12})
      for (int threads : {1, 2}) {
        helm::kernels::setThreads(threads);
        ASSERT_NO_FATAL_FAILURE(checkExactIntegerProducts(M, 301, 203))
            << helm::kernels::isaName(isa) << " threads " << threads;
      }
  }
  helm::kernels::setThreads(1);
  helm::kernels::resetIsaForTesting();
}

// K = 0: an empty sum, every output is exactly zero.
TEST(LinearIsa, ZeroKGivesZeros) {
  for (Isa isa : supportedIsas()) {
    ASSERT_TRUE(helm::kernels::setIsaForTesting(isa));
    for (bool tr : {false, true}) {
      std::vector<float> x(4, 1.0f), w(4, 1.0f), y(6, 42.0f);
      helm_k_linear(x.data(), 0, w.data(), 0, tr, y.data(), 0, 2, 0, 3);
      for (float v : y)
        EXPECT_EQ(v, 0.0f) << helm::kernels::isaName(isa);
    }
  }
  helm::kernels::resetIsaForTesting();
}

// The override hook: scalar is always available; the reported path follows it and reset drops it.
TEST(LinearIsa, OverrideAndReset) {
  Isa natural = helm::kernels::activeIsa();
  EXPECT_TRUE(helm::kernels::isaSupported(Isa::scalar));
  EXPECT_TRUE(helm::kernels::isaSupported(helm::kernels::bestIsa()));
  ASSERT_TRUE(helm::kernels::setIsaForTesting(Isa::scalar));
  EXPECT_EQ(helm::kernels::activeIsa(), Isa::scalar);
  helm::kernels::resetIsaForTesting();
  EXPECT_EQ(helm::kernels::activeIsa(), natural);
  for (Isa isa : {Isa::avx2, Isa::avx512})
    if (!helm::kernels::isaSupported(isa)) {
      EXPECT_FALSE(helm::kernels::setIsaForTesting(isa));
      EXPECT_EQ(helm::kernels::activeIsa(), natural);
    }
}

} // namespace
