//===- GemvAvx2.cpp - the AVX2 + FMA + F16C path of helm_k_linear -------------------===//
//
// Only the functions below carry the target attribute; the file is compiled for baseline x86-64,
// and Linear.cpp calls in here only when CPUID reports AVX2, FMA and F16C (Isa.cpp).
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Gemv.h"
#include "kernels/common/Numeric.h"

#include <cstdint>
#include <immintrin.h>

#define HELM_GEMV_TARGET __attribute__((target("avx2,fma,f16c")))
#define HELM_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline))

namespace helm::kernels {
namespace {
struct Avx2Traits {
  using V = __m256;
  static constexpr int kWidth = 8, kAccRegs = 8; // 16 ymm registers
  HELM_AVX2_INLINE static inline V zero() { return _mm256_setzero_ps(); }
  HELM_AVX2_INLINE static inline V set1(float v) { return _mm256_set1_ps(v); }
  HELM_AVX2_INLINE static inline V loadF32(const float *p) { return _mm256_loadu_ps(p); }
  HELM_AVX2_INLINE static inline void storeF32(float *p, V v) { _mm256_storeu_ps(p, v); }
  HELM_AVX2_INLINE static inline V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  HELM_AVX2_INLINE static inline V add(V a, V b) { return _mm256_add_ps(a, b); }
  HELM_AVX2_INLINE static inline float hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  template <DType WD> HELM_AVX2_INLINE static inline V load(const void *w, int64_t i) {
    if constexpr (WD == DType::f32) {
      return _mm256_loadu_ps(static_cast<const float *>(w) + i);
    } else {
      __m128i h = _mm_loadu_si128(
          reinterpret_cast<const __m128i *>(static_cast<const uint16_t *>(w) + i));
      if constexpr (WD == DType::f16)
        return _mm256_cvtph_ps(h);
      else // bf16: the upper half of an f32
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
};
} // namespace
} // namespace helm::kernels

#include "kernels/cpu/GemvImpl.h"

namespace helm::kernels {
const LinearKernels &linearKernelsAvx2() { return GemvImpl<Avx2Traits>::table(); }
} // namespace helm::kernels
