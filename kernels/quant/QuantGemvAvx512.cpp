//===- QuantGemvAvx512.cpp - quantized decode GEMV, AVX-512 VNNI path -------------===//
//
// The arithmetic of QuantGemvImpl.h with 512-bit VNNI dot products (_mm512_dpbusd_epi32: unsigned
// x signed bytes, four products summed into each int32 lane, no saturation). One register holds
// one half (16 codes) of each of 4 blocks, one block per 128-bit lane, so that a block's partial
// sums stay in one lane group and 8 blocks reduce to one vector in six operations:
//   q4_0 / q4_1: the nibbles are the unsigned operand (the low nibbles of 4 blocks are their first
//     halves, the high nibbles their second halves); q4_0 subtracts 8 * (sum of codes) afterwards;
//   q8_0: the sign trick, |w| (0..128) against the codes negated where w < 0 (a mask).
// A group of 8 blocks is read with whole 64-byte loads; byte permutes (vpermt2b, AVX512-VBMI) pick
// the code bytes and word permutes (vpermt2w) the f16 scales out of them. The activation codes are
// stored in the registers' order (QuantizedX: per group of 4 blocks, the 4 first halves, then the
// 4 second halves). The f32 part is the AVX2 path's, lane by lane.
//
//===------------------------------------------------------------------------------===//
#include <immintrin.h>

#include <cstring>
#include <limits>

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (a self-initialised variable), which
// -Wmaybe-uninitialized reports once inlined (as in kernels/cpu/GemvAvx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define HELM_QAVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")))
#define HELM_QTARGET HELM_QAVX512
#include "kernels/quant/QuantRowsImpl.h"

namespace helm::quant::detail {
namespace {

/// Where block b's first half of codes starts in a row of the AVX-512 layout (the second half is
/// 64 bytes further).
inline int64_t codeOffset(int64_t b) { return b / 4 * 128 + b % 4 * 16; }

HELM_QAVX512 void quantizeXAvx512(const float *x, const QuantizedX &q) {
  const int64_t K = q.blocks * kBlock;
  const __m512i absMask = _mm512_set1_epi32(0x7fffffff);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int64_t m = 0; m < q.M; ++m)
    for (int64_t b = 0; b < q.blocks; ++b) {
      const float *xb = x + m * K + b * kBlock;
      const int64_t i = m * q.paddedBlocks + b;
      int8_t *first = q.codes + m * q.paddedBlocks * kBlock + codeOffset(b), *second = first + 64;
      const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
      const uint32_t amaxBits = _mm512_reduce_max_epu32(_mm512_max_epu32(
          _mm512_and_si512(_mm512_castps_si512(v0), absMask), _mm512_and_si512(_mm512_castps_si512(v1), absMask)));
      float d = 0.0f, id = 0.0f;
      if (amaxBits >= 0x7f800000u) {
        d = id = std::numeric_limits<float>::quiet_NaN();
      } else {
        float amax;
        std::memcpy(&amax, &amaxBits, sizeof amax);
        d = amax / 127.0f;
        id = amax != 0.0f ? 127.0f / amax : 0.0f; // amax 0: id 0, codes 0
      }
      if (!(id <= std::numeric_limits<float>::max())) { // NaN, or a subnormal amax (127 / amax overflows)
        q.sum[i] = 0;
        std::memset(first, 0, 16);
        std::memset(second, 0, 16);
      } else {
        const __m512 idv = _mm512_set1_ps(id);
        const __m512i c0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, idv), lo), hi));
        const __m512i c1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, idv), lo), hi));
        q.sum[i] = _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(first), _mm512_cvtsepi32_epi8(c0));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(second), _mm512_cvtsepi32_epi8(c1));
      }
      q.scale[i] = roundToHalf(d);
      q.scaledSum[i] = roundToHalf(d * float(q.sum[i]));
    }
}

/// a: blocks 0-3 (one per 128-bit lane, four int32 partial sums each), b: blocks 4-7. Returns the
/// eight block sums, lane j = block j.
HELM_QAVX512 inline __m256i reduce8(__m512i a, __m512i b) {
  const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i s2 = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, s2));
}

/// vpermt2b indices that pick 16 bytes from each of the blocks 4h..4h+3 of a group of 8 (one block
/// per 128-bit lane), starting at byte `start` of each block, out of two 64-byte registers loaded at
/// group offsets a (indices 0-63) and b (64-127). Every picked byte lies in one of the two.
struct ByteTable {
  alignas(64) uint8_t idx[64];
};
constexpr ByteTable byteTable(int bs, int h, int start, int a, int b) {
  ByteTable t{};
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 16; ++i) {
      const int pos = (4 * h + j) * bs + start + i;
      t.idx[16 * j + i] = uint8_t(pos >= a && pos < a + 64 ? pos - a : 64 + pos - b);
    }
  return t;
}
struct GroupTables {
  ByteTable t[2][2]; // [blocks 0-3 / 4-7][first / second half of each block (q8_0 only)]
};
template <BlockFormat F> constexpr GroupTables makeTables() {
  if constexpr (F == BlockFormat::q8_0)
    return {{{byteTable(34, 0, 2, 0, 64), byteTable(34, 0, 18, 16, 80)},
             {byteTable(34, 1, 2, 128, 192), byteTable(34, 1, 18, 144, 208)}}};
  else if constexpr (F == BlockFormat::q4_0)
    return {{{byteTable(18, 0, 2, 0, 64), {}}, {byteTable(18, 1, 2, 64, 128), {}}}};
  else
    return {{{byteTable(20, 0, 4, 0, 64), {}}, {byteTable(20, 1, 4, 64, 96), {}}}};
}
template <BlockFormat F> constexpr GroupTables kTables = makeTables<F>();

/// Block b's 32 codes in order: its halves sit 64 bytes apart in its group of 4 blocks.
HELM_QAVX512 inline __m256i loadCodes(const int8_t *codes, int64_t b) {
  const int8_t *group = codes + b / 4 * 128 + b % 4 * 16;
  return _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i *>(group + 64)),
                          _mm_loadu_si128(reinterpret_cast<const __m128i *>(group)));
}

/// 256-bit VNNI: exact for any u8 x s8 (no intermediate int16).
HELM_QAVX512 inline __m256i dotU8S8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

/// The 64 bytes that `table` picks from the registers loaded at p + a and `second`.
HELM_QAVX512 inline __m512i pick16(const uint8_t *p, int a, __m512i second, const ByteTable &table) {
  return _mm512_permutex2var_epi8(_mm512_loadu_si512(p + a), _mm512_load_si512(table.idx), second);
}

/// Adds blocks [b0, b0 + 8) of one weight row (at p) to acc[m] for the MB rows of x.
template <BlockFormat F, int MB>
HELM_QAVX512 inline void legacyGroup(const uint8_t *p, int64_t b0, const int8_t *const *codes, const float *const *dx,
                               const int32_t *const *xsum, const float *const *sx, __m256 *acc) {
  // The f16 fields (at word 0 of each block, q4_1's min at word 1) picked out of 64-byte loads of
  // the group with word permutes: a gather costs several times more on Zen 4.
  __m256 dw, mw = _mm256_setzero_ps();
  if constexpr (F == BlockFormat::q4_0) { // words 9j: all in the first 128 bytes
    const __m512i idx = _mm512_zextsi256_si512(_mm256_setr_epi16(0, 9, 18, 27, 36, 45, 54, 63, 0, 0, 0, 0, 0, 0, 0, 0));
    const __m512i v = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
    dw = _mm256_cvtph_ps(_mm512_castsi512_si128(v));
  } else if constexpr (F == BlockFormat::q8_0) { // words 17j: blocks 0-3 in bytes 0-127, 4-7 in 128-255
    const __m512i idx = _mm512_zextsi256_si512(_mm256_setr_epi16(0, 17, 34, 51, 4, 21, 38, 55, 0, 0, 0, 0, 0, 0, 0, 0));
    const __m512i lo = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
    const __m512i hi = _mm512_permutex2var_epi16(_mm512_loadu_si512(p + 128), idx, _mm512_loadu_si512(p + 192));
    // lo's words 0-3 are blocks 0-3; hi's words 4-7 (bytes 136 + 34i from p + 128) are blocks 4-7.
    dw = _mm256_cvtph_ps(_mm_blend_epi16(_mm512_castsi512_si128(lo), _mm512_castsi512_si128(hi), 0xF0));
  } else { // q4_1: d at words 10j, m at 10j + 1; blocks 0-5 in bytes 0-127, 6-7 from a load at 96
    const __m512i idxA = _mm512_zextsi256_si512(_mm256_setr_epi16(0, 10, 20, 30, 40, 50, 0, 0, 1, 11, 21, 31, 41, 51, 0, 0));
    const __m512i idxB = _mm512_zextsi256_si512(_mm256_setr_epi16(0, 0, 0, 0, 0, 0, 12, 22, 0, 0, 0, 0, 0, 0, 13, 23));
    const __m512i a = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idxA, _mm512_loadu_si512(p + 64));
    const __m512i b = _mm512_permutexvar_epi16(idxB, _mm512_loadu_si512(p + 96)); // bytes 96-159
    const __m256i v = _mm256_blend_epi16(_mm512_castsi512_si256(a), _mm512_castsi512_si256(b), 0xC0);
    dw = _mm256_cvtph_ps(_mm256_castsi256_si128(v));
    mw = _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1));
  }
  // w[h][0]: first halves of blocks 4h..4h+3, w[h][1]: second halves (unsigned operands).
  __m512i w[2][2];
  __mmask64 negative[2][2] = {};
  if constexpr (F == BlockFormat::q8_0) {
    constexpr int a[2][2] = {{0, 16}, {128, 144}}, b[2][2] = {{64, 80}, {192, 208}};
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half) {
        const __m512i v = pick16(p, a[h][half], _mm512_loadu_si512(p + b[h][half]), kTables<F>.t[h][half]);
        negative[h][half] = _mm512_movepi8_mask(v);
        w[h][half] = _mm512_abs_epi8(v);
      }
  } else {
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    // q4_0 blocks 4-7 end at byte 143: the second table is the last 16 bytes, zero-extended.
    const __m512i second = F == BlockFormat::q4_0 ? _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 128)))
                                                  : _mm512_loadu_si512(p + 96);
    const __m512i v[2] = {pick16(p, 0, _mm512_loadu_si512(p + 64), kTables<F>.t[0][0]),
                          pick16(p, 64, second, kTables<F>.t[1][0])};
    for (int h = 0; h < 2; ++h) {
      w[h][0] = _mm512_and_si512(v[h], nibble);
      w[h][1] = _mm512_and_si512(_mm512_srli_epi16(v[h], 4), nibble);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    __m512i dot[2];
    for (int h = 0; h < 2; ++h) {
      const int8_t *c = codes[m] + (b0 + 4 * h) / 4 * 128;
      __m512i first = _mm512_loadu_si512(c), second = _mm512_loadu_si512(c + 64);
      if constexpr (F == BlockFormat::q8_0) {
        first = _mm512_mask_sub_epi8(first, negative[h][0], _mm512_setzero_si512(), first);
        second = _mm512_mask_sub_epi8(second, negative[h][1], _mm512_setzero_si512(), second);
      }
      dot[h] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[h][0], first), w[h][1], second);
    }
    __m256i isum = reduce8(dot[0], dot[1]);
    if constexpr (F == BlockFormat::q4_0) // codes are nibble - 8
      isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(xsum[m] + b0)), 3));
    const __m256 s = _mm256_mul_ps(dw, _mm256_loadu_ps(dx[m] + b0));
    acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
    if constexpr (F == BlockFormat::q4_1)
      acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(mw, _mm256_loadu_ps(sx[m] + b0)));
  }
}

/// The weight registers of a k-quant super-block in the codes' order: w[h][0] holds the first
/// 16 codes of sub-blocks 4h..4h+3 (one per 128-bit lane), w[h][1] their second 16, unsigned
/// (q4_k 0..15, q5_k 0..31, q6_k 0..63 before its -32). q4_k / q5_k keep sub-blocks 2i and 2i + 1
/// in the low and high nibbles of the same 32 bytes; q6_k keeps 32-code blocks t and t + 2 of each
/// 128 in the low and high nibbles, with two more bits each in qh.
template <BlockFormat F> HELM_QAVX512 inline void kQuantWeights(const uint8_t *p, __m512i w[2][2]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  if constexpr (F == BlockFormat::q6_k) {
    const __m512i low2 = _mm512_set1_epi8(0x03);
    // Lane t of a half's register is block 4h + t: ql bytes from 128-bit lane (t & 1) * 2 (+ 1 for
    // the second halves) of the 64 at 64h, the high nibble for t >= 2; qh bits 2t..2t+1.
    const __m512i shifts = _mm512_set_epi64(0x0006000600060006, 0x0006000600060006, 0x0004000400040004,
                                            0x0004000400040004, 0x0002000200020002, 0x0002000200020002, 0, 0);
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(p + 64 * h);
      const __m512i src[2] = {_mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 3, 1))};
      for (int half = 0; half < 2; ++half) {
        const __m512i nibbles = _mm512_and_si512(_mm512_mask_srli_epi16(src[half], 0xFFFF0000u, src[half], 4), low4);
        const __m512i qh = _mm512_broadcast_i32x4(
            _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + kQ6KQhOffset + 32 * h + 16 * half)));
        // 16-bit shifts carry bits of the high byte into the low one; the 2-bit mask drops them.
        const __m512i top = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shifts), low2), 4);
        w[h][half] = _mm512_or_si512(nibbles, top);
      }
    }
  } else {
    const uint8_t *qs = p + (F == BlockFormat::q4_k ? kQ4KQsOffset : kQ5KQsOffset);
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(qs + 64 * h);
      // Lane j: bytes of 128-bit lane (j / 2) * 2 (+ 1 for the second halves), high nibble for odd j.
      const __m512i src[2] = {_mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(2, 2, 0, 0)),
                              _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 3, 1, 1))};
      for (int half = 0; half < 2; ++half)
        w[h][half] = _mm512_and_si512(_mm512_mask_srli_epi16(src[half], 0xFF00FF00u, src[half], 4), low4);
    }
    if constexpr (F == BlockFormat::q5_k) {
      // The fifth bit of code i of sub-block j is bit j of qh[i].
      const __m512i sixteen = _mm512_set1_epi8(16);
      for (int h = 0; h < 2; ++h) {
        const int j = 4 * h;
        const auto bit = [](int k) { return int(0x01010101u << k); };
        const __m512i bits = _mm512_set_epi32(bit(j + 3), bit(j + 3), bit(j + 3), bit(j + 3), bit(j + 2), bit(j + 2),
                                              bit(j + 2), bit(j + 2), bit(j + 1), bit(j + 1), bit(j + 1), bit(j + 1),
                                              bit(j), bit(j), bit(j), bit(j));
        for (int half = 0; half < 2; ++half) {
          const __m512i qh = _mm512_broadcast_i32x4(
              _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + kQ5KQhOffset + 16 * half)));
          w[h][half] = _mm512_mask_add_epi8(w[h][half], _mm512_test_epi8_mask(qh, bits), w[h][half], sixteen);
        }
      }
    }
  }
}

/// The k-quant super-block at p (activation blocks [b0, b0 + 8)) added to acc[m] for the MB rows
/// of x, as kQuantGroup computes it: the same exact integer sums per activation block, then the
/// same float operations, so the results are bit-identical; here each block's codes meet the
/// weights in 512-bit VNNI dot products, 4 per row of x (q6_k: 8, and its per-16 scales).
template <BlockFormat F, int MB>
HELM_QAVX512 inline void pathKQuantGroup(const uint8_t *p, int64_t b0, const int8_t *const *codes,
                                         const float *const *dx, const float *const *sx, __m256 *acc) {
  __m512i w[2][2];
  kQuantWeights<F>(p, w);
  if constexpr (F == BlockFormat::q6_k) {
    // Lane t of scale[h][half]: the int8 scale of 16-code sub-block 2 (4h + t) + half.
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + kQ6KScOffset)));
    __m512i scale[2][2];
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half) {
        const int base = 8 * h + half;
        scale[h][half] = _mm512_permutexvar_epi32(
            _mm512_set_epi32(base + 6, base + 6, base + 6, base + 6, base + 4, base + 4, base + 4, base + 4, base + 2,
                             base + 2, base + 2, base + 2, base, base, base, base),
            sc);
      }
    const __m512i bias = _mm512_set1_epi8(32);
    const __m256 d = _mm256_set1_ps(halfAt(p + kQ6KDOffset));
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      __m512i dot[2];
      for (int h = 0; h < 2; ++h) {
        const int8_t *c = codes[m] + (b0 + 4 * h) / 4 * 128;
        dot[h] = _mm512_setzero_si512();
        for (int half = 0; half < 2; ++half) {
          const __m512i cv = _mm512_loadu_si512(c + 64 * half);
          // (q - 32) . c per four codes: |q . c| <= 4 * 63 * 127, exact in int32, as is the product
          // with an int8 scale.
          const __m512i qc = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[h][half], cv),
                                              _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, cv));
          dot[h] = _mm512_add_epi32(dot[h], _mm512_mullo_epi32(qc, scale[h][half]));
        }
      }
      const __m256i isum = reduce8(dot[0], dot[1]);
      const __m256 s = _mm256_mul_ps(d, _mm256_loadu_ps(dx[m] + b0));
      acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
    }
  } else {
    __m256 dsc, dmn;
    kQuantScalesMins(p, dsc, dmn);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      __m512i dot[2];
      for (int h = 0; h < 2; ++h) {
        const int8_t *c = codes[m] + (b0 + 4 * h) / 4 * 128;
        dot[h] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[h][0], _mm512_loadu_si512(c)),
                                     w[h][1], _mm512_loadu_si512(c + 64));
      }
      const __m256i isum = reduce8(dot[0], dot[1]);
      const __m256 s = _mm256_mul_ps(dsc, _mm256_loadu_ps(dx[m] + b0));
      acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
      acc[m] = _mm256_sub_ps(acc[m], _mm256_mul_ps(dmn, _mm256_loadu_ps(sx[m] + b0)));
    }
  }
}

} // namespace

const QuantKernels &quantKernelsAvx512Vnni() {
  static const QuantKernels k{&quantizeXAvx512, &rowsVector};
  return k;
}

} // namespace helm::quant::detail
