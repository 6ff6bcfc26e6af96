//===- Convert.cpp - widen / narrow arrays between f32 and f16 / bf16 -------------===//
//
// kernels::widen and kernels::narrow (Numeric.h), vectorised per instruction set and picked
// like every kernel (Isa.h): AVX-512 with masked tails, AVX2 + F16C, scalar. Bit-identical to
// Numeric.h's scalar conversions (round to nearest even, denormals kept, NaN quieted the same
// way), so every path rounds outputs identically. Used by the GEMV and GEMM for x and y, by the
// GEMM for weight panels, and by the runtime for KV rows.
//
//===----------------------------------------------------------------------===//
// GCC 12 reports its own _mm512_undefined_* helpers (used inside the intrinsics) as
// (possibly) uninitialized; the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Numeric.h"

#include <algorithm>
#include <cstring>
#include <immintrin.h>

namespace helm::kernels {
namespace {

using WidenFn = void (*)(const void *src, float *dst, int64_t n);
using NarrowFn = void (*)(const float *src, void *dst, int64_t n);

struct Converters {
  WidenFn widen[3];   // by source DType
  NarrowFn narrow[3]; // by destination DType
};

void copyF32(const void *src, float *dst, int64_t n) { copyBytes(dst, src, size_t(n) * 4); }
void storeF32(const float *src, void *dst, int64_t n) { copyBytes(dst, src, size_t(n) * 4); }

template <DType D> void widenScalar(const void *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = loadElem<D>(src, i);
}
template <DType D> void narrowScalar(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    storeAs(dst, D, i, src[i]);
}

#define HELM_CONVERT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define HELM_CONVERT_AVX2 __attribute__((target("avx2,fma,f16c")))

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

const Converters &convertersFor(Isa isa) {
  static const Converters scalar = {
      {&copyF32, &widenScalar<DType::f16>, &widenScalar<DType::bf16>},
      {&storeF32, &narrowScalar<DType::f16>, &narrowScalar<DType::bf16>}};
  static const Converters avx2 = {{&copyF32, &widenF16Avx2, &widenBf16Avx2},
                                  {&storeF32, &narrowF16Avx2, &narrowBf16Avx2}};
  static const Converters avx512 = {{&copyF32, &widenF16Avx512, &widenBf16Avx512},
                                    {&storeF32, &narrowF16Avx512, &narrowBf16Avx512}};
  switch (isa) {
  case Isa::avx512: return avx512;
  case Isa::avx2: return avx2;
  case Isa::scalar: break;
  }
  return scalar;
}

} // namespace

void widen(const void *src, DType dtype, float *dst, int64_t n) {
  convertersFor(activeIsa()).widen[int(dtype)](src, dst, n);
}

void narrow(const float *src, DType dtype, void *dst, int64_t n) {
  convertersFor(activeIsa()).narrow[int(dtype)](src, dst, n);
}

void roundInPlace(float *x, DType dtype, int64_t n) {
  if (dtype == DType::f32)
    return;
  const Converters &c = convertersFor(activeIsa());
  uint16_t narrowed[256];
  for (int64_t i = 0; i < n; i += 256) {
    int64_t m = std::min<int64_t>(256, n - i);
    c.narrow[int(dtype)](x + i, narrowed, m);
    c.widen[int(dtype)](narrowed, x + i, m);
  }
}

} // namespace helm::kernels
