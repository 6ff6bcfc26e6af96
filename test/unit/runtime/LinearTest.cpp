//===- LinearTest.cpp - helm_k_linear against a float64 reference ------------------===//
//
// Inputs are random values that are exactly representable in their element type; the reference is
// the dot product of those exact values in double (53-bit: its own error is below 2^-53 * K of the
// magnitudes, negligible next to the bounds used here).
//
// Error bound, f32 output. The kernel's contract is "widen to f32, accumulate in f32, round the
// output once". Whatever the summation order, blocking, vectorisation or use of FMA, a float dot
// product of length K satisfies the classical bound (Higham, Accuracy and Stability of Numerical
// Algorithms, eq. 3.5):  |fl(x.w) - x.w| <= gamma_K * sum_k |x_k w_k|,  gamma_K = K u / (1 - K u),
// u = 2^-24. We use gamma_(K+1) (one more unit covers the reference's double rounding) and scale by
// sum |x_k w_k| rather than |x.w|, since the latter can cancel to ~0. For K = 1500 this is ~9e-5 of
// sum|xw|, on the order of the 1e-5 * sqrt(K) rule of thumb, but a rigorous bound instead of a
// statistical one; any lower-precision step (inputs narrowed to bf16/f16, f16 accumulation, a lost
// or duplicated term) exceeds it by orders of magnitude.
//
// f16/bf16 output: the f32 result is then rounded once to nearest, adding at most half a unit in the
// last place of the output type (at the magnitude of the result), so |y - ref| <= bound_f32 + ulp/2.
//
//===----------------------------------------------------------------------===//
#include "Reference.h"

#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/helm_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace helm::test;

namespace {

/// A buffer of `n` elements of type `t`, followed by `kGuard` guard elements.
constexpr size_t kGuard = 64;

/// Random values in [-1, 1] (a few exact zeros and larger magnitudes mixed in), rounded to `t`.
/// Returns the exact values; `bytes` receives their encoding.
std::vector<double> makeValues(size_t n, Ty t, std::mt19937_64 &rng, std::vector<unsigned char> &bytes) {
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<double> vals(n);
  bytes.assign((n + kGuard) * elemSize(t), 0);
  for (size_t i = 0; i < n; ++i) {
    double v = uni(rng);
    if (rng() % 50 == 0)
      v = 0;
    else if (rng() % 50 == 0)
      v *= 8;
    double r = roundToFormat(v, t);
    vals[i] = r;
    encodeAt(bytes.data(), t, i, r);
  }
  return vals;
}

struct Shape {
  int64_t M, K, N;
};

// M in {1, 2, 5}; K and N from 1 to ~600 with many values that are not multiples of 8 or 16, N on
// both sides of the kernel's 256-column block, and K up to 1500.
const Shape kShapes[] = {
    {1, 1, 1},     {2, 1, 7},     {5, 3, 1},     {1, 7, 9},      {2, 8, 16},     {5, 15, 17},
    {1, 16, 31},   {2, 17, 33},   {5, 31, 64},   {1, 64, 255},   {2, 100, 256},  {5, 255, 257},
    {1, 257, 300}, {2, 300, 511}, {5, 511, 100}, {1, 600, 600},  {2, 599, 513},  {5, 129, 601},
    {1, 1500, 40}, {2, 1500, 257}, {5, 1500, 3}, {5, 1024, 23},  {2, 9, 1000},
};

using Param = std::tuple<Ty, Ty, Ty, bool>; // x, w, y, transposed

class LinearTest : public ::testing::TestWithParam<Param> {
protected:
  void TearDown() override { helm::kernels::setThreads(1); }
};

TEST_P(LinearTest, MatchesFloat64Reference) {
  auto [xt, wt, yt, transposed] = GetParam();
  std::mt19937_64 rng(1234 + int(xt) * 100 + int(wt) * 10 + int(yt) + (transposed ? 1000 : 0));
  const double u = std::ldexp(1.0, -24);
  for (const Shape &s : kShapes) {
    std::vector<unsigned char> xb, wb;
    std::vector<double> x = makeValues(size_t(s.M * s.K), xt, rng, xb);
    std::vector<double> w = makeValues(size_t(s.K * s.N), wt, rng, wb); // storage order
    // W(k, n) in logical [K, N] terms.
    auto W = [&](int64_t k, int64_t n) {
      return transposed ? w[size_t(n * s.K + k)] : w[size_t(k * s.N + n)];
    };
    std::vector<double> ref(size_t(s.M * s.N)), mag(size_t(s.M * s.N));
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        double acc = 0, a = 0;
        for (int64_t k = 0; k < s.K; ++k) {
          double p = x[size_t(m * s.K + k)] * W(k, n);
          acc += p;
          a += std::fabs(p);
        }
        ref[size_t(m * s.N + n)] = acc;
        mag[size_t(m * s.N + n)] = a;
      }
    double kk = double(s.K + 1);
    double gamma = kk * u / (1 - kk * u);
    std::vector<unsigned char> xCopy = xb, wCopy = wb;
    for (int threads : {1, 2, 3}) {
      helm::kernels::setThreads(threads);
      // Output: NaN everywhere (all-ones bytes is NaN in all three types), guards included.
      std::vector<unsigned char> yb((size_t(s.M * s.N) + kGuard) * elemSize(yt), 0xff);
      helm_k_linear(xb.data(), int32_t(xt), wb.data(), int32_t(wt), transposed ? 1 : 0, yb.data(),
                    int32_t(yt), s.M, s.K, s.N);
      SCOPED_TRACE("x " + std::string(tyName(xt)) + " w " + tyName(wt) + " y " + tyName(yt) +
                   (transposed ? " [N,K]" : " [K,N]") + " M=" + std::to_string(s.M) +
                   " K=" + std::to_string(s.K) + " N=" + std::to_string(s.N) +
                   " threads=" + std::to_string(threads));
      int failures = 0;
      for (int64_t i = 0; i < s.M * s.N && failures < 5; ++i) {
        double got = decodeAt(yb.data(), yt, size_t(i));
        double bound = gamma * mag[size_t(i)];
        if (yt != Ty::f32)
          bound += 0.5 * ulpOf(std::fabs(ref[size_t(i)]) + bound, yt);
        double err = std::fabs(got - ref[size_t(i)]);
        if (!(err <= bound)) { // NaN (element never written) fails too
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

std::string paramName(const ::testing::TestParamInfo<Param> &info) {
  auto [xt, wt, yt, transposed] = info.param;
  return std::string("x_") + tyName(xt) + "_w_" + tyName(wt) + "_y_" + tyName(yt) +
         (transposed ? "_NK" : "_KN");
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LinearTest,
                         ::testing::Combine(::testing::Values(Ty::f32, Ty::f16, Ty::bf16),
                                            ::testing::Values(Ty::f32, Ty::f16, Ty::bf16),
                                            ::testing::Values(Ty::f32, Ty::f16, Ty::bf16),
                                            ::testing::Bool()),
                         paramName);

// Exact cases: small integers make every product and partial sum exact in f32, so the result must
// equal the integer reference exactly, in both layouts and with several threads.
TEST(Linear, ExactIntegerProducts) {
  const int64_t M = 3, K = 37, N = 45;
  std::vector<float> x(size_t(M * K)), wKN(size_t(K * N)), wNK(size_t(N * K));
  for (int64_t i = 0; i < M * K; ++i)
    x[size_t(i)] = float(int(i * 7 % 11) - 5);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      float v = float(int((k * 13 + n * 5) % 9) - 4);
      wKN[size_t(k * N + n)] = v;
      wNK[size_t(n * K + k)] = v;
    }
  for (int threads : {1, 3}) {
    helm::kernels::setThreads(threads);
    for (bool tr : {false, true}) {
      std::vector<float> y(size_t(M * N), -999.0f);
      helm_k_linear(x.data(), 0, tr ? wNK.data() : wKN.data(), 0, tr, y.data(), 0, M, K, N);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          long want = 0;
          for (int64_t k = 0; k < K; ++k)
            want += long(x[size_t(m * K + k)]) * long(wKN[size_t(k * N + n)]);
          ASSERT_EQ(y[size_t(m * N + n)], float(want)) << m << "," << n << " transposed " << tr;
        }
    }
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
  EXPECT_DEATH(helm_k_linear(x.data(), 0, w.data(), 3, 0, y.data(), 0, 2, 2, 2),
               "helm_k_linear: invalid call: dtype codes x 0, w 3, y 0");
  EXPECT_DEATH(helm_k_linear(x.data(), -1, w.data(), 0, 1, y.data(), 0, 2, 2, 2),
               "dtype codes x -1");
  EXPECT_DEATH(helm_k_linear(x.data(), 0, w.data(), 0, 0, y.data(), 7, 2, 2, 2), "y 7");
  EXPECT_DEATH(helm_k_linear(x.data(), 0, w.data(), 0, 0, y.data(), 0, 2, -1, 2), "K = -1");
}

} // namespace
