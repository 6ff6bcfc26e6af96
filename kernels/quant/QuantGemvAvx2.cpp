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

HELM_QAVX2 void quantizeXAvx2(const float *x, const QuantizedX &q) {
  const int64_t K = q.blocks * kBlock;
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t m = 0; m < q.M; ++m)
    for (int64_t b = 0; b < q.blocks; ++b) {
      const float *xb = x + m * K + b * kBlock;
      const int64_t i = m * q.paddedBlocks + b;
      int8_t *codes = q.codes + i * kBlock;
      __m256 v[4];
      __m256i a = _mm256_setzero_si256();
      for (int r = 0; r < 4; ++r) {
        v[r] = _mm256_loadu_ps(xb + 8 * r);
        a = _mm256_max_epu32(a, _mm256_and_si256(_mm256_castps_si256(v[r]), absMask));
      }
      const uint32_t amaxBits = hmaxU32(a);
      if (amaxBits >= 0x7f800000u) {
        q.scale[i] = std::numeric_limits<float>::quiet_NaN();
        q.sum[i] = 0;
        std::memset(codes, 0, kBlock);
      } else {
        float amax;
        std::memcpy(&amax, &amaxBits, sizeof amax);
        const float d = amax / 127.0f;
        q.scale[i] = d;
        if (d == 0.0f) {
          q.sum[i] = 0;
          std::memset(codes, 0, kBlock);
        } else {
          const __m256 dv = _mm256_set1_ps(d);
          __m256i c[4];
          for (int r = 0; r < 4; ++r)
            c[r] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v[r], dv), lo), hi));
          q.sum[i] = hsumI32(_mm256_add_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3])));
          const __m256i p01 = _mm256_packs_epi32(c[0], c[1]), p23 = _mm256_packs_epi32(c[2], c[3]);
          const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order);
          _mm256_storeu_si256(reinterpret_cast<__m256i *>(codes), packed);
        }
      }
      q.scaledSum[i] = q.scale[i] * float(q.sum[i]);
    }
}

/// Lane j = the sum of the eight int32 lanes of p[j].
HELM_QAVX2 inline __m256i reduce8(const __m256i p[8]) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
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

HELM_QAVX2 inline __m256 hsumOrder(__m256 acc) { // ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) in lane 0
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm256_castps128_ps256(h);
}

/// Prefetches the group kPrefetchBytes after the one at p (one prefetch per cache line it may
/// touch). The address is computed as an integer: it may lie past the end of W.
template <BlockFormat F> HELM_QAVX2 inline void prefetchAhead(const uint8_t *p) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + uintptr_t(kPrefetchBytes);
  for (int64_t line = 0; line < kLanes * blockBytes(F); line += 64)
    _mm_prefetch(reinterpret_cast<const char *>(ahead + uintptr_t(line)), _MM_HINT_T0);
}

/// Adds blocks [b0, b0 + 8) of one weight row (at p) to acc[m] for the MB rows of x.
template <BlockFormat F, int MB>
HELM_QAVX2 inline void group(const uint8_t *p, int64_t b0, const int8_t *const *codes, const float *const *dx,
                             const int32_t *const *xsum, const float *const *sx, __m256 *acc) {
  constexpr int bs = int(blockBytes(F));
  const __m256 dw = halvesToFloat(p, bs, 0);
  __m256 mw = _mm256_setzero_ps();
  if constexpr (F == BlockFormat::q4_1)
    mw = halvesToFloat(p, bs, 2);
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
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes[m] + (b0 + j) * kBlock));
      if constexpr (F == BlockFormat::q8_0)
        prod[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wv[j]), _mm256_sign_epi8(c, wv[j])), ones);
      else
        prod[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[j], c), ones);
    }
    __m256i isum = reduce8(prod);
    if constexpr (F == BlockFormat::q4_0) // codes are nibble - 8
      isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(xsum[m] + b0)), 3));
    const __m256 s = _mm256_mul_ps(dw, _mm256_loadu_ps(dx[m] + b0));
    acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
    if constexpr (F == BlockFormat::q4_1)
      acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(mw, _mm256_loadu_ps(sx[m] + b0)));
  }
}

template <BlockFormat F, int MB>
HELM_QAVX2 void rowsT(const QuantizedX &q, int64_t m0, const uint8_t *w, int64_t n0, int64_t n1, float *y,
                      int64_t N) {
  constexpr int64_t bs = blockBytes(F);
  const int8_t *codes[MB];
  const float *dx[MB], *sx[MB];
  const int32_t *xsum[MB];
  for (int m = 0; m < MB; ++m) {
    const int64_t i = (m0 + m) * q.paddedBlocks;
    codes[m] = q.codes + i * kBlock;
    dx[m] = q.scale + i;
    xsum[m] = q.sum + i;
    sx[m] = q.scaledSum + i;
  }
  const int64_t groups = q.blocks / kLanes, tail = q.blocks % kLanes, rowBytes = q.blocks * bs;
  // A partial last group is copied into zeros: zero codes and scales add +0 to the lanes, which
  // leaves them unchanged (a lane starts at +0 and is never -0 under round-to-nearest).
  alignas(32) uint8_t tailBlocks[kLanes * bs];
  std::memset(tailBlocks, 0, sizeof tailBlocks);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t *row = w + n * rowBytes;
    __m256 acc[MB];
    for (int m = 0; m < MB; ++m)
      acc[m] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t *gp = row + g * kLanes * bs;
      prefetchAhead<F>(gp);
      group<F, MB>(gp, g * kLanes, codes, dx, xsum, sx, acc);
    }
    if (tail) {
      std::memcpy(tailBlocks, row + groups * kLanes * bs, size_t(tail * bs));
      group<F, MB>(tailBlocks, groups * kLanes, codes, dx, xsum, sx, acc);
    }
    for (int m = 0; m < MB; ++m)
      y[(m0 + m) * N + n] = _mm256_cvtss_f32(hsumOrder(acc[m]));
  }
}

template <BlockFormat F>
void rowsF(const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1, float *y,
           int64_t N) {
  switch (mb) {
  case 1: return rowsT<F, 1>(q, m0, w, n0, n1, y, N);
  case 2: return rowsT<F, 2>(q, m0, w, n0, n1, y, N);
  case 3: return rowsT<F, 3>(q, m0, w, n0, n1, y, N);
  case 4: return rowsT<F, 4>(q, m0, w, n0, n1, y, N);
  case 5: return rowsT<F, 5>(q, m0, w, n0, n1, y, N);
  case 6: return rowsT<F, 6>(q, m0, w, n0, n1, y, N);
  case 7: return rowsT<F, 7>(q, m0, w, n0, n1, y, N);
  default: return rowsT<F, 8>(q, m0, w, n0, n1, y, N);
  }
}

void rowsAvx2(BlockFormat f, const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1,
              float *y, int64_t N) {
  switch (f) {
  case BlockFormat::q8_0: return rowsF<BlockFormat::q8_0>(q, m0, mb, w, n0, n1, y, N);
  case BlockFormat::q4_0: return rowsF<BlockFormat::q4_0>(q, m0, mb, w, n0, n1, y, N);
  default: return rowsF<BlockFormat::q4_1>(q, m0, mb, w, n0, n1, y, N);
  }
}

} // namespace

const QuantKernels &quantKernelsAvx2() {
  static const QuantKernels k{&quantizeXAvx2, &rowsAvx2};
  return k;
}

} // namespace helm::quant::detail
