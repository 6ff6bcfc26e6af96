// Rotary base recovery from inv_freq constants, checked against frequencies computed here from a
// known theta (the way Hugging Face builds them).
#include "passes/raise/OnnxMatchers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {
std::vector<double> invFreq(double theta, int dim, bool asFloat) {
  std::vector<double> f;
  for (int i = 0; i < dim / 2; ++i) {
    double v = 1.0 / std::pow(theta, 2.0 * i / dim);
    f.push_back(asFloat ? double(float(v)) : v);
  }
  return f;
}
} // namespace

TEST(RopeTheta, RecoversCommonBases) {
  for (double theta : {10000.0, 500000.0, 1000000.0, 1e7})
    for (int dim : {16, 64, 128}) {
      auto t = helm::thetaFromInvFreq(invFreq(theta, dim, true), dim);
      ASSERT_TRUE(t.has_value()) << theta << " " << dim;
      EXPECT_DOUBLE_EQ(*t, theta) << dim;
    }
}

TEST(RopeTheta, RejectsScaledFrequencies) {
  auto f = invFreq(500000.0, 128, true);
  for (size_t i = f.size() / 2; i < f.size(); ++i) // Llama-3-style low-frequency scaling
    f[i] /= 8.0;
  EXPECT_FALSE(helm::thetaFromInvFreq(f, 128).has_value());
}

TEST(RopeTheta, RejectsWrongDimension) {
  EXPECT_FALSE(helm::thetaFromInvFreq(invFreq(10000.0, 64, true), 128).has_value() &&
               *helm::thetaFromInvFreq(invFreq(10000.0, 64, true), 128) == 10000.0);
  EXPECT_FALSE(helm::thetaFromInvFreq({1.0}, 2).has_value());
  EXPECT_FALSE(helm::thetaFromInvFreq({0.5, 0.25}, 4).has_value());
}

TEST(RopeTheta, RecoversFromFloat16RoundedFrequencies) {
  // inv_freq rounded through float16 (subnormal below 2^-14), as half-precision exports carry it.
  for (double theta : {10000.0, 1000000.0}) {
    auto f = invFreq(theta, 128, false);
    for (double &v : f) {
      llvm::APFloat h(v);
      bool lost = false;
      h.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &lost);
      h.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
      v = h.convertToDouble();
    }
    auto t = helm::thetaFromInvFreq(f, 128);
    ASSERT_TRUE(t.has_value()) << theta;
    EXPECT_DOUBLE_EQ(*t, theta);
  }
}
