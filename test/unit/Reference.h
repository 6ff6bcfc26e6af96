//===- Reference.h - independent reference conversions for the runtime tests ------===//
//
// Written for the tests from the IEEE 754 definitions, with double arithmetic (every value used
// here is exact in double): they share no code with kernels/cpu/Numeric.{h,cpp}.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_TEST_UNIT_RUNTIME_REFERENCE_H
#define HELM_TEST_UNIT_RUNTIME_REFERENCE_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace helm::test {

enum class Ty { f32 = 0, f16 = 1, bf16 = 2 };

inline const char *tyName(Ty t) { return t == Ty::f32 ? "f32" : t == Ty::f16 ? "f16" : "bf16"; }

inline float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t toBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// Significand bits (including the implicit one) and exponent range of a binary format.
struct Format {
  int precision; // p: 11 for binary16, 8 for bfloat16, 24 for binary32
  int minExp;    // exponent of the smallest normal: 2^minExp
  int maxExp;    // exponent of the largest binade: values < 2^(maxExp+1)
};
inline Format formatOf(Ty t) {
  switch (t) {
  case Ty::f16: return {11, -14, 15};
  case Ty::bf16: return {8, -126, 127};
  case Ty::f32: return {24, -126, 127};
  }
  return {24, -126, 127};
}

/// Spacing of representable numbers of `t` around magnitude `a` (>= 0): 2^(e - p + 1) for a in
/// [2^e, 2^(e+1)), and the subnormal spacing below the smallest normal.
inline double ulpOf(double a, Ty t) {
  Format f = formatOf(t);
  int e = f.minExp;
  if (a >= std::ldexp(1.0, f.minExp)) {
    int ex;
    std::frexp(a, &ex); // a = m * 2^ex, m in [0.5, 1): a in [2^(ex-1), 2^ex)
    e = ex - 1;
  }
  return std::ldexp(1.0, e - f.precision + 1);
}

/// Rounds the finite double `x` to format `t` (nearest, ties to even); returns +-inf on overflow.
/// The result is a double holding the exactly representable value.
inline double roundToFormat(double x, Ty t) {
  Format f = formatOf(t);
  double a = std::fabs(x);
  double q = ulpOf(a, t);
  double n = a / q; // exact: q is a power of two
  double fl = std::floor(n);
  double frac = n - fl;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(fl, 2.0) != 0.0))
    fl += 1.0;
  double r = fl * q;
  // Largest finite value: (2 - 2^(1-p)) * 2^maxExp; anything that rounds above it overflows.
  double maxFinite = (2.0 - std::ldexp(1.0, 1 - f.precision)) * std::ldexp(1.0, f.maxExp);
  if (r > maxFinite)
    r = std::numeric_limits<double>::infinity();
  return std::signbit(x) ? -r : r;
}

/// 16-bit encoding of format `t` (f16 or bf16: sign, exponent biased by maxExp, p - 1 fraction
/// bits) -> value (exact in double).
inline double refDecode16(uint16_t bits, Ty t) {
  Format f = formatOf(t);
  int fracBits = f.precision - 1, expMax = (1 << (15 - fracBits)) - 1;
  int sign = bits >> 15, exp = (bits >> fracBits) & expMax, mant = bits & ((1 << fracBits) - 1);
  double v;
  if (exp == 0) // zero or subnormal: mant * 2^(minExp - fracBits)
    v = std::ldexp(double(mant), f.minExp - fracBits);
  else if (exp == expMax)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(double((1 << fracBits) + mant), exp - f.maxExp - fracBits);
  return sign ? -v : v;
}

/// binary16 bits -> value (exact in double).
inline double refHalfToDouble(uint16_t h) { return refDecode16(h, Ty::f16); }

/// An exactly representable binary16 value (finite or infinite, not NaN) -> its bits.
inline uint16_t refEncodeHalf(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isinf(a))
    return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14))
    return uint16_t(sign | uint16_t(a * std::ldexp(1.0, 24))); // subnormal: a / 2^-24
  int ex;
  double m = std::frexp(a, &ex); // a = m * 2^ex, m in [0.5, 1)
  int biased = ex - 1 + 15;
  uint16_t mant = uint16_t(m * 2048.0 - 1024.0);
  return uint16_t(sign | (biased << 10) | mant);
}

/// float -> binary16 bits by definition (not for NaN).
inline uint16_t refFloatToHalf(float f) { return refEncodeHalf(roundToFormat(double(f), Ty::f16)); }

/// float -> bfloat16 bits by definition (not for NaN): round in double, then take the upper half of
/// the (exact) float.
inline uint16_t refFloatToBf16(float f) {
  double r = roundToFormat(double(f), Ty::bf16);
  return uint16_t(toBits(float(r)) >> 16); // r is a bfloat16 value, so exact in float
}
inline double refBf16ToDouble(uint16_t b) { return refDecode16(b, Ty::bf16); }

inline size_t elemSize(Ty t) { return t == Ty::f32 ? 4 : 2; }

/// Stores the exactly representable value `v` of type `t` as element i of `bytes`.
inline void encodeAt(unsigned char *bytes, Ty t, size_t i, double v) {
  switch (t) {
  case Ty::f32: {
    float f = float(v);
    std::memcpy(bytes + i * 4, &f, 4);
    return;
  }
  case Ty::f16: {
    uint16_t h = refEncodeHalf(v);
    std::memcpy(bytes + i * 2, &h, 2);
    return;
  }
  case Ty::bf16: {
    uint16_t b = uint16_t(toBits(float(v)) >> 16);
    std::memcpy(bytes + i * 2, &b, 2);
    return;
  }
  }
}

/// Element i of a buffer of type `t`, as a double (NaN for NaN encodings).
inline double decodeAt(const unsigned char *bytes, Ty t, size_t i) {
  if (t == Ty::f32) {
    float f;
    std::memcpy(&f, bytes + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bytes + i * 2, 2);
  return refDecode16(h, t);
}

} // namespace helm::test

#endif
