//===- GemvAvx512.cpp - the AVX-512 path of helm_k_linear ---------------------------===//
//
// Only the functions below carry the target attribute; the file is compiled for baseline x86-64,
// and Linear.cpp calls in here only when CPUID reports AVX-512 F/BW/VL and the AVX2 set (Isa.cpp).
//
//===----------------------------------------------------------------------===//
// GCC 12 reports its own _mm512_undefined_* helpers (used inside the intrinsics) as
// (possibly) uninitialized; the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "kernels/cpu/Gemv.h"
#include "kernels/common/Numeric.h"

#include <cstdint>
#include <immintrin.h>

#define HELM_GEMV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define HELM_AVX512_INLINE                                                                      \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"), always_inline))

namespace helm::kernels {
namespace {
struct Avx512Traits {
  using V = __m512;
  static constexpr int kWidth = 16, kAccRegs = 16; // 32 zmm registers
  HELM_AVX512_INLINE static inline V zero() { return _mm512_setzero_ps(); }
  HELM_AVX512_INLINE static inline V set1(float v) { return _mm512_set1_ps(v); }
  HELM_AVX512_INLINE static inline V loadF32(const float *p) { return _mm512_loadu_ps(p); }
  HELM_AVX512_INLINE static inline void storeF32(float *p, V v) { _mm512_storeu_ps(p, v); }
  HELM_AVX512_INLINE static inline V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  HELM_AVX512_INLINE static inline V add(V a, V b) { return _mm512_add_ps(a, b); }
  HELM_AVX512_INLINE static inline float hsum(V v) {
    V s = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));   // 128-bit lanes 2,3,0,1
    s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, 0xb1));     // lanes 1,0,3,2
    __m128 t = _mm512_castps512_ps128(s);
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
  }
  template <DType WD> HELM_AVX512_INLINE static inline V load(const void *w, int64_t i) {
    if constexpr (WD == DType::f32) {
      return _mm512_loadu_ps(static_cast<const float *>(w) + i);
    } else {
      __m256i h = _mm256_loadu_si256(
          reinterpret_cast<const __m256i *>(static_cast<const uint16_t *>(w) + i));
      if constexpr (WD == DType::f16)
        return _mm512_cvtph_ps(h);
      else // bf16: the upper half of an f32
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
};
} // namespace
} // namespace helm::kernels

#include "kernels/cpu/GemvImpl.h"

namespace helm::kernels {
const LinearKernels &linearKernelsAvx512() { return GemvImpl<Avx512Traits>::table(); }
} // namespace helm::kernels
