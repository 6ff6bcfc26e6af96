//===- ConvertAvx2.cpp - widen / narrow with AVX2 + F16C, 8 lanes, scalar tails ---===//
#include "kernels/common/ConvertImpl.h"

#include <immintrin.h>

namespace helm::kernels::convert {
namespace {
#define HELM_CONVERT_AVX2 __attribute__((target("avx2,fma,f16c")))

HELM_CONVERT_AVX2 void widenF16Avx2(const void *src, float *dst, int64_t n) {
  auto *s = static_cast<const uint16_t *>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i))));
  for (; i < n; ++i)
    dst[i] = halfToFloat(s[i]);
}
HELM_CONVERT_AVX2 void widenBf16Avx2(const void *src, float *dst, int64_t n) {
  auto *s = static_cast<const uint16_t *>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
  for (; i < n; ++i)
    dst[i] = bf16ToFloat(s[i]);
}
HELM_CONVERT_AVX2 void narrowF16Avx2(const float *src, void *dst, int64_t n) {
  auto *d = static_cast<uint16_t *>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i)
    d[i] = floatToHalf(src[i]);
}
HELM_CONVERT_AVX2 void narrowBf16Avx2(const float *src, void *dst, int64_t n) {
  auto *d = static_cast<uint16_t *>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i odd = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
    __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    // |u| > inf as signed 32-bit compare: both sides are below 2^31.
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(d + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i)
    d[i] = floatToBf16(src[i]);
}
} // namespace

const Converters &avx2Converters() {
  static const Converters avx2 = {{&copyF32, &widenF16Avx2, &widenBf16Avx2},
                                  {&storeF32, &narrowF16Avx2, &narrowBf16Avx2}};
  return avx2;
}

} // namespace helm::kernels::convert
