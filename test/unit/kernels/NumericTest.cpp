//===- NumericTest.cpp - f16/bf16 conversions against a by-definition reference ---===//
#include "test/unit/Reference.h"

#include "kernels/common/Isa.h"
#include "kernels/common/Numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace helm::test;
namespace k = helm::kernels;

namespace {

bool isHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool isBf16NaN(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

/// Random floats spread over every exponent: random bit patterns, plus values concentrated in the
/// binary16 range (subnormals of f16 and of f32 included), plus exact f16 midpoints.
std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out;
  out.reserve(n);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_int_distribution<int> exp16(-27, 17), exp32(-149, -120);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  for (size_t i = 0; i < n; ++i) {
    switch (i % 5) {
    case 0: out.push_back(fromBits(bits(rng))); break;
    case 1: out.push_back(float(std::ldexp(mant(rng), exp16(rng)) * (rng() & 1 ? -1 : 1))); break;
    case 2: out.push_back(fromBits(bits(rng) & 0x807fffffu)); break; // f32 subnormals
    case 3: {
      // Exact midpoints between two neighbouring halves (and their float neighbours).
      uint16_t h = uint16_t(rng() & 0x7bfe);
      double mid = (refHalfToDouble(h) + refHalfToDouble(uint16_t(h + 1))) / 2;
      float m = float(mid);
      int step = int(rng() % 3) - 1;
      out.push_back(fromBits(toBits(m) + uint32_t(step)) * (rng() & 1 ? -1.0f : 1.0f));
      break;
    }
    case 4: out.push_back(float(std::ldexp(mant(rng), exp32(rng)))); break;
    }
  }
  return out;
}

} // namespace

TEST(Half, EveryValueDecodesAndRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    uint16_t h = uint16_t(i);
    float f = k::halfToFloat(h);
    double want = refHalfToDouble(h);
    if (isHalfNaN(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << i;
      EXPECT_TRUE(isHalfNaN(k::floatToHalf(f))) << "NaN 0x" << std::hex << i << " -> 0x"
                                                << k::floatToHalf(f);
      continue;
    }
    ASSERT_EQ(double(f), want) << "0x" << std::hex << i;
    ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << "0x" << std::hex << i;
    ASSERT_EQ(k::floatToHalf(f), h) << "0x" << std::hex << i;
  }
}

TEST(Half, RoundingCases) {
  auto h = [](double v) { return k::floatToHalf(float(v)); };
  // Ties to even between 1 (0x3c00) and 1 + 2^-10 (0x3c01): down to the even 0x3c00.
  EXPECT_EQ(h(1.0 + std::ldexp(1.0, -11)), 0x3c00);
  // Tie between 0x3c01 and 0x3c02: up to the even 0x3c02.
  EXPECT_EQ(h(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);
  // Just above / below a tie.
  EXPECT_EQ(h(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -20)), 0x3c01);
  EXPECT_EQ(h(1.0 + 3 * std::ldexp(1.0, -11) - std::ldexp(1.0, -20)), 0x3c01);
  // Largest finite and overflow: 65504 is 0x7bff; [65504, 65520) rounds to it; >= 65520 is inf.
  EXPECT_EQ(h(65504.0), 0x7bff);
  EXPECT_EQ(h(65519.99), 0x7bff);
  EXPECT_EQ(k::floatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(h(65520.0), 0x7c00);
  EXPECT_EQ(h(-65520.0), 0xfc00);
  EXPECT_EQ(h(1e6), 0x7c00);
  EXPECT_EQ(h(3.4e38), 0x7c00);
  EXPECT_EQ(k::floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(k::floatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(isHalfNaN(k::floatToHalf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(isHalfNaN(k::floatToHalf(fromBits(0x7f800001u)))); // signalling NaN, low payload
  EXPECT_TRUE(isHalfNaN(k::floatToHalf(fromBits(0xffc00000u))));
  // Zeros keep their sign.
  EXPECT_EQ(h(0.0), 0x0000);
  EXPECT_EQ(h(-0.0), 0x8000);
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie with 0 (even: 0); 3 * 2^-25 ties to 2.
  EXPECT_EQ(h(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(h(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(h(-std::ldexp(1.0, -25)), 0x8000);
  EXPECT_EQ(h(std::ldexp(1.0, -25) + std::ldexp(1.0, -40)), 0x0001);
  EXPECT_EQ(h(3 * std::ldexp(1.0, -25)), 0x0002);
  EXPECT_EQ(h(5 * std::ldexp(1.0, -25)), 0x0002);
  EXPECT_EQ(h(1023 * std::ldexp(1.0, -24)), 0x03ff);
  // Between the largest subnormal and the smallest normal: the tie goes to 2^-14 (0x0400, even).
  EXPECT_EQ(h(std::ldexp(1.0, -14) - std::ldexp(1.0, -25)), 0x0400);
  EXPECT_EQ(h(std::ldexp(1.0, -14)), 0x0400);
  // Rounding that carries into the next binade.
  EXPECT_EQ(h(2.0 - std::ldexp(1.0, -12)), 0x4000);
  EXPECT_EQ(h(std::ldexp(1.0, -30)), 0x0000);  // far below: zero
  EXPECT_EQ(h(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Half, MatchesReferenceOnRandomFloats) {
  std::vector<float> values = randomFloats(1 << 20, 12345);
  size_t checked = 0;
  for (float f : values) {
    uint16_t got = k::floatToHalf(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(isHalfNaN(got)) << std::hex << toBits(f);
      continue;
    }
    uint16_t want = refFloatToHalf(f);
    ASSERT_EQ(got, want) << "float bits 0x" << std::hex << toBits(f) << " (" << f << ")";
    ++checked;
  }
  EXPECT_GT(checked, size_t(1000000));
}

TEST(Bf16, EveryValueDecodesAndRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    uint16_t b = uint16_t(i);
    float f = k::bf16ToFloat(b);
    if (isBf16NaN(b)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(isBf16NaN(k::floatToBf16(f))) << std::hex << i;
      continue;
    }
    ASSERT_EQ(double(f), refBf16ToDouble(b)) << "0x" << std::hex << i;
    ASSERT_EQ(std::signbit(f), bool(b & 0x8000)) << "0x" << std::hex << i;
    ASSERT_EQ(k::floatToBf16(f), b) << "0x" << std::hex << i;
  }
}

TEST(Bf16, RoundingCases) {
  auto b = [](double v) { return k::floatToBf16(float(v)); };
  EXPECT_EQ(b(1.0), 0x3f80);
  EXPECT_EQ(b(1.0 + std::ldexp(1.0, -8)), 0x3f80);     // tie: down to even
  EXPECT_EQ(b(1.0 + 3 * std::ldexp(1.0, -8)), 0x3f82); // tie: up to even
  EXPECT_EQ(b(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20)), 0x3f81);
  EXPECT_EQ(b(-0.0), 0x8000);
  EXPECT_EQ(b(std::numeric_limits<float>::max()), 0x7f80); // rounds up past the largest bf16
  EXPECT_EQ(b(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(k::floatToBf16(std::numeric_limits<float>::denorm_min()), 0x0000); // 2^-149: far below 2^-134
  EXPECT_EQ(k::floatToBf16(fromBits(0x00010000u)), 0x0001);                     // smallest bf16 subnormal
  EXPECT_EQ(k::floatToBf16(fromBits(0x00018000u)), 0x0002);                     // tie 1|2 -> 2
  EXPECT_EQ(k::floatToBf16(fromBits(0x00008000u)), 0x0000);                     // tie 0|1 -> 0
  EXPECT_TRUE(isBf16NaN(k::floatToBf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(isBf16NaN(k::floatToBf16(fromBits(0x7f800001u)))); // NaN whose payload is only low bits
  EXPECT_TRUE(isBf16NaN(k::floatToBf16(fromBits(0xff800001u))));
  EXPECT_EQ(k::floatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
}

TEST(Bf16, MatchesReferenceOnRandomFloats) {
  std::vector<float> values = randomFloats(1 << 20, 777);
  // Also bf16 midpoints and their neighbours.
  std::mt19937 rng(99);
  for (int i = 0; i < 100000; ++i) {
    uint32_t mid = ((rng() & 0x7f7fffffu) & 0xffff0000u) | 0x8000u;
    values.push_back(fromBits(mid + uint32_t(int(rng() % 3) - 1)));
  }
  for (float f : values) {
    uint16_t got = k::floatToBf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(isBf16NaN(got)) << std::hex << toBits(f);
      continue;
    }
    ASSERT_EQ(got, refFloatToBf16(f)) << "float bits 0x" << std::hex << toBits(f) << " (" << f << ")";
  }
}

// widen and narrow (Convert.cpp) on every instruction-set path this CPU has: every half value
// widens exactly, and 2^20 random floats narrow to the reference's bits, at lengths that leave
// masked / scalar tails (13, 7, 1) as well as the full vector loops.
TEST(Numeric, WidenAndNarrowArraysMatchReferenceOnEveryPath) {
  std::vector<uint16_t> every(65536);
  for (size_t i = 0; i < every.size(); ++i)
    every[i] = uint16_t(i);
  std::vector<float> values = randomFloats(1 << 20, 777);
  for (k::Isa isa : {k::Isa::scalar, k::Isa::avx2, k::Isa::avx512}) {
    if (!k::setIsaForTesting(isa))
      continue;
    SCOPED_TRACE(k::isaName(isa));
    std::vector<float> wide(every.size());
    k::widen(every.data(), k::DType::f16, wide.data(), int64_t(every.size()));
    std::vector<float> wideBf(every.size());
    k::widen(every.data(), k::DType::bf16, wideBf.data(), int64_t(every.size()));
    for (size_t i = 0; i < every.size(); ++i) {
      if (isHalfNaN(every[i]))
        ASSERT_TRUE(std::isnan(wide[i])) << i;
      else
        ASSERT_EQ(double(wide[i]), refHalfToDouble(every[i])) << std::hex << i;
      if (isBf16NaN(every[i]))
        ASSERT_TRUE(std::isnan(wideBf[i])) << i;
      else
        ASSERT_EQ(double(wideBf[i]), refBf16ToDouble(every[i])) << std::hex << i;
    }
    for (int64_t n : {int64_t(values.size()), int64_t(13), int64_t(7), int64_t(1)}) {
      std::vector<uint16_t> half(static_cast<size_t>(n)), bf(static_cast<size_t>(n));
      std::vector<float> same(static_cast<size_t>(n));
      k::narrow(values.data(), k::DType::f16, half.data(), n);
      k::narrow(values.data(), k::DType::bf16, bf.data(), n);
      k::narrow(values.data(), k::DType::f32, same.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        float f = values[size_t(i)];
        if (std::isnan(f)) {
          // NaNs are quieted the same way on every path (Convert.cpp's contract): the vector
          // results equal the scalar conversions bit for bit.
          ASSERT_TRUE(isHalfNaN(half[size_t(i)]) && isBf16NaN(bf[size_t(i)])) << i;
          ASSERT_EQ(half[size_t(i)], k::floatToHalf(f)) << "float bits 0x" << std::hex << toBits(f);
          ASSERT_EQ(bf[size_t(i)], k::floatToBf16(f)) << "float bits 0x" << std::hex << toBits(f);
          continue;
        }
        ASSERT_EQ(half[size_t(i)], refFloatToHalf(f)) << "float bits 0x" << std::hex << toBits(f);
        ASSERT_EQ(bf[size_t(i)], refFloatToBf16(f)) << "float bits 0x" << std::hex << toBits(f);
        ASSERT_EQ(toBits(same[size_t(i)]), toBits(f));
      }
    }
  }
  k::resetIsaForTesting();
}

// roundInPlace (the attention kernel's rounding points) against the references, on every path:
// one value in f16/bf16 widened back, f32 untouched, at lengths around its 256-element chunks.
TEST(Numeric, RoundInPlaceMatchesReferenceOnEveryPath) {
  std::vector<float> values = randomFloats(4099, 31);
  for (k::Isa isa : {k::Isa::scalar, k::Isa::avx2, k::Isa::avx512}) {
    if (!k::setIsaForTesting(isa))
      continue;
    SCOPED_TRACE(k::isaName(isa));
    for (int64_t n : {int64_t(values.size()), int64_t(256), int64_t(257), int64_t(3)}) {
      std::vector<float> h(values.begin(), values.begin() + n), b = h, f = h;
      k::roundInPlace(h.data(), k::DType::f16, n);
      k::roundInPlace(b.data(), k::DType::bf16, n);
      k::roundInPlace(f.data(), k::DType::f32, n);
      for (int64_t i = 0; i < n; ++i) {
        float v = values[size_t(i)];
        if (std::isnan(v)) {
          ASSERT_TRUE(std::isnan(h[size_t(i)]) && std::isnan(b[size_t(i)]));
          continue;
        }
        ASSERT_EQ(double(h[size_t(i)]), refHalfToDouble(refFloatToHalf(v))) << std::hex << toBits(v);
        ASSERT_EQ(double(b[size_t(i)]), refBf16ToDouble(refFloatToBf16(v))) << std::hex << toBits(v);
        ASSERT_EQ(toBits(f[size_t(i)]), toBits(v));
      }
    }
  }
  k::resetIsaForTesting();
}

TEST(Numeric, WidenAndRoundTo) {
  std::mt19937 rng(5);
  std::vector<uint16_t> halves(1000), bfs(1000);
  std::vector<float> floats(1000);
  for (size_t i = 0; i < halves.size(); ++i) {
    do
      halves[i] = uint16_t(rng());
    while (isHalfNaN(halves[i]));
    do
      bfs[i] = uint16_t(rng());
    while (isBf16NaN(bfs[i]));
    floats[i] = float(std::ldexp(double(rng() % 100000) - 50000, -10));
  }
  std::vector<float> out(1000);
  k::widen(halves.data(), k::DType::f16, out.data(), 1000);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(double(out[i]), refHalfToDouble(halves[i])) << i;
  k::widen(bfs.data(), k::DType::bf16, out.data(), 1000);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(double(out[i]), refBf16ToDouble(bfs[i])) << i;
  k::widen(floats.data(), k::DType::f32, out.data(), 1000);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], floats[i]) << i;
  for (float f : {0.1f, -3.14159f, 1e-6f, 70000.0f, 1e-30f}) {
    EXPECT_EQ(k::roundTo(f, k::DType::f32), f);
    EXPECT_EQ(double(k::roundTo(f, k::DType::f16)), roundToFormat(f, Ty::f16)) << f;
    EXPECT_EQ(double(k::roundTo(f, k::DType::bf16)), roundToFormat(f, Ty::bf16)) << f;
  }
}
