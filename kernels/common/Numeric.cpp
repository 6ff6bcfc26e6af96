//===- Numeric.cpp - f16 conversions ---------------------------------------------===//
#include "kernels/common/Numeric.h"

#include <array>
#include <cmath>

namespace helm::kernels {

namespace {
float halfToFloatSlow(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // zero or subnormal: mant * 2^-24
    float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31)
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

const std::array<float, 65536> &halfTable() {
  static const std::array<float, 65536> table = [] {
    std::array<float, 65536> t{};
    for (uint32_t i = 0; i < 65536; ++i)
      t[i] = halfToFloatSlow(uint16_t(i));
    return t;
  }();
  return table;
}
} // namespace

float halfToFloat(uint16_t h) { return halfTable()[h]; }

uint16_t floatToHalf(float f) {
  uint32_t u = floatToBits(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) // NaN: keep quiet NaN
    return uint16_t(sign | 0x7e00 | ((absu >> 13) & 0x3ff));
  if (absu >= 0x477ff000u) // rounds to >= 65520: infinity
    return uint16_t(sign | 0x7c00);
  if (absu < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24, rounded to nearest even.
    float a = bitsToFloat(absu);
    float scaled = a * 16777216.0f; // exact: a < 2^-14, scaled < 1024
    float r = std::nearbyint(scaled); // default rounding mode: nearest even
    return uint16_t(sign | uint32_t(r));
  }
  // Normal: rebias exponent, round mantissa 23 -> 10 bits to nearest even.
  uint32_t rounded = absu + 0xfffu + ((absu >> 13) & 1u);
  return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}

} // namespace helm::kernels
