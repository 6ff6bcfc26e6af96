//===- ConvertAvx512.cpp - widen / narrow with AVX-512, 16 lanes, masked tails ----===//
// GCC 12 reports its own _mm512_undefined_* helpers (used inside the intrinsics) as
// (possibly) uninitialized; the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "kernels/common/ConvertImpl.h"

#include <immintrin.h>

namespace helm::kernels::convert {
namespace {
#define HELM_CONVERT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

HELM_CONVERT_AVX512 void widenF16Avx512(const void *src, float *dst, int64_t n) {
  auto *s = static_cast<const uint16_t *>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i *>(s + i))));
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
  }
}
HELM_CONVERT_AVX512 inline __m512 bf16ToF32Avx512(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
HELM_CONVERT_AVX512 void widenBf16Avx512(const void *src, float *dst, int64_t n) {
  auto *s = static_cast<const uint16_t *>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i,
                     bf16ToF32Avx512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i))));
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, bf16ToF32Avx512(_mm256_maskz_loadu_epi16(m, s + i)));
  }
}
HELM_CONVERT_AVX512 void narrowF16Avx512(const float *src, void *dst, int64_t n) {
  auto *d = static_cast<uint16_t *>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(d + i, m,
                             _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}
/// floatToBf16 on 16 lanes: round to nearest even; NaN keeps its top bits and is made quiet.
HELM_CONVERT_AVX512 inline __m256i f32ToBf16Avx512(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
  __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}
HELM_CONVERT_AVX512 void narrowBf16Avx512(const float *src, void *dst, int64_t n) {
  auto *d = static_cast<uint16_t *>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + i),
                        f32ToBf16Avx512(_mm512_loadu_ps(src + i)));
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(d + i, m, f32ToBf16Avx512(_mm512_maskz_loadu_ps(m, src + i)));
  }
}
} // namespace

const Converters &avx512Converters() {
  static const Converters avx512 = {{&copyF32, &widenF16Avx512, &widenBf16Avx512},
                                    {&storeF32, &narrowF16Avx512, &narrowBf16Avx512}};
  return avx512;
}

} // namespace helm::kernels::convert
