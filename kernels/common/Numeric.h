//===- Numeric.h - f16/bf16 conversions shared by kernels and runtime ------------===//
#ifndef HELM_KERNELS_COMMON_NUMERIC_H
#define HELM_KERNELS_COMMON_NUMERIC_H

#include "contract/helm_contract.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace helm::kernels {

/// The contract's element types (helm_dtype) as a C++ enum.
enum class DType : int32_t { f32 = HELM_DTYPE_F32, f16 = HELM_DTYPE_F16, bf16 = HELM_DTYPE_BF16 };

/// memcpy for ranges that may be empty: memcpy's pointers must not be null even for zero bytes, and
/// an empty buffer's data() may be null.
inline void copyBytes(void *dst, const void *src, size_t bytes) {
  if (bytes != 0)
    std::memcpy(dst, src, bytes);
}

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// IEEE binary16 -> binary32 (exact).
float halfToFloat(uint16_t h);
/// binary32 -> binary16, round to nearest even (overflow to inf, NaN kept).
uint16_t floatToHalf(float f);
inline float bf16ToFloat(uint16_t b) { return bitsToFloat(uint32_t(b) << 16); }
/// binary32 -> bfloat16, round to nearest even.
inline uint16_t floatToBf16(float f) {
  uint32_t u = floatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// Element i of a buffer of D, widened to f32 (the element type fixed at compile time).
template <DType D> inline float loadElem(const void *p, int64_t i) {
  if constexpr (D == DType::f32)
    return static_cast<const float *>(p)[i];
  else if constexpr (D == DType::f16)
    return halfToFloat(static_cast<const uint16_t *>(p)[i]);
  else
    return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
}
/// Element i of a buffer of `dtype` (chosen at run time), widened to f32.
inline float loadAs(const void *p, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::f32: return loadElem<DType::f32>(p, i);
  case DType::f16: return loadElem<DType::f16>(p, i);
  case DType::bf16: return loadElem<DType::bf16>(p, i);
  }
  return 0.0f;
}
/// Bytes per element of `dtype`.
constexpr int64_t dtypeBytes(DType dtype) { return dtype == DType::f32 ? 4 : 2; }
/// Whether `code` (a dtype code from generated code) names a DType.
constexpr bool isDType(int32_t code) { return code >= 0 && code <= int32_t(DType::bf16); }
inline void storeAs(void *p, DType dtype, int64_t i, float v) {
  switch (dtype) {
  case DType::f32: static_cast<float *>(p)[i] = v; return;
  case DType::f16: static_cast<uint16_t *>(p)[i] = floatToHalf(v); return;
  case DType::bf16: static_cast<uint16_t *>(p)[i] = floatToBf16(v); return;
  }
}
/// v rounded to `dtype` and widened back (one arithmetic step in that type).
inline float roundTo(float v, DType dtype) {
  switch (dtype) {
  case DType::f32: return v;
  case DType::f16: return halfToFloat(floatToHalf(v));
  case DType::bf16: return bf16ToFloat(floatToBf16(v));
  }
  return v;
}
/// Widens n elements of `dtype` to f32 (exact). Vectorised for the active ISA (Convert.cpp).
void widen(const void *src, DType dtype, float *dst, int64_t n);
/// Rounds n f32 values to `dtype` (nearest even, bit-identical to storeAs), e.g. a row of kernel
/// outputs. Vectorised for the active ISA (Convert.cpp).
void narrow(const float *src, DType dtype, void *dst, int64_t n);
/// x[i] = roundTo(x[i], dtype) for i < n (a narrow and a widen, vectorised): one arithmetic step
/// in `dtype`, as reference frameworks round their intermediate results.
void roundInPlace(float *x, DType dtype, int64_t n);

} // namespace helm::kernels

#endif
