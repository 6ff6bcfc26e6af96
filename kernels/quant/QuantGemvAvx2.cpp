//===- QuantGemvAvx2.cpp - quantized decode GEMV, AVX2 path -----------------------===//
//
// The arithmetic of QuantGemvImpl.h with 256-bit integer dot products: per block, one register of
// 32 weight codes against 32 activation codes with _mm256_maddubs_epi16 (unsigned x signed bytes to
// pairs of int16) and _mm256_madd_epi16 (pairs to int32), exact:
//   q4_0 / q4_1: the nibbles (0..15) are the unsigned operand, |pair| <= 2 * 15 * 127;
//     q4_0 subtracts 8 * (sum of the activation codes) afterwards;
//   q8_0: the sign trick, |w| (0..128, -128 included) against sign(w) * c, |pair| <= 2 * 128 * 127.
// Eight blocks at a time: their eight int32 sums reduce into one vector (lane j = block j), which is
// scaled and added lane by lane to the eight f32 partial sums, exactly as the scalar reference.
//
//===------------------------------------------------------------------------------===//
#include "kernels/quant/QuantGemvImpl.h"

#include <immintrin.h>

#include <cstring>
#include <limits>

#define HELM_QAVX2 __attribute__((target("avx2,fma,f16c")))
#define HELM_QTARGET HELM_QAVX2

namespace helm::quant::detail {
namespace {
constexpr int64_t kPathMaxRows = kMaxRowsOfX;
/// One register of eight f32 lanes per row of x.
template <int MB> struct PathAcc {
  __m256 v[MB];
  HELM_QAVX2 void zero() {
    for (__m256 &r : v)
      r = _mm256_setzero_ps();
  }
  HELM_QAVX2 __m256 row(int m) const { return v[m]; }
  HELM_QAVX2 void add(int m, __m256 t) { v[m] = _mm256_add_ps(v[m], t); }
};
} // namespace
} // namespace helm::quant::detail

#include "kernels/quant/QuantRowsImpl.h"

namespace helm::quant::detail {
namespace {

HELM_QAVX2 inline uint32_t hmaxU32(__m256i v) {
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xB1));
  return uint32_t(_mm_cvtsi128_si32(h));
}

HELM_QAVX2 inline int32_t hsumI32(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
  return _mm_cvtsi128_si32(h);
}

HELM_QAVX2 void quantizeXAvx2(const float *x, const QuantizedX &q, int64_t m0, int64_t m1) {
  const int64_t K = q.blocks * kBlock;
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t m = m0; m < m1; ++m)
    for (int64_t b = 0; b < q.blocks; ++b) {
      const float *xb = x + m * K + b * kBlock;
      const int64_t i = q.blockIndex(m, b);
      int8_t *codes = q.codes + i * kBlock;
      __m256 v[4];
      __m256i a = _mm256_setzero_si256();
      for (int r = 0; r < 4; ++r) {
        v[r] = _mm256_loadu_ps(xb + 8 * r);
        a = _mm256_max_epu32(a, _mm256_and_si256(_mm256_castps_si256(v[r]), absMask));
      }
      const uint32_t amaxBits = hmaxU32(a);
      if (amaxBits >= 0x7f800000u) {
        q.scale[i] = q.scaledSum[i] = std::numeric_limits<float>::quiet_NaN();
        q.sum[i] = 0;
        q.halfSum[2 * i] = q.halfSum[2 * i + 1] = 0;
        std::memset(codes, 0, kBlock);
        continue;
      }
      float amax;
      std::memcpy(&amax, &amaxBits, sizeof amax);
      const float d = amax / 127.0f;
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f; // amax 0: id 0, codes 0
      if (!(id <= std::numeric_limits<float>::max())) { // a subnormal amax: 127 / amax overflows
        q.sum[i] = 0;
        q.halfSum[2 * i] = q.halfSum[2 * i + 1] = 0;
        std::memset(codes, 0, kBlock);
      } else {
        const __m256 idv = _mm256_set1_ps(id);
        __m256i c[4];
        for (int r = 0; r < 4; ++r)
          c[r] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[r], idv), lo), hi));
        q.halfSum[2 * i] = int16_t(hsumI32(_mm256_add_epi32(c[0], c[1])));
        q.halfSum[2 * i + 1] = int16_t(hsumI32(_mm256_add_epi32(c[2], c[3])));
        q.sum[i] = q.halfSum[2 * i] + q.halfSum[2 * i + 1];
        const __m256i p01 = _mm256_packs_epi32(c[0], c[1]), p23 = _mm256_packs_epi32(c[2], c[3]);
        const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(codes), packed);
      }
      q.scale[i] = roundToHalfF16c(d);
      q.scaledSum[i] = roundToHalfF16c(d * float(q.sum[i]));
    }
}

HELM_QAVX2 inline __m256i loadCodes(const int8_t *codes, int64_t b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + b * kBlock));
}

/// Exact for |u| <= 63 against int8 codes: a pair of products stays within int16.
HELM_QAVX2 inline __m256i dotU8S8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/// The f16 fields at p + j * bs + offset for j < 8, as floats. Eight word loads and inserts: a
/// vpgatherdd made the kernel about 1.3x slower on Zen 4 (and gathers are slow on older AMD too).
HELM_QAVX2 inline __m256 halvesToFloat(const uint8_t *p, int bs, int offset) {
  uint16_t h[8];
  for (int j = 0; j < 8; ++j)
    std::memcpy(&h[j], p + j * bs + offset, sizeof h[j]);
  return _mm256_cvtph_ps(_mm_setr_epi16(short(h[0]), short(h[1]), short(h[2]), short(h[3]), short(h[4]), short(h[5]),
                                        short(h[6]), short(h[7])));
}

/// Adds one group of 8 blocks of a weight row (at p) to acc[m] for the MB rows of x (x at that group).
template <BlockFormat F, int MB>
HELM_QAVX2 inline void legacyGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &accs, int valid) {
  constexpr int bs = int(blockBytes(F));
  __m256 *acc = accs.v;
  __m256 dw = halvesToFloat(p, bs, 0);
  __m256 mw = _mm256_setzero_ps();
  if constexpr (F == BlockFormat::q4_1)
    mw = halvesToFloat(p, bs, 2);
  if (valid < kLanes) { // a row's tail: lanes >= valid are the next row's blocks
    const __m256 keep = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    dw = _mm256_and_ps(dw, keep);
    mw = _mm256_and_ps(mw, keep);
  }
  const __m256i ones = _mm256_set1_epi16(1), nibble = _mm256_set1_epi8(0x0F);
  __m256i wv[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    if constexpr (F == BlockFormat::q8_0) {
      wv[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + j * bs + 2));
    } else {
      const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + j * bs + (F == BlockFormat::q4_0 ? 2 : 4)));
      wv[j] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), nibble);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    __m256i prod[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x.codes(m) + j * kBlock));
      if constexpr (F == BlockFormat::q8_0)
        prod[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wv[j]), _mm256_sign_epi8(c, wv[j])), ones);
      else
        prod[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[j], c), ones);
    }
    __m256i isum = reduce8x8(prod);
    if constexpr (F == BlockFormat::q4_0) // codes are nibble - 8
      isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x.xsum(m))), 3));
    const __m256 s = _mm256_mul_ps(dw, _mm256_loadu_ps(x.dx(m)));
    acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
    if constexpr (F == BlockFormat::q4_1)
      acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(mw, _mm256_loadu_ps(x.sx(m))));
  }
}

template <BlockFormat F, int MB>
HELM_QAVX2 inline void pathDecodedGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc, int valid) {
  decodedGroup<F, MB>(p, x, acc, valid);
}

template <BlockFormat F, int MB>
HELM_QAVX2 inline void pathLowBitGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc) {
  if constexpr (isIq(F))
    iqSuperBlock<F, MB>(p, x, acc);
  else
    lowBitKQuantGroup<F, MB>(p, x, acc);
}

template <BlockFormat F, int MB>
HELM_QAVX2 inline void pathKQuantGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc) {
  kQuantGroup<F, MB>(p, x, acc.v);
}

} // namespace

const QuantKernels &quantKernelsAvx2() {
  static const QuantKernels k{&quantizeXAvx2, &rowsVector, kPathMaxRows};
  return k;
}

} // namespace helm::quant::detail
