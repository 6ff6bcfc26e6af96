//===- LinearCheck.h - helm_k_linear against a float64 reference (LinearTest, LinearIsaTest) ---===//
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
#ifndef HELM_TEST_UNIT_RUNTIME_LINEARCHECK_H
#define HELM_TEST_UNIT_RUNTIME_LINEARCHECK_H

#include "test/unit/Reference.h"

#include "contract/helm_contract.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace helm::test {

/// Every buffer is followed by this many guard elements.
constexpr size_t kLinearGuard = 64;

/// Random values in [-1, 1] (a few exact zeros and larger magnitudes mixed in), rounded to `t`.
/// Returns the exact values; `bytes` receives their encoding, followed by zeroed guard elements.
inline std::vector<double> linearRandomValues(size_t n, Ty t, std::mt19937_64 &rng,
                                              std::vector<unsigned char> &bytes) {
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<double> vals(n);
  bytes.assign((n + kLinearGuard) * elemSize(t), 0);
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

struct LinearShape {
  int64_t M, K, N;
};

/// M in {1, 2, 5}; K and N from 1 to ~600 with many values that are not multiples of 8 or 16, N on
/// both sides of 256 columns, and K up to 1500.
inline constexpr LinearShape kLinearShapes[] = {
    {1, 1, 1},     {2, 1, 7},     {5, 3, 1},     {1, 7, 9},      {2, 8, 16},     {5, 15, 17},
    {1, 16, 31},   {2, 17, 33},   {5, 31, 64},   {1, 64, 255},   {2, 100, 256},  {5, 255, 257},
    {1, 257, 300}, {2, 300, 511}, {5, 511, 100}, {1, 600, 600},  {2, 599, 513},  {5, 129, 601},
    {1, 1500, 40}, {2, 1500, 257}, {5, 1500, 3}, {5, 1024, 23},  {2, 9, 1000},
};

/// One shape's random exact x and W (drawn from `rng`, x first) and their float64 reference.
class LinearCase {
public:
  LinearCase(Ty xt, Ty wt, bool transposed, LinearShape s, std::mt19937_64 &rng)
      : xt_(xt), wt_(wt), transposed_(transposed), s_(s) {
    std::vector<double> x = linearRandomValues(size_t(s.M * s.K), xt, rng, xb_);
    std::vector<double> w = linearRandomValues(size_t(s.K * s.N), wt, rng, wb_); // storage order
    xCopy_ = xb_;
    wCopy_ = wb_;
    ref_.resize(size_t(s.M * s.N));
    mag_.resize(size_t(s.M * s.N));
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        double acc = 0, a = 0;
        for (int64_t k = 0; k < s.K; ++k) {
          // W(k, n) in logical [K, N] terms.
          double wv = transposed ? w[size_t(n * s.K + k)] : w[size_t(k * s.N + n)];
          double p = x[size_t(m * s.K + k)] * wv;
          acc += p;
          a += std::fabs(p);
        }
        ref_[size_t(m * s.N + n)] = acc;
        mag_[size_t(m * s.N + n)] = a;
      }
    const double u = std::ldexp(1.0, -24), kk = double(s.K + 1);
    gamma_ = kk * u / (1 - kk * u);
  }

  /// Calls helm_k_linear with the current pool and ISA and a y of type `yt` (NaN-filled, guards
  /// included) and checks every output against the reference, the guards, and that x and W are
  /// unchanged. Failures are fatal to the caller only through ASSERT_NO_FATAL_FAILURE.
  void run(Ty yt) const {
    // Output: NaN everywhere (all-ones bytes is NaN in all three types), guards included.
    std::vector<unsigned char> yb((size_t(s_.M * s_.N) + kLinearGuard) * elemSize(yt), 0xff);
    helm_k_linear(xb_.data(), int32_t(xt_), wb_.data(), int32_t(wt_), transposed_ ? 1 : 0,
                  yb.data(), int32_t(yt), s_.M, s_.K, s_.N);
    SCOPED_TRACE("x " + std::string(tyName(xt_)) + " w " + tyName(wt_) + " y " + tyName(yt) +
                 (transposed_ ? " [N,K]" : " [K,N]") + " M=" + std::to_string(s_.M) +
                 " K=" + std::to_string(s_.K) + " N=" + std::to_string(s_.N));
    int failures = 0;
    for (int64_t i = 0; i < s_.M * s_.N && failures < 5; ++i) {
      double got = decodeAt(yb.data(), yt, size_t(i));
      double bound = gamma_ * mag_[size_t(i)];
      if (yt != Ty::f32)
        bound += 0.5 * ulpOf(std::fabs(ref_[size_t(i)]) + bound, yt);
      double err = std::fabs(got - ref_[size_t(i)]);
      if (!(err <= bound)) { // NaN (element never written) fails too
        ADD_FAILURE() << "y[" << i / s_.N << "," << i % s_.N << "] = " << got << ", reference "
                      << ref_[size_t(i)] << ", error " << err << " > bound " << bound;
        ++failures;
      }
    }
    ASSERT_EQ(failures, 0);
    for (size_t g = size_t(s_.M * s_.N) * elemSize(yt); g < yb.size(); ++g)
      ASSERT_EQ(yb[g], 0xff) << "write past the end of y";
    ASSERT_EQ(xb_, xCopy_) << "x modified";
    ASSERT_EQ(wb_, wCopy_) << "w modified";
  }

private:
  Ty xt_, wt_;
  bool transposed_;
  LinearShape s_;
  std::vector<unsigned char> xb_, wb_, xCopy_, wCopy_;
  std::vector<double> ref_, mag_;
  double gamma_ = 0;
};

/// Small integers make every product and partial sum exact in f32, so y[M, N] must equal the
/// integer reference exactly, in both layouts, with the current pool and ISA.
inline void checkExactIntegerProducts(int64_t M, int64_t K, int64_t N) {
  std::vector<float> x(size_t(M * K)), wKN(size_t(K * N)), wNK(size_t(N * K));
  for (int64_t i = 0; i < M * K; ++i)
    x[size_t(i)] = float(int(i * 7 % 11) - 5);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      float v = float(int((k * 13 + n * 5) % 9) - 4);
      wKN[size_t(k * N + n)] = v;
      wNK[size_t(n * K + k)] = v;
    }
  for (bool tr : {false, true}) {
    std::vector<float> y(size_t(M * N), -999.0f);
    helm_k_linear(x.data(), 0, tr ? wNK.data() : wKN.data(), 0, tr, y.data(), 0, M, K, N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        long want = 0;
        for (int64_t k = 0; k < K; ++k)
          want += long(x[size_t(m * K + k)]) * long(wKN[size_t(k * N + n)]);
        ASSERT_EQ(y[size_t(m * N + n)], float(want))
            << "M=" << M << " " << m << "," << n << " transposed " << tr;
      }
  }
}

/// x, w and y element types and whether W is [N, K]: every combination, named x_f16_w_bf16_y_f32_NK.
using LinearParam = std::tuple<Ty, Ty, Ty, bool>;
inline auto allLinearParams() {
  return ::testing::Combine(::testing::Values(Ty::f32, Ty::f16, Ty::bf16),
                            ::testing::Values(Ty::f32, Ty::f16, Ty::bf16),
                            ::testing::Values(Ty::f32, Ty::f16, Ty::bf16), ::testing::Bool());
}
inline std::string linearParamName(const ::testing::TestParamInfo<LinearParam> &info) {
  auto [xt, wt, yt, transposed] = info.param;
  return std::string("x_") + tyName(xt) + "_w_" + tyName(wt) + "_y_" + tyName(yt) +
         (transposed ? "_NK" : "_KN");
}

} // namespace helm::test

#endif
