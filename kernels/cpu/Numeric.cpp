//===- Numeric.cpp - f16 conversions ---------------------------------------------===//
#include "kernels/cpu/Numeric.h"

#include <immintrin.h>

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

namespace {
// F16C converts 8 values per instruction with the same result as the scalar code (round to
// nearest even, quiet NaNs kept, subnormals exact): used when the CPU has it.
bool hasF16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}

__attribute__((target("avx,f16c"))) void widenF16c(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i))));
  for (; i < n; ++i)
    d[i] = halfToFloat(s[i]);
}

__attribute__((target("avx,f16c"))) void narrowF16c(const float *s, uint16_t *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i)
    d[i] = floatToHalf(s[i]);
}
} // namespace

void narrow(const float *src, DType dtype, void *dst, int64_t n) {
  switch (dtype) {
  case DType::f32:
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  case DType::f16: {
    auto *d = static_cast<uint16_t *>(dst);
    if (hasF16c()) {
      narrowF16c(src, d, n);
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      d[i] = floatToHalf(src[i]);
    return;
  }
  case DType::bf16: {
    auto *d = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = floatToBf16(src[i]);
    return;
  }
  }
}

void widen(const void *src, DType dtype, float *dst, int64_t n) {
  switch (dtype) {
  case DType::f32:
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  case DType::f16: {
    auto *s = static_cast<const uint16_t *>(src);
    if (hasF16c()) {
      widenF16c(s, dst, n);
      return;
    }
    const float *table = halfTable().data();
    for (int64_t i = 0; i < n; ++i)
      dst[i] = table[s[i]];
    return;
  }
  case DType::bf16: {
    auto *s = static_cast<const uint16_t *>(src);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(s[i]);
    return;
  }
  }
}

} // namespace helm::kernels
