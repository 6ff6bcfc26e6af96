//===- LinearGemmTest.cpp - the prefill GEMM of helm_k_linear (oneDNN) -------------------===//
//
// helm_k_linear hands M >= gemmMinRows (Gemm.h) rows to a GEMM on oneDNN: helm's pool splits N into
// column panels, f16 weights (and bf16 weights against f32/f16 x) are widened to f32 per panel,
// bf16 x against bf16 W runs oneDNN's bf16 matmul, and the f32 result is rounded once to y's type.
// Here the GEMM is forced for every call (setPrefillPathForTesting) and checked, on every vector
// path this CPU has (their widening and rounding code differs), against the float64 reference and
// the gamma_(K+1) * sum |x w| bound of LinearCheck.h: all 27 dtype combinations, both weight
// layouts, 1-3 threads, random shapes with M from 9 to 300 and K, N from 1 to 5000 (mostly not
// multiples of 16), plus shapes at the panel and chunk edges. Also: exact small-integer products,
// K = 0, the automatic choice of path and HELM_KERNEL_GEMM, and that oneDNN starts no threads of
// its own.
//
//===----------------------------------------------------------------------===//
#include "LinearCheck.h"

#include "kernels/cpu/Gemm.h"
#include "kernels/common/Isa.h"
#include "kernels/common/ThreadPool.h"
#include "contract/helm_contract.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace helm::test;
using helm::kernels::Isa;
using helm::kernels::PrefillPath;

namespace {

/// The vector paths: the GEMM is never used on the scalar path.
std::vector<Isa> vectorIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::avx2, Isa::avx512})
    if (helm::kernels::isaSupported(isa))
      out.push_back(isa);
  return out;
}

/// Edge shapes, then random ones: M in [9, 300], K and N log-uniform in [1, 5000], at most 2^22
/// multiply-adds each (the float64 reference is the slow part). Fixed seed: the same list each run.
const std::vector<LinearShape> kGemmShapes = [] {
  std::vector<LinearShape> shapes = {
      {9, 1, 1},      {9, 2, 5000},   {16, 5000, 3},   {300, 1, 300},  {300, 17, 1},
      {17, 4999, 33}, {33, 31, 4097}, {64, 1024, 513}, {20, 129, 1040}, {100, 333, 65},
      // M <= 8 through the GEMM as well (forced): oneDNN's small-M kernels
      {1, 300, 200},  {5, 65, 1000},
  };
  std::mt19937_64 rng(2024);
  std::uniform_int_distribution<int64_t> rows(9, 300);
  std::uniform_real_distribution<double> logDim(0.0, std::log(5000.0));
  while (shapes.size() < 40) {
    LinearShape s{rows(rng), int64_t(std::exp(logDim(rng))), int64_t(std::exp(logDim(rng)))};
    s.K = std::max<int64_t>(1, s.K);
    s.N = std::max<int64_t>(1, s.N);
    if (s.M * s.K * s.N <= (int64_t(1) << 22))
      shapes.push_back(s);
  }
  return shapes;
}();

class LinearGemmTest : public ::testing::TestWithParam<LinearParam> {
protected:
  void SetUp() override {
    if (vectorIsas().empty())
      GTEST_SKIP() << "this CPU has no AVX2: helm_k_linear never uses the GEMM";
    helm::kernels::setPrefillPathForTesting(PrefillPath::gemm);
  }
  void TearDown() override {
    helm::kernels::setPrefillPathForTesting(PrefillPath::automatic);
    helm::kernels::setThreads(1);
    helm::kernels::resetIsaForTesting();
  }
};

TEST_P(LinearGemmTest, MatchesFloat64Reference) {
  auto [xt, wt, yt, transposed] = GetParam();
  std::mt19937_64 rng(4321 + int(xt) * 100 + int(wt) * 10 + int(yt) + (transposed ? 1000 : 0));
  const int64_t fallbacksBefore = helm::kernels::gemmFallbackPanelsForTesting();
  for (const LinearShape &s : kGemmShapes) {
    const LinearCase c(xt, wt, transposed, s, rng);
    for (Isa isa : vectorIsas()) {
      ASSERT_TRUE(helm::kernels::setIsaForTesting(isa));
      for (int threads : {1, 2, 3}) {
        helm::kernels::setThreads(threads);
        SCOPED_TRACE(std::string("gemm, isa ") + helm::kernels::isaName(isa) +
                     " threads=" + std::to_string(threads));
        ASSERT_NO_FATAL_FAILURE(c.run(yt));
      }
    }
  }
  // oneDNN computed every panel: the GEMV fallback (which would also match the reference) ran
  // for none of them, so this test checked the GEMM itself.
  EXPECT_EQ(helm::kernels::gemmFallbackPanelsForTesting(), fallbacksBefore);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LinearGemmTest, allLinearParams(), linearParamName);

TEST(LinearGemm, ExactIntegerProducts) {
  if (vectorIsas().empty())
    GTEST_SKIP() << "no AVX2";
  helm::kernels::setPrefillPathForTesting(PrefillPath::gemm);
  for (int threads : {1, 2})
    for (int64_t M : {9, 16, 33, 100}) {
      helm::kernels::setThreads(threads);
      ASSERT_NO_FATAL_FAILURE(checkExactIntegerProducts(M, 301, 203))
          << "M " << M << " threads " << threads;
    }
  helm::kernels::setPrefillPathForTesting(PrefillPath::automatic);
  helm::kernels::setThreads(1);
}

// K = 0 with the GEMM forced: every output is exactly zero, in each output type (gemmWanted
// leaves the empty sum to the GEMV kernels, which write zeros; oneDNN would leave y unwritten).
TEST(LinearGemm, ZeroKGivesZeros) {
  if (vectorIsas().empty())
    GTEST_SKIP() << "no AVX2";
  helm::kernels::setPrefillPathForTesting(PrefillPath::gemm);
  for (int32_t yd : {0, 1, 2}) {
    std::vector<float> x(4, 1.0f), w(4, 1.0f);
    std::vector<uint16_t> y(20 * 7 * 2, 0x3c3c);
    helm_k_linear(x.data(), 0, w.data(), 0, 0, y.data(), yd, 20, 0, 7);
    size_t words = yd == 0 ? 20 * 7 * 2 : 20 * 7;
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_EQ(y[i], i < words ? 0 : 0x3c3c) << "y dtype " << yd << " word " << i;
  }
  helm::kernels::setPrefillPathForTesting(PrefillPath::automatic);
}

// The automatic choice: the GEMM from gemmMinRows rows of a non-tiny product, on vector paths only.
TEST(LinearGemm, PathChoice) {
  using helm::kernels::DType;
  using helm::kernels::gemmMinRows;
  using helm::kernels::gemmWanted;
  using helm::kernels::kGemmMinRowsKN;
  using helm::kernels::kGemmMinRowsNK;
  const DType f32 = DType::f32, f16 = DType::f16, bf16 = DType::bf16;
  helm::kernels::setPrefillPathForTesting(PrefillPath::automatic); // whatever HELM_KERNEL_GEMM says
  EXPECT_EQ(gemmMinRows(f16, f16, true), kGemmMinRowsNK);
  EXPECT_EQ(gemmMinRows(f32, f32, false), kGemmMinRowsKN);
  EXPECT_EQ(gemmMinRows(f16, f16, false), helm::kernels::kGemmMinRowsKN16);
  EXPECT_EQ(gemmMinRows(f32, bf16, false), helm::kernels::kGemmMinRowsKN16); // widened, not bf16
  EXPECT_EQ(gemmMinRows(f16, f32, false), kGemmMinRowsKN);
  EXPECT_EQ(gemmMinRows(f16, bf16, true), kGemmMinRowsNK);
  EXPECT_LE(gemmMinRows(bf16, bf16, false), helm::kernels::kGemmMinRowsKN16);
  EXPECT_GT(gemmMinRows(bf16, bf16, false), 8); // decode sizes stay on the GEMV kernels
  EXPECT_TRUE(gemmWanted(Isa::avx512, f16, f16, true, kGemmMinRowsNK, 1024, 1024));
  EXPECT_FALSE(gemmWanted(Isa::avx512, f16, f16, true, kGemmMinRowsNK - 1, 1024, 1024));
  EXPECT_TRUE(gemmWanted(Isa::avx2, f32, f32, false, kGemmMinRowsKN, 3072, 1024));
  EXPECT_FALSE(gemmWanted(Isa::avx512, f32, f32, false, kGemmMinRowsKN - 1, 1024, 1024));
  EXPECT_FALSE(gemmWanted(Isa::avx512, bf16, bf16, false, 8, 1024, 151936)); // a decode step's head
  EXPECT_FALSE(gemmWanted(Isa::avx512, f32, f32, true, 64, 8, 8)); // tiny: no per-call setup wanted
  EXPECT_FALSE(gemmWanted(Isa::scalar, f32, f32, true, 512, 1024, 1024));
  helm::kernels::setPrefillPathForTesting(PrefillPath::gemv);
  EXPECT_FALSE(gemmWanted(Isa::avx512, f32, f32, true, 512, 1024, 1024));
  helm::kernels::setPrefillPathForTesting(PrefillPath::gemm);
  EXPECT_TRUE(gemmWanted(Isa::avx512, f32, f32, false, 1, 8, 8));
  EXPECT_FALSE(gemmWanted(Isa::scalar, f32, f32, false, 512, 1024, 1024));
  helm::kernels::setPrefillPathForTesting(PrefillPath::automatic);
}

// HELM_KERNEL_GEMM=auto|always|never sets the default path (read once per process, so each case
// runs in a fresh child); an unknown value warns and means auto.
TEST(LinearGemmDeathTest, EnvironmentPicksThePath) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::pair<const char *, PrefillPath> cases[] = {{"always", PrefillPath::gemm},
                                                        {"never", PrefillPath::gemv},
                                                        {"auto", PrefillPath::automatic},
                                                        {"bogus", PrefillPath::automatic}};
  for (auto [value, path] : cases) {
    ASSERT_EQ(setenv("HELM_KERNEL_GEMM", value, 1), 0);
    EXPECT_EXIT(
        {
          std::fprintf(stderr, "path %d\n", int(helm::kernels::prefillPathForTesting()));
          std::exit(0);
        },
        ::testing::ExitedWithCode(0),
        std::string(value) == "bogus" ? "unknown HELM_KERNEL_GEMM=bogus.*\n.*path 0"
                                      : "path " + std::to_string(int(path)))
        << value;
  }
  unsetenv("HELM_KERNEL_GEMM");
}

int threadsOfThisProcess() {
  int n = 0;
  if (DIR *d = opendir("/proc/self/task")) {
    while (dirent *e = readdir(d))
      n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// helm's pool is the only parallelism: a GEMM on 1 or 2 pool threads starts no oneDNN/OpenMP
// threads (which would keep more cores busy than helm-rt -t asks for).
TEST(LinearGemm, StartsNoThreadsOfItsOwn) {
  if (vectorIsas().empty())
    GTEST_SKIP() << "no AVX2";
  helm::kernels::setPrefillPathForTesting(PrefillPath::gemm);
  for (int threads : {1, 2}) {
    helm::kernels::setThreads(threads);
    const int before = threadsOfThisProcess();
    ASSERT_GT(before, 0) << "cannot read /proc/self/task";
    std::mt19937_64 rng(5);
    for (bool transposed : {false, true})
      for (Ty t : {Ty::f32, Ty::f16, Ty::bf16}) {
        const LinearCase c(t, t, transposed, LinearShape{64, 256, 512}, rng);
        ASSERT_NO_FATAL_FAILURE(c.run(t));
      }
    EXPECT_EQ(threadsOfThisProcess(), before) << "pool of " << threads;
  }
  helm::kernels::setPrefillPathForTesting(PrefillPath::automatic);
  helm::kernels::setThreads(1);
}

} // namespace
