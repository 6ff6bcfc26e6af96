//===- LinearIsaTest.cpp - helm_k_linear on every instruction-set path --------------===//
//
// The linear kernels have an AVX-512, an AVX2+FMA+F16C and a scalar path (kernels/cpu/Isa.h).
// Whichever one CPUID picks is what LinearTest checks; this file forces each path this CPU supports
// (setIsaForTesting, the hook behind HELM_KERNEL_ISA) and runs the same float64-reference matrix on
// it: all 27 dtype combinations, both weight layouts, 1-3 threads, and shapes chosen for the
// kernels' blocking: K and N off every vector width and unroll (1..5000), M = 1..8 (each
// micro-kernel row count) and M > 8 (the blocked prefill loop), N across the column chunks.
// The error bound is LinearTest's (gamma_(K+1) * sum |x w|, plus half an ulp for f16/bf16 output).
//
//===----------------------------------------------------------------------===//
#include "Reference.h"

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/helm_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace helm::test;
using helm::kernels::Isa;

namespace {

constexpr size_t kGuard = 64;

std::vector<double> randomValues(size_t n, Ty t, std::mt19937_64 &rng,
                                 std::vector<unsigned char> &bytes) {
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<double> vals(n);
  bytes.assign((n + kGuard) * elemSize(t), 0);
  for (size_t i = 0; i < n; ++i) {
    double v = uni(rng);
    if (rng() % 50 == 0)
      v = 0;
    else if (rng() % 50 == 0)
      v *= 8;
    vals[i] = roundToFormat(v, t);
    encodeAt(bytes.data(), t, i, vals[i]);
  }
  return vals;
}

std::vector<Isa> supportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (helm::kernels::isaSupported(isa))
      out.push_back(isa);
  return out;
}

struct Shape {
  int64_t M, K, N;
};

const Shape kShapes[] = {
    // LinearTest's shapes
    {1, 1, 1}, {2, 1, 7}, {5, 3, 1}, {1, 7, 9}, {2, 8, 16}, {5, 15, 17}, {1, 16, 31}, {2, 17, 33},
    {5, 31, 64}, {1, 64, 255}, {2, 100, 256}, {5, 255, 257}, {1, 257, 300}, {2, 300, 511},
    {5, 511, 100}, {1, 600, 600}, {2, 599, 513}, {5, 129, 601}, {1, 1500, 40}, {2, 1500, 257},
    {5, 1500, 3}, {5, 1024, 23}, {2, 9, 1000},
    // every micro-kernel row count, vector tails of 16/32/64-wide unrolled loops
    {3, 97, 131}, {4, 65, 67}, {6, 47, 77}, {7, 33, 130}, {8, 129, 65}, {8, 1, 19},
    // long K, and N past one [K, N] column chunk (8192 / M columns)
    {1, 5000, 37}, {1, 4999, 70}, {1, 3, 8500}, {2, 2, 4500}, {3, 5, 2900},
    // M > 8: blocks of 8 rows plus a remainder, cache-blocked loops
    {9, 63, 45}, {17, 130, 99}, {33, 40, 70}, {12, 700, 300},
};

using Param = std::tuple<Ty, Ty, Ty, bool>; // x, w, y, transposed

class LinearIsaTest : public ::testing::TestWithParam<Param> {
protected:
  void TearDown() override {
    helm::kernels::setThreads(1);
    helm::kernels::resetIsaForTesting();
  }
};

TEST_P(LinearIsaTest, EveryPathMatchesFloat64Reference) {
  auto [xt, wt, yt, transposed] = GetParam();
  std::mt19937_64 rng(777 + int(xt) * 100 + int(wt) * 10 + int(yt) + (transposed ? 1000 : 0));
  const double u = std::ldexp(1.0, -24);
  const std::vector<Isa> isas = supportedIsas();
  for (const Shape &s : kShapes) {
    std::vector<unsigned char> xb, wb;
    std::vector<double> x = randomValues(size_t(s.M * s.K), xt, rng, xb);
    std::vector<double> w = randomValues(size_t(s.K * s.N), wt, rng, wb);
    std::vector<double> ref(size_t(s.M * s.N)), mag(size_t(s.M * s.N));
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        double acc = 0, a = 0;
        for (int64_t k = 0; k < s.K; ++k) {
          double wv = transposed ? w[size_t(n * s.K + k)] : w[size_t(k * s.N + n)];
          double p = x[size_t(m * s.K + k)] * wv;
          acc += p;
          a += std::fabs(p);
        }
        ref[size_t(m * s.N + n)] = acc;
        mag[size_t(m * s.N + n)] = a;
      }
    double kk = double(s.K + 1);
    double gamma = kk * u / (1 - kk * u);
    const std::vector<unsigned char> xCopy = xb, wCopy = wb;
    for (Isa isa : isas) {
      ASSERT_TRUE(helm::kernels::setIsaForTesting(isa));
      ASSERT_EQ(helm::kernels::activeIsa(), isa);
      for (int threads : {1, 2, 3}) {
        helm::kernels::setThreads(threads);
        std::vector<unsigned char> yb((size_t(s.M * s.N) + kGuard) * elemSize(yt), 0xff);
        helm_k_linear(xb.data(), int32_t(xt), wb.data(), int32_t(wt), transposed ? 1 : 0, yb.data(),
                      int32_t(yt), s.M, s.K, s.N);
        SCOPED_TRACE(std::string("isa ") + helm::kernels::isaName(isa) + " x " + tyName(xt) +
                     " w " + tyName(wt) + " y " + tyName(yt) + (transposed ? " [N,K]" : " [K,N]") +
                     " M=" + std::to_string(s.M) + " K=" + std::to_string(s.K) +
                     " N=" + std::to_string(s.N) + " threads=" + std::to_string(threads));
        int failures = 0;
        for (int64_t i = 0; i < s.M * s.N && failures < 5; ++i) {
          double got = decodeAt(yb.data(), yt, size_t(i));
          double bound = gamma * mag[size_t(i)];
          if (yt != Ty::f32)
            bound += 0.5 * ulpOf(std::fabs(ref[size_t(i)]) + bound, yt);
          double err = std::fabs(got - ref[size_t(i)]);
          if (!(err <= bound)) {
            ADD_FAILURE() << "y[" << i / s.N << "," << i % s.N << "] = " << got << ", reference "
                          << ref[size_t(i)] << ", error " << err << " > bound " << bound;
            ++failures;
          }
        }
        ASSERT_EQ(failures, 0);
        for (size_t g = size_t(s.M * s.N) * elemSize(yt); g < yb.size(); ++g)
          ASSERT_EQ(yb[g], 0xff) << "write past the end of y";
        ASSERT_EQ(xb, xCopy) << "x modified";
        ASSERT_EQ(wb, wCopy) << "w modified";
      }
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<Param> &info) {
  auto [xt, wt, yt, transposed] = info.param;
  return std::string("x_") + tyName(xt) + "_w_" + tyName(wt) + "_y_" + tyName(yt) +
         (transposed ? "_NK" : "_KN");
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LinearIsaTest,
                         ::testing::Combine(::testing::Values(Ty::f32, Ty::f16, Ty::bf16),
                                            ::testing::Values(Ty::f32, Ty::f16, Ty::bf16),
                                            ::testing::Values(Ty::f32, Ty::f16, Ty::bf16),
                                            ::testing::Bool()),
                         paramName);

// Small integers: every product and partial sum is exact in f32, so each path must give the
// integer result exactly, for M from 1 to 12, both layouts, several threads.
TEST(LinearIsa, ExactIntegerProductsOnEveryPath) {
  const int64_t K = 301, N = 203;
  for (Isa isa : supportedIsas()) {
    ASSERT_TRUE(helm::kernels::setIsaForTesting(isa));
    for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 12}) {
      std::vector<float> x(size_t(M * K)), wKN(size_t(K * N)), wNK(size_t(N * K));
      for (int64_t i = 0; i < M * K; ++i)
        x[size_t(i)] = float(int(i * 7 % 11) - 5);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) {
          float v = float(int((k * 13 + n * 5) % 9) - 4);
          wKN[size_t(k * N + n)] = v;
          wNK[size_t(n * K + k)] = v;
        }
      for (int threads : {1, 2}) {
        helm::kernels::setThreads(threads);
        for (bool tr : {false, true}) {
          std::vector<float> y(size_t(M * N), -999.0f);
          helm_k_linear(x.data(), 0, tr ? wNK.data() : wKN.data(), 0, tr, y.data(), 0, M, K, N);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              long want = 0;
              for (int64_t k = 0; k < K; ++k)
                want += long(x[size_t(m * K + k)]) * long(wKN[size_t(k * N + n)]);
              ASSERT_EQ(y[size_t(m * N + n)], float(want))
                  << helm::kernels::isaName(isa) << " M=" << M << " " << m << "," << n
                  << " transposed " << tr << " threads " << threads;
            }
        }
      }
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
