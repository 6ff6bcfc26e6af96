//===- QuantGemvAvx512.cpp - quantized decode GEMV, AVX-512 VNNI path -------------===//
//
// The arithmetic of QuantGemvImpl.h with 512-bit VNNI dot products (_mm512_dpbusd_epi32: unsigned
// x signed bytes, four products summed into each int32 lane, no saturation). One register holds
// one half (16 codes) of each of 4 blocks, one block per 128-bit lane, so that a block's partial
// sums stay in one lane group and 8 blocks reduce to one vector in six operations:
//   q4_0 / q4_1: the nibbles are the unsigned operand (the low nibbles of 4 blocks are their first
//     halves, the high nibbles their second halves); q4_0 subtracts 8 * (sum of codes) afterwards;
//   q8_0: the sign trick, |w| (0..128) against the codes negated where w < 0 (a mask);
//   q5_0 / q5_1 / iq4_nl / iq4_xs: decoded into the same registers as unsigned codes (q5: the
//     nibble plus 16 for its fifth bit; iq4: the table value plus 128), offsets taken off after;
//   q6_k, q2_k, q3_k and the iq lattice formats (16-weight sub-blocks with their own scales):
//     unsigned codes in the same order, vpmaddubsw pairs times the scales by vpdpwssd.
// A group of 8 blocks is read with whole 64-byte loads; byte permutes (vpermt2b, AVX512-VBMI) pick
// the code bytes and word permutes (vpermt2w) the f16 scales out of them. The activation codes are
// stored in the registers' order (QuantizedX: per group of 4 blocks, the 4 first halves, then the
// 4 second halves). The f32 part is the AVX2 path's, lane by lane, with two rows of x per 512-bit
// register (PathAcc): one reduction (reduce8x2) and one float step serve both.
//
//===------------------------------------------------------------------------------===//
#include "kernels/quant/QuantGemvImpl.h"

#include <immintrin.h>

#include <cstring>
#include <limits>

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (a self-initialised variable), which
// -Wmaybe-uninitialized (or -Wuninitialized, where the flow is plain enough) reports once inlined
// (as in kernels/cpu/GemvAvx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define HELM_QAVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")))
#define HELM_QTARGET HELM_QAVX512

namespace helm::quant::detail {
namespace {

constexpr int64_t kPathMaxRows = kMaxRowsOfXWide;

// AVX512F only (no DQ): the 256-bit halves of a 512-bit register moved as 64-bit elements.
HELM_QAVX512 inline __m256 upperHalf(__m512 v) {
  return _mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(v), 1));
}
/// Rows m and m + 1 of a per-block array at one group (XRows: 8 entries a row, the rows back to
/// back), so one 64-byte load holds row m's eight in lanes 0-7 and row m + 1's in lanes 8-15.
HELM_QAVX512 inline __m512 loadPair(const float *rowM) { return _mm512_loadu_ps(rowM); }
HELM_QAVX512 inline __m512i loadPair(const int32_t *rowM) { return _mm512_loadu_si512(rowM); }
HELM_QAVX512 inline __m512i loadPair(const int16_t *rowM) { return _mm512_loadu_si512(rowM); }
/// v in both 256-bit halves.
HELM_QAVX512 inline __m512 twice(__m256 v) { return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(v))); }

/// The f32 lanes of rows 2p and 2p + 1 of x share pair[p] (lanes 0-7 and 8-15), so the float work
/// of two rows is one 512-bit operation, lane by lane the same as two 256-bit ones. An odd last row
/// has a 256-bit register of its own.
template <int MB> struct PathAcc {
  __m512 pair[MB / 2 > 0 ? MB / 2 : 1];
  __m256 last;
  HELM_QAVX512 void zero() {
#pragma GCC unroll 8
    for (__m512 &r : pair)
      r = _mm512_setzero_ps();
    last = _mm256_setzero_ps();
  }
  HELM_QAVX512 __m256 row(int m) const {
    if (MB % 2 == 1 && m == MB - 1)
      return last;
    return m % 2 ? upperHalf(pair[m / 2]) : _mm512_castps512_ps256(pair[m / 2]);
  }
  /// Row m's lanes += v. The other row of the pair gets +0, which leaves its lanes as they are
  /// (a lane is never -0).
  HELM_QAVX512 void add(int m, __m256 v) {
    if (MB % 2 == 1 && m == MB - 1) {
      last = _mm256_add_ps(last, v);
      return;
    }
    const __m512d wide = m % 2 ? _mm512_insertf64x4(_mm512_setzero_pd(), _mm256_castps_pd(v), 1)
                               : _mm512_insertf64x4(_mm512_setzero_pd(), _mm256_castps_pd(v), 0);
    pair[m / 2] = _mm512_add_ps(pair[m / 2], _mm512_castpd_ps(wide));
  }
};

} // namespace
} // namespace helm::quant::detail

#include "kernels/quant/QuantRowsImpl.h"

namespace helm::quant::detail {
namespace {

/// Where block b (< 8) of a group's first half of codes starts in the group's 256 codes of a row
/// in the AVX-512 layout (the second half is 64 bytes further).
inline int64_t codeOffset(int64_t b) { return b / 4 * 128 + b % 4 * 16; }

/// The rows of x that calls of 16 rows read (the first M / 16 * 16; the rest, and every row of a
/// smaller M, keep the layout above) are stored in quads of 4 rows for pathRows16, whose
/// 32-bit lanes hold (block 4h + l, row 4k + r) at lane 4l + r. A quad keeps the place the
/// group-major layout gives its 4 rows in each group (1024 codes, 32 entries of each per-block
/// array), in another order:
///   codes: [h][half][d][l][r], 4 codes each: codes 16 half + 4d .. + 3 of block 4h + l of row r;
///   scale, sum, scaledSum: [h][l][r]; halfSum: [h][l][r][half].
/// The per-block arrays are then, for each (h, quad), one 16-lane vector in the lanes' order.
inline bool quadRow(const QuantizedX &q, int64_t m) {
  return q.quads && m < q.M / kMaxRowsOfXWide * kMaxRowsOfXWide;
}

HELM_QAVX512 void quantizeXAvx512(const float *x, const QuantizedX &q, int64_t m0, int64_t m1) {
  const int64_t K = q.blocks * kBlock;
  const __m512i absMask = _mm512_set1_epi32(0x7fffffff);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int64_t m = m0; m < m1; ++m) {
    const bool quad = quadRow(q, m);
    for (int64_t b = 0; b < q.blocks; ++b) {
      const float *xb = x + m * K + b * kBlock;
      const int64_t group = b / kLanes * kLanes, j = b % kLanes;
      int64_t i;
      // Where the 4-code pieces of each half go: piece d of half `half` at pieces[half] + d * step.
      int8_t *pieces[2];
      int64_t step;
      if (quad) {
        const int64_t base = q.blockIndex(m & ~int64_t(3), group), r = m & 3, h = j / 4, l = j % 4;
        i = base + (h * 4 + l) * 4 + r;
        pieces[0] = q.codes + base * kBlock + h * 512 + l * 16 + r * 4;
        pieces[1] = pieces[0] + 256;
        step = 64;
      } else {
        i = q.blockIndex(m, b);
        pieces[0] = q.codes + q.blockIndex(m, group) * kBlock + codeOffset(j);
        pieces[1] = pieces[0] + 64;
        step = 4;
      }
      auto store = [&](int half, __m128i codes) {
        if (!quad) {
          _mm_storeu_si128(reinterpret_cast<__m128i *>(pieces[half]), codes);
          return;
        }
        alignas(16) int8_t bytes[16];
        _mm_store_si128(reinterpret_cast<__m128i *>(bytes), codes);
        for (int d = 0; d < 4; ++d)
          std::memcpy(pieces[half] + d * step, bytes + 4 * d, 4);
      };
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
        q.halfSum[2 * i] = q.halfSum[2 * i + 1] = 0;
        store(0, _mm_setzero_si128());
        store(1, _mm_setzero_si128());
      } else {
        const __m512 idv = _mm512_set1_ps(id);
        const __m512i c0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, idv), lo), hi));
        const __m512i c1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, idv), lo), hi));
        q.halfSum[2 * i] = int16_t(_mm512_reduce_add_epi32(c0));
        q.halfSum[2 * i + 1] = int16_t(_mm512_reduce_add_epi32(c1));
        q.sum[i] = q.halfSum[2 * i] + q.halfSum[2 * i + 1];
        store(0, _mm512_cvtsepi32_epi8(c0));
        store(1, _mm512_cvtsepi32_epi8(c1));
      }
      q.scale[i] = roundToHalfF16c(d);
      q.scaledSum[i] = roundToHalfF16c(d * float(q.sum[i]));
    }
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

/// reduce8 for two rows of x at once: (a0, a1) row A's registers, (b0, b1) row B's. Lanes 0-7 are
/// row A's eight block sums, lanes 8-15 row B's (ten operations, where two reduce8 take twelve).
HELM_QAVX512 inline __m512i reduce8x2(__m512i a0, __m512i a1, __m512i b0, __m512i b1) {
  // Per 128-bit lane t: sa = [a0 0+2, a1 0+2, a0 1+3, a1 1+3] (partial sums by index), as sb.
  const __m512i sa = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
  const __m512i sb = _mm512_add_epi32(_mm512_unpacklo_epi32(b0, b1), _mm512_unpackhi_epi32(b0, b1));
  // Per 128-bit lane t: [A block t, A block 4 + t, B block t, B block 4 + t].
  const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(sa, sb), _mm512_unpackhi_epi64(sa, sb));
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), s);
}

/// The f32 step that ends every group, lane by lane: lanes += float(isum) * (scale * dx), for rows m
/// and m + 1 of x at once (lanes 0-7 and 8-15; scale2 holds the weight scales twice) ...
HELM_QAVX512 inline void addBlockTerms(__m512 &lanes, __m512i isum, __m512 scale2, const XRows &x, int m) {
  const __m512 s = _mm512_mul_ps(scale2, loadPair(x.dx(m)));
  lanes = _mm512_add_ps(lanes, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), s));
}
/// ... and for an odd last row alone.
HELM_QAVX512 inline void addBlockTerms(__m256 &lanes, __m256i isum, __m256 scale, const XRows &x, int m) {
  const __m256 s = _mm256_mul_ps(scale, _mm256_loadu_ps(x.dx(m)));
  lanes = _mm256_add_ps(lanes, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
}

/// vpermt2b indices that pick 16 bytes from each of the blocks 4h..4h+3 of a group of 8 (one block
/// per 128-bit lane), starting at byte `start` of each block, out of two 64-byte registers loaded at
/// group offsets a (indices 0-63) and b (64-127). A byte in neither is a compile-time error.
struct ByteTable {
  alignas(64) uint8_t idx[64];
};
constexpr uint8_t pickIndex(int pos, int a, int b) {
  if (pos >= a && pos < a + 64)
    return uint8_t(pos - a);
  if (pos >= b && pos < b + 64)
    return uint8_t(64 + pos - b);
  throw "a picked byte lies in neither 64-byte load";
}
constexpr ByteTable byteTable(int bs, int h, int start, int a, int b) {
  ByteTable t{};
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 16; ++i)
      t.idx[16 * j + i] = pickIndex((4 * h + j) * bs + start + i, a, b);
  return t;
}
struct GroupTables {
  ByteTable t[2][2]; // [blocks 0-3 / 4-7][first / second half of each block (q8_0 only)]
};

/// The 32-weight formats whose 16 bytes of nibbles end their block (q5_0, q5_1, iq4_nl): block
/// bytes, where the nibbles, q5's 32 fifth bits and q5_1's f16 min lie (-1: none).
struct NibbleLayout {
  int bs, qs, qh, min;
};
template <BlockFormat F> constexpr NibbleLayout nibbleLayout() {
  if constexpr (F == BlockFormat::q5_0)
    return {int(sizeof(BlockQ5_0)), int(offsetof(BlockQ5_0, qs)), int(offsetof(BlockQ5_0, qh)), -1};
  else if constexpr (F == BlockFormat::q5_1)
    return {int(sizeof(BlockQ5_1)), int(offsetof(BlockQ5_1, qs)), int(offsetof(BlockQ5_1, qh)),
            int(offsetof(BlockQ5_1, m))};
  else
    return {int(sizeof(BlockIq4Nl)), int(offsetof(BlockIq4Nl, qs)), -1, -1};
}
/// Where the two loads of blocks 4h..4h+3's bytes from `start` on go: the first at block 4h's
/// byte `start`, the second ending where block 4h + 3 ends (never past the group).
constexpr int firstLoad(NibbleLayout l, int h, int start) { return 4 * h * l.bs + start; }
constexpr int secondLoad(NibbleLayout l, int h) { return 4 * (h + 1) * l.bs - 64; }

template <BlockFormat F> constexpr GroupTables makeTables() {
  if constexpr (F == BlockFormat::q8_0) {
    return {{{byteTable(34, 0, 2, 0, 64), byteTable(34, 0, 18, 16, 80)},
             {byteTable(34, 1, 2, 128, 192), byteTable(34, 1, 18, 144, 208)}}};
  } else if constexpr (F == BlockFormat::q4_0) {
    return {{{byteTable(18, 0, 2, 0, 64), {}}, {byteTable(18, 1, 2, 64, 128), {}}}};
  } else if constexpr (F == BlockFormat::q4_1) {
    return {{{byteTable(20, 0, 4, 0, 64), {}}, {byteTable(20, 1, 4, 64, 96), {}}}};
  } else {
    constexpr NibbleLayout l = nibbleLayout<F>();
    GroupTables t{};
    for (int h = 0; h < 2; ++h) {
      t.t[h][0] = byteTable(l.bs, h, l.qs, firstLoad(l, h, l.qs), secondLoad(l, h));
      if (l.qh >= 0) { // bytes 2j, 2j + 1: block 4h + j's fifth bits 0-15; bytes 8 + 2j, 9 + 2j: 16-31
        const int a = firstLoad(l, h, l.qh), b = secondLoad(l, h);
        for (int j = 0; j < 4; ++j)
          for (int e = 0; e < 2; ++e) {
            t.t[h][1].idx[2 * j + e] = pickIndex((4 * h + j) * l.bs + l.qh + e, a, b);
            t.t[h][1].idx[8 + 2 * j + e] = pickIndex((4 * h + j) * l.bs + l.qh + 2 + e, a, b);
          }
      }
    }
    return t;
  }
}
template <BlockFormat F> constexpr GroupTables kTables = makeTables<F>();

/// vpermt2w / vpermw indices that pick a group's eight f16 scales (words 0-7) and mins (8-15, where
/// minOffset >= 0) out of 64-byte loads at the group's bytes 0 and 64 (`lo`) or, for words past
/// byte 128 (`fromHi`), of one load ending at the group's end (`hi`).
struct WordPick {
  alignas(64) int16_t lo[32];
  alignas(64) int16_t hi[32];
  uint32_t fromHi;
};
constexpr WordPick scaleWords(int bs, int minOffset) {
  WordPick t{};
  const int c = 8 * bs - 64;
  for (int lane = 0; lane < 16; ++lane) {
    const int off = lane < 8 ? 0 : minOffset;
    if (off < 0)
      continue;
    const int pos = lane % 8 * bs + off;
    if (pos + 2 <= 128) {
      t.lo[lane] = int16_t(pos / 2);
    } else {
      if (pos < c || (pos - c) % 2)
        throw "a scale lies in neither load";
      t.hi[lane] = int16_t((pos - c) / 2);
      t.fromHi |= 1u << lane;
    }
  }
  return t;
}
template <BlockFormat F> constexpr WordPick kScaleWords = scaleWords(nibbleLayout<F>().bs, nibbleLayout<F>().min);

/// iq4's table plus 128, as unsigned bytes in each 128-bit lane: codes T + 128 (1..241) against
/// the activation codes, 128 * (their sum) taken off afterwards.
struct Iq4Shifted {
  alignas(16) uint8_t v[16];
};
constexpr Iq4Shifted iq4Shifted() {
  Iq4Shifted t{};
  for (int i = 0; i < 16; ++i)
    t.v[i] = uint8_t(kIq4Values[i] + 128);
  return t;
}
constexpr Iq4Shifted kIq4Shifted = iq4Shifted();

/// The power of two times the activation codes' sum that a format's unsigned weight codes carry and
/// the kernels take off the integer sums (-1: none): q4_0's nibble - 8, q5_0's q - 16, iq4's
/// T + 128.
template <BlockFormat F> constexpr int codeOffsetShift() {
  if constexpr (F == BlockFormat::q4_0)
    return 3;
  else if constexpr (F == BlockFormat::q5_0)
    return 4;
  else if constexpr (F == BlockFormat::iq4_nl || F == BlockFormat::iq4_xs)
    return 7;
  else
    return -1;
}

// loadCodes and dotU8S8 are QuantRowsImpl.h's operands of the 256-bit k-quant group, which this
// path replaces with its own (pathKQuantGroup): kept for that shared code, unused here.
/// Block b's 32 codes in order: its halves sit 64 bytes apart in its group of 4 blocks.
[[maybe_unused]] HELM_QAVX512 inline __m256i loadCodes(const int8_t *codes, int64_t b) {
  const int8_t *group = codes + b / 4 * 128 + b % 4 * 16;
  return _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i *>(group + 64)),
                          _mm_loadu_si128(reinterpret_cast<const __m128i *>(group)));
}

/// 256-bit VNNI: exact for any u8 x s8 (no intermediate int16).
[[maybe_unused]] HELM_QAVX512 inline __m256i dotU8S8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

/// The 64 bytes that `table` picks from the registers loaded at p + a and `second`.
HELM_QAVX512 inline __m512i pick16(const uint8_t *p, int a, __m512i second, const ByteTable &table) {
  return _mm512_permutex2var_epi8(_mm512_loadu_si512(p + a), _mm512_load_si512(table.idx), second);
}

/// Adds one group of 8 blocks of a weight row (at p) to acc[m] for the MB rows of x (x at that group).
/// One row's integer dot products of a legacy group: dot[h] holds blocks 4h..4h+3, one per 128-bit
/// lane (four partial sums each).
template <BlockFormat F>
HELM_QAVX512 inline void legacyDots(const __m512i w[2][2], const __mmask64 negative[2][2], const int8_t *codes, __m512i dot[2]) {
  for (int h = 0; h < 2; ++h) {
    const int8_t *c = codes + h * 128;
    __m512i first = _mm512_loadu_si512(c), second = _mm512_loadu_si512(c + 64);
    if constexpr (F == BlockFormat::q8_0) {
      first = _mm512_mask_sub_epi8(first, negative[h][0], _mm512_setzero_si512(), first);
      second = _mm512_mask_sub_epi8(second, negative[h][1], _mm512_setzero_si512(), second);
    }
    dot[h] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[h][0], first), w[h][1], second);
  }
}

/// The decoded formats' group (legacyWeights): codes unsigned in the registers' order, scales (and
/// q5_1's mins) as f32.
template <BlockFormat F>
HELM_QAVX512 inline void decodedWeights(const uint8_t *p, __m512i bytes[2][2], __m256 &dw, __m256 &mw) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512i v[2];
  if constexpr (F == BlockFormat::iq4_xs) {
    // Sub-block j's 16 bytes of nibbles at 16 j: blocks 4h..4h+3 are one 64-byte load.
    for (int h = 0; h < 2; ++h)
      v[h] = _mm512_loadu_si512(p + offsetof(BlockIq4Xs, qs) + 64 * h);
    // ls_j: scalesLow's nibble j (of a 32-bit word), scalesHigh's bits 2j, 2j + 1 as bits 4-5.
    uint32_t low;
    std::memcpy(&low, p + offsetof(BlockIq4Xs, scalesLow), sizeof low);
    uint16_t high;
    std::memcpy(&high, p + offsetof(BlockIq4Xs, scalesHigh), sizeof high);
    const __m256i lowBits = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(int(low)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(0xF));
    const __m256i highBits = _mm256_slli_epi32(
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(high), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                         _mm256_set1_epi32(3)),
        4);
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lowBits, highBits), _mm256_set1_epi32(32));
    dw = _mm256_mul_ps(_mm256_set1_ps(halfAt(p)), _mm256_cvtepi32_ps(ls));
    mw = _mm256_setzero_ps();
  } else {
    constexpr NibbleLayout l = nibbleLayout<F>();
    for (int h = 0; h < 2; ++h)
      v[h] = pick16(p, firstLoad(l, h, l.qs), _mm512_loadu_si512(p + secondLoad(l, h)), kTables<F>.t[h][0]);
    const WordPick &words = kScaleWords<F>;
    const __m512i lo = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), _mm512_load_si512(words.lo), _mm512_loadu_si512(p + 64));
    const __m512i scales = _mm512_mask_mov_epi16(
        lo, __mmask32(words.fromHi), _mm512_permutexvar_epi16(_mm512_load_si512(words.hi), _mm512_loadu_si512(p + 8 * l.bs - 64)));
    dw = _mm256_cvtph_ps(_mm512_castsi512_si128(scales));
    mw = l.min >= 0 ? _mm256_cvtph_ps(_mm512_extracti32x4_epi32(scales, 1)) : _mm256_setzero_ps();
  }
  for (int h = 0; h < 2; ++h) {
    bytes[h][0] = _mm512_and_si512(v[h], nibble);
    bytes[h][1] = _mm512_and_si512(_mm512_srli_epi16(v[h], 4), nibble);
  }
  if constexpr (F == BlockFormat::iq4_nl || F == BlockFormat::iq4_xs) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i *>(kIq4Shifted.v)));
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half)
        bytes[h][half] = _mm512_shuffle_epi8(table, bytes[h][half]);
  } else if constexpr (nibbleLayout<F>().qh >= 0) {
    // Fifth bit i of block 4h + j is bit i of its 32-bit qh: the first 16 of each block, 4 blocks,
    // make one 64-bit mask over bytes[h][0]'s bytes, the second 16 one over bytes[h][1]'s.
    constexpr NibbleLayout l = nibbleLayout<F>();
    const __m512i sixteen = _mm512_set1_epi8(16);
    for (int h = 0; h < 2; ++h) {
      const __m128i qh = _mm512_castsi512_si128(
          pick16(p, firstLoad(l, h, l.qh), _mm512_loadu_si512(p + secondLoad(l, h)), kTables<F>.t[h][1]));
      const __mmask64 first = _cvtu64_mask64(uint64_t(_mm_cvtsi128_si64(qh)));
      const __mmask64 second = _cvtu64_mask64(uint64_t(_mm_extract_epi64(qh, 1)));
      bytes[h][0] = _mm512_mask_add_epi8(bytes[h][0], first, bytes[h][0], sixteen);
      bytes[h][1] = _mm512_mask_add_epi8(bytes[h][1], second, bytes[h][1], sixteen);
    }
  }
}

/// A group of a 32-weight-scale format as the VNNI kernels read it: bytes[h][0] holds the first 16
/// codes of blocks 4h..4h+3 (one block per 128-bit lane), bytes[h][1] their second 16; q4_0 / q4_1
/// the nibbles (unsigned), q8_0 the signed codes as stored; the decoded formats (q5_0, q5_1,
/// iq4_nl; iq4_xs's super-block as 8 blocks) unsigned too: q5 the nibble plus 16 for a fifth bit,
/// iq4 its table value plus 128 (codeOffsetShift). dw (and q4_1's / q5_1's mw) are the eight
/// blocks' scales as f32, zero for blocks >= valid (a row's tail: the next row's blocks).
template <BlockFormat F>
HELM_QAVX512 inline void legacyWeights(const uint8_t *p, int valid, __m512i bytes[2][2], __m256 &dw, __m256 &mw) {
  // The f16 fields (at word 0 of each block, q4_1's min at word 1) picked out of 64-byte loads of
  // the group with word permutes: a gather costs several times more on Zen 4.
  mw = _mm256_setzero_ps();
  if constexpr (isDecoded(F)) {
    // decodedWeights below
  } else if constexpr (F == BlockFormat::q4_0) { // words 9j: all in the first 128 bytes
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
  if constexpr (isDecoded(F)) {
    decodedWeights<F>(p, bytes, dw, mw);
  } else if constexpr (F == BlockFormat::q8_0) {
    constexpr int a[2][2] = {{0, 16}, {128, 144}}, b[2][2] = {{64, 80}, {192, 208}};
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half)
        bytes[h][half] = pick16(p, a[h][half], _mm512_loadu_si512(p + b[h][half]), kTables<F>.t[h][half]);
  } else {
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    // q4_0 blocks 4-7 end at byte 143: the second table is the last 16 bytes, zero-extended.
    const __m512i second = F == BlockFormat::q4_0 ? _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 128)))
                                                  : _mm512_loadu_si512(p + 96);
    const __m512i v[2] = {pick16(p, 0, _mm512_loadu_si512(p + 64), kTables<F>.t[0][0]),
                          pick16(p, 64, second, kTables<F>.t[1][0])};
    for (int h = 0; h < 2; ++h) {
      bytes[h][0] = _mm512_and_si512(v[h], nibble);
      bytes[h][1] = _mm512_and_si512(_mm512_srli_epi16(v[h], 4), nibble);
    }
  }
  if (valid < kLanes) { // a row's tail: lanes >= valid are the next row's blocks
    const __mmask8 keep = __mmask8((1u << valid) - 1);
    dw = _mm256_maskz_mov_ps(keep, dw);
    mw = _mm256_maskz_mov_ps(keep, mw);
  }
}

template <BlockFormat F, int MB>
HELM_QAVX512 inline void legacyGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc, int valid) {
  __m256 dw, mw;
  // w[h][0]: first halves of blocks 4h..4h+3, w[h][1]: second halves (unsigned operands).
  __m512i w[2][2];
  legacyWeights<F>(p, valid, w, dw, mw);
  __mmask64 negative[2][2] = {};
  if constexpr (F == BlockFormat::q8_0) // the sign trick: |w| against the codes negated where w < 0
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half) {
        negative[h][half] = _mm512_movepi8_mask(w[h][half]);
        w[h][half] = _mm512_abs_epi8(w[h][half]);
      }
  const __m512 dw2 = twice(dw), mw2 = twice(mw);
#pragma GCC unroll 8
  for (int m = 0; m + 1 < MB; m += 2) {
    __m512i da[2], db[2];
    legacyDots<F>(w, negative, x.codes(m), da);
    legacyDots<F>(w, negative, x.codes(m + 1), db);
    __m512i isum = reduce8x2(da[0], da[1], db[0], db[1]);
    if constexpr (codeOffsetShift<F>() >= 0) // q4_0: codes are nibble - 8, q5_0: q - 16, iq4: (T + 128) - 128
      isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(loadPair(x.xsum(m)), codeOffsetShift<F>()));
    __m512 &a = acc.pair[m / 2];
    addBlockTerms(a, isum, dw2, x, m);
    if constexpr (F == BlockFormat::q4_1 || F == BlockFormat::q5_1)
      a = _mm512_add_ps(a, _mm512_mul_ps(mw2, loadPair(x.sx(m))));
  }
  if constexpr (MB % 2 == 1) {
    constexpr int m = MB - 1;
    __m512i dot[2];
    legacyDots<F>(w, negative, x.codes(m), dot);
    __m256i isum = reduce8(dot[0], dot[1]);
    if constexpr (codeOffsetShift<F>() >= 0)
      isum = _mm256_sub_epi32(
          isum, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x.xsum(m))), codeOffsetShift<F>()));
    addBlockTerms(acc.last, isum, dw, x, m);
    if constexpr (F == BlockFormat::q4_1 || F == BlockFormat::q5_1)
      acc.last = _mm256_add_ps(acc.last, _mm256_mul_ps(mw, _mm256_loadu_ps(x.sx(m))));
  }
}

/// The decoded formats (q5_0, q5_1, iq4_nl, iq4_xs) take legacyGroup's kernel: legacyWeights
/// decodes them into its registers as unsigned codes.
template <BlockFormat F, int MB>
HELM_QAVX512 inline void pathDecodedGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc, int valid) {
  legacyGroup<F, MB>(p, x, acc, valid);
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

/// One row's integer dot products of a q4_k / q5_k super-block: dot[h] holds activation blocks
/// 4h..4h+3, one per 128-bit lane (four partial sums each).
HELM_QAVX512 inline void kQuantDots(const __m512i w[2][2], const int8_t *codes, __m512i dot[2]) {
  for (int h = 0; h < 2; ++h) {
    const int8_t *c = codes + h * 128;
    dot[h] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[h][0], _mm512_loadu_si512(c)), w[h][1],
                                 _mm512_loadu_si512(c + 64));
  }
}

// ---- super-blocks of 16-weight sub-blocks: q6_k, q3_k, q2_k and the iq lattice formats ----------
//
// Each is, per super-block, unsigned codes u (the weight code plus 2^OffsetShift), 16 int16 scales
// sc (one per 16 weights), q2_k's 16 mins, and f32 factors d (and dmin): isum = sum sc * u * c -
// 2^OffsetShift * sum sc * (per-16 sums of c), exact in int32, as QuantGemvImpl.h's arithmetic
// gives it (q6_k: q = (q + 32) - 32 with q stored unsigned; q3_k: q + 4; iq: signed code + 64;
// q2_k: q itself, its mins through the per-16 sums). u x c pairs stay within int16 (u <= 126).

/// Whether F runs the sub-16 kernels below.
constexpr bool isSub16(BlockFormat f) { return f == BlockFormat::q6_k || isLowBitKQuant(f) || isIq(f); }
/// The offset its unsigned codes carry, as a power of two (-1: none).
template <BlockFormat F> constexpr int sub16OffsetShift() {
  if constexpr (F == BlockFormat::q6_k)
    return 5;
  else if constexpr (F == BlockFormat::q3_k)
    return 2;
  else if constexpr (F == BlockFormat::q2_k)
    return -1;
  else
    return 6;
}

struct Sub16Weights {
  __m512i w[2][2]; ///< the codes in the registers' order (kQuantWeights), unsigned
  __m256i sc16;    ///< the 16 scales as words, sub-block order
  __m256i mn16;    ///< q2_k's 16 mins as words
  float d, dmin;
};

/// q2_k / q3_k codes in the registers' order: code i of 32-code block 4h + t is bits 2t..2t+1 of
/// qs[32h + i] (as for every block of a 128-weight half), so each register is 16 bytes of qs in all
/// four 128-bit lanes shifted by 0, 2, 4, 6; q3_k adds 4 where hmask[i] has bit 4h + t.
template <BlockFormat F> HELM_QAVX512 inline void lowBitWeights(const uint8_t *p, Sub16Weights &s) {
  constexpr int qsOffset = F == BlockFormat::q2_k ? int(offsetof(BlockQ2K, qs)) : int(offsetof(BlockQ3K, qs));
  const __m512i three = _mm512_set1_epi8(3);
  const __m512i shifts = _mm512_set_epi64(0x0006000600060006, 0x0006000600060006, 0x0004000400040004,
                                          0x0004000400040004, 0x0002000200020002, 0x0002000200020002, 0, 0);
  for (int h = 0; h < 2; ++h)
    for (int half = 0; half < 2; ++half) {
      const __m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + qsOffset + 32 * h + 16 * half)));
      // 16-bit shifts carry bits of the high byte into the low one; the mask drops them.
      s.w[h][half] = _mm512_and_si512(_mm512_srlv_epi16(q, shifts), three);
      if constexpr (F == BlockFormat::q3_k) {
        const __m512i hm = _mm512_broadcast_i32x4(
            _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + offsetof(BlockQ3K, hmask) + 16 * half)));
        const auto bit = [](int k) { return int(0x01010101u << k); };
        const int j = 4 * h;
        const __m512i bits = _mm512_set_epi32(bit(j + 3), bit(j + 3), bit(j + 3), bit(j + 3), bit(j + 2), bit(j + 2),
                                              bit(j + 2), bit(j + 2), bit(j + 1), bit(j + 1), bit(j + 1), bit(j + 1),
                                              bit(j), bit(j), bit(j), bit(j));
        s.w[h][half] = _mm512_mask_add_epi8(s.w[h][half], _mm512_test_epi8_mask(hm, bits), s.w[h][half], _mm512_set1_epi8(4));
      }
    }
  if constexpr (F == BlockFormat::q2_k) {
    const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + offsetof(BlockQ2K, scales)));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    s.sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sm, low4));
    s.mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), low4));
    s.d = halfAt(p + offsetof(BlockQ2K, d));
    s.dmin = halfAt(p + offsetof(BlockQ2K, dmin));
  } else {
    // q3KScale for all 16 at once: the low 4 bits are the nibbles of bytes 0-7 (sub-blocks 0-7 the
    // low ones, 8-15 the high ones), the top 2 bits of sub-block s bits 2 (s / 4) of byte 8 + s % 4.
    const uint8_t *sc = p + offsetof(BlockQ3K, scales);
    uint64_t low;
    uint32_t high;
    std::memcpy(&low, sc, sizeof low);
    std::memcpy(&high, sc + 8, sizeof high);
    constexpr uint64_t nibbles = 0x0F0F0F0F0F0F0F0Full;
    constexpr uint32_t twoBits = 0x03030303u;
    const uint64_t top01 = uint64_t(high & twoBits) | uint64_t((high >> 2) & twoBits) << 32;
    const uint64_t top23 = uint64_t((high >> 4) & twoBits) | uint64_t((high >> 6) & twoBits) << 32;
    const __m128i codes = _mm_set_epi64x(static_cast<long long>(((low >> 4) & nibbles) | top23 << 4),
                                         static_cast<long long>((low & nibbles) | top01 << 4));
    s.sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(codes), _mm256_set1_epi16(32));
    s.mn16 = _mm256_setzero_si256();
    s.d = halfAt(p + offsetof(BlockQ3K, d));
    s.dmin = 0.0f;
  }
}

/// Byte-permute indices for the iq decoders: for register (h, half), lane k of the result takes
/// the byte at `pos(h, half, k)` of the source register (the rest pick byte 0).
struct PickTable {
  alignas(64) uint8_t idx[64];
};
template <class Pos> constexpr PickTable pickTable(int h, int half, int count, Pos pos) {
  PickTable t{};
  for (int k = 0; k < count; ++k)
    t.idx[k] = uint8_t(pos(h, half, k));
  return t;
}
/// For each register (h, half) of an iq super-block, the 8 groups of 8 weights it holds: group k
/// (qword k, k = 2t + e) is group g = 2 half + e of sub-block j = 4h + t.
constexpr int iqSubBlockOf(int h, int k) { return 4 * h + k / 2; }
constexpr int iqGroupOf(int half, int k) { return 2 * half + k % 2; }
struct PickTables {
  PickTable t[2][2];
};
template <int Count, class Pos> constexpr PickTables pickTables(Pos pos) {
  return {{{pickTable(0, 0, Count, pos), pickTable(0, 1, Count, pos)},
           {pickTable(1, 0, Count, pos), pickTable(1, 1, Count, pos)}}};
}
// Group (j, g)'s one-byte index (iq2_xxs: qs[8j + g]; iq2_s: qs[4j + g]), its sign byte
// (iq2_s / iq3_s: signs[4j + g]), its sub-block's byte (iq2_s's qh[j]), its two 4-weight entries'
// bytes (iq3: qs[8j + 2g + i], lane 2k + i).
constexpr auto kIq2XxsIndex = pickTables<8>([](int h, int half, int k) { return 8 * iqSubBlockOf(h, k) + iqGroupOf(half, k); });
constexpr auto kIqFourPerSubBlock = pickTables<8>([](int h, int half, int k) { return 4 * iqSubBlockOf(h, k) + iqGroupOf(half, k); });
constexpr auto kIqSubBlockByte = pickTables<8>([](int h, int, int k) { return iqSubBlockOf(h, k); });
constexpr auto kIq3Index = pickTables<16>([](int h, int half, int k) { return 8 * iqSubBlockOf(h, k / 2) + 2 * iqGroupOf(half, k / 2) + k % 2; });

/// The permute of `table` applied to the 64 bytes `v`, its first bytes as a 128-bit register.
HELM_QAVX512 inline __m128i pick(const PickTable &table, __m512i v) {
  return _mm512_castsi512_si128(_mm512_permutexvar_epi8(_mm512_load_si512(table.idx), v));
}
/// iqSigns of 7-bit indices in dwords: the index, and its parity as bit 7.
HELM_QAVX512 inline __m256i sevenBitSigns(__m256i index) {
  __m256i t = _mm256_xor_si256(index, _mm256_srli_epi32(index, 4));
  t = _mm256_xor_si256(t, _mm256_srli_epi32(t, 2));
  t = _mm256_xor_si256(t, _mm256_srli_epi32(t, 1));
  return _mm256_or_si256(index, _mm256_slli_epi32(_mm256_and_si256(t, _mm256_set1_epi32(1)), 7));
}
/// Eight sign bytes (the low byte of each dword) as the 64-bit byte mask of a register's 8 groups.
HELM_QAVX512 inline __mmask64 signMask(__m256i signs) {
  return _cvtu64_mask64(uint64_t(_mm_cvtsi128_si64(_mm256_cvtepi32_epi8(signs))));
}
HELM_QAVX512 inline __mmask64 signMask(__m128i signBytes) { return _cvtu64_mask64(uint64_t(_mm_cvtsi128_si64(signBytes))); }
/// The 16 scale words 2 ls + 1 of eight sub-blocks whose two halves share ls (dword j).
HELM_QAVX512 inline __m256i sharedScales(__m256i ls) {
  const __m256i odd = _mm256_add_epi32(_mm256_add_epi32(ls, ls), _mm256_set1_epi32(1));
  return _mm256_or_si256(odd, _mm256_slli_epi32(odd, 16));
}
/// ... and of eight bytes of two 4-bit scales each (low nibble: the first half).
HELM_QAVX512 inline __m256i nibbleScales(const uint8_t *scales) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(scales));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i ls = _mm_unpacklo_epi8(_mm_and_si128(v, low4), _mm_and_si128(_mm_srli_epi16(v, 4), low4));
  const __m256i w = _mm256_cvtepu8_epi16(ls);
  return _mm256_add_epi16(_mm256_add_epi16(w, w), _mm256_set1_epi16(1));
}

/// An iq lattice super-block: per group of 8 weights its lattice magnitudes (gathered from the
/// grid: one qword a group for iq2, two dwords for iq3) and 8 sign bits, which for the 8 groups of
/// a register are one 64-bit byte mask: u = 64 + m or 64 - m. The same codes and scales as
/// iqSubBlock's (IqFormats.h), read eight groups at a time.
template <BlockFormat F> HELM_QAVX512 inline void iqWeights(const uint8_t *p, Sub16Weights &s) {
  const __m512i offset = _mm512_set1_epi8(64);
  const auto *base = p + 2; // every layout's first field after d
  __m512i mag[2][2];
  __mmask64 negative[2][2];
  if constexpr (F == BlockFormat::iq2_xxs || F == BlockFormat::iq3_xxs) {
    // Per sub-block j a word of four 7-bit sign indices (bits 7g ..) and the scale (bits 28 ..):
    // iq2_xxs's qs[8j + 4 ..], iq3_xxs's scalesAndSigns[4j ..].
    const __m512i qs = _mm512_loadu_si512(base);
    const __m256i aux = F == BlockFormat::iq2_xxs
                            ? _mm512_castsi512_si256(_mm512_permutexvar_epi32(
                                  _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0), qs))
                            : _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + offsetof(BlockIq3Xxs, scalesAndSigns)));
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half) {
        if constexpr (F == BlockFormat::iq2_xxs)
          mag[h][half] = _mm512_i32gather_epi64(_mm256_cvtepu8_epi32(pick(kIq2XxsIndex.t[h][half], qs)),
                                                reinterpret_cast<const long long *>(kIq2XxsGrid), 8);
        else
          mag[h][half] = _mm512_i32gather_epi32(_mm512_cvtepu8_epi32(pick(kIq3Index.t[h][half], qs)),
                                                reinterpret_cast<const int *>(kIq3XxsGrid), 4);
        // Group k = 2t + e: sub-block 4h + t's word, shifted by 7 (2 half + e).
        const __m256i words = _mm256_permutexvar_epi32(
            _mm256_setr_epi32(4 * h, 4 * h, 4 * h + 1, 4 * h + 1, 4 * h + 2, 4 * h + 2, 4 * h + 3, 4 * h + 3), aux);
        const __m256i shifts = _mm256_setr_epi32(14 * half, 14 * half + 7, 14 * half, 14 * half + 7, 14 * half,
                                                 14 * half + 7, 14 * half, 14 * half + 7);
        negative[h][half] =
            signMask(sevenBitSigns(_mm256_and_si256(_mm256_srlv_epi32(words, shifts), _mm256_set1_epi32(127))));
      }
    s.sc16 = sharedScales(_mm256_srli_epi32(aux, 28));
  } else if constexpr (F == BlockFormat::iq2_xs) {
    // 32 words: lattice index (9 bits), sign index (7 bits); word 4j + g is group (j, g).
    const __m512i qs = _mm512_loadu_si512(base);
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half) {
        const __m512i wordIdx = _mm512_zextsi128_si512(_mm_setr_epi16(
            short(16 * h + 2 * half), short(16 * h + 2 * half + 1), short(16 * h + 4 + 2 * half),
            short(16 * h + 5 + 2 * half), short(16 * h + 8 + 2 * half), short(16 * h + 9 + 2 * half),
            short(16 * h + 12 + 2 * half), short(16 * h + 13 + 2 * half)));
        const __m256i entries = _mm256_cvtepu16_epi32(_mm512_castsi512_si128(_mm512_permutexvar_epi16(wordIdx, qs)));
        mag[h][half] = _mm512_i32gather_epi64(_mm256_and_si256(entries, _mm256_set1_epi32(511)),
                                              reinterpret_cast<const long long *>(kIq2XsGrid), 8);
        negative[h][half] = signMask(sevenBitSigns(_mm256_srli_epi32(entries, 9)));
      }
    s.sc16 = nibbleScales(p + offsetof(BlockIq2Xs, scales));
  } else if constexpr (F == BlockFormat::iq2_s) {
    // Group (j, g): index qs[4j + g] | (qh[j] bits 2g, 2g + 1) << 8, sign byte signs[4j + g].
    const __m512i qs = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(base)));
    const __m512i signs = _mm512_zextsi256_si512(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + offsetof(BlockIq2S, signs))));
    const __m512i qh = _mm512_zextsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + offsetof(BlockIq2S, qh))));
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half) {
        const __m256i low = _mm256_cvtepu8_epi32(pick(kIqFourPerSubBlock.t[h][half], qs));
        const __m256i high = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_cvtepu8_epi32(pick(kIqSubBlockByte.t[h][half], qh)),
                              _mm256_setr_epi32(4 * half, 4 * half + 2, 4 * half, 4 * half + 2, 4 * half, 4 * half + 2,
                                                4 * half, 4 * half + 2)),
            _mm256_set1_epi32(3));
        mag[h][half] = _mm512_i32gather_epi64(_mm256_or_si256(low, _mm256_slli_epi32(high, 8)),
                                              reinterpret_cast<const long long *>(kIq2SGrid), 8);
        negative[h][half] = signMask(pick(kIqFourPerSubBlock.t[h][half], signs));
      }
    s.sc16 = nibbleScales(p + offsetof(BlockIq2S, scales));
  } else {
    static_assert(F == BlockFormat::iq3_s, "an iq lattice format without a vector decoder");
    // Entry n = 8j + 2g + i: index qs[n] | (qh[j] bit 2g + i) << 8; sign byte signs[4j + g].
    const __m512i qs = _mm512_loadu_si512(base);
    const __m512i signs = _mm512_zextsi256_si512(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + offsetof(BlockIq3S, signs))));
    const __m512i qh = _mm512_zextsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + offsetof(BlockIq3S, qh))));
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half) {
        // Dword lane 4t + 2e + i: entry 2 (2 half + e) + i of sub-block 4h + t.
        const __m512i qhBytes = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(
            _mm512_castsi512_si128(qh), _mm_setr_epi8(char(4 * h), char(4 * h), char(4 * h), char(4 * h), char(4 * h + 1),
                                                      char(4 * h + 1), char(4 * h + 1), char(4 * h + 1), char(4 * h + 2),
                                                      char(4 * h + 2), char(4 * h + 2), char(4 * h + 2), char(4 * h + 3),
                                                      char(4 * h + 3), char(4 * h + 3), char(4 * h + 3))));
        const __m512i bit = _mm512_and_si512(
            _mm512_srlv_epi32(qhBytes, _mm512_setr_epi32(4 * half, 4 * half + 1, 4 * half + 2, 4 * half + 3, 4 * half,
                                                         4 * half + 1, 4 * half + 2, 4 * half + 3, 4 * half, 4 * half + 1,
                                                         4 * half + 2, 4 * half + 3, 4 * half, 4 * half + 1, 4 * half + 2,
                                                         4 * half + 3)),
            _mm512_set1_epi32(1));
        const __m512i index = _mm512_or_si512(_mm512_cvtepu8_epi32(pick(kIq3Index.t[h][half], qs)), _mm512_slli_epi32(bit, 8));
        mag[h][half] = _mm512_i32gather_epi32(index, reinterpret_cast<const int *>(kIq3SGrid), 4);
        negative[h][half] = signMask(pick(kIqFourPerSubBlock.t[h][half], signs));
      }
    uint32_t scales;
    std::memcpy(&scales, p + offsetof(BlockIq3S, scales), sizeof scales);
    s.sc16 = sharedScales(_mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(int(scales)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(0xF)));
  }
  for (int h = 0; h < 2; ++h)
    for (int half = 0; half < 2; ++half)
      s.w[h][half] = _mm512_mask_sub_epi8(_mm512_add_epi8(offset, mag[h][half]), negative[h][half], offset, mag[h][half]);
  s.mn16 = _mm256_setzero_si256();
  s.d = iqFactor<F>(halfAt(p));
  s.dmin = 0.0f;
}

template <BlockFormat F> HELM_QAVX512 inline void sub16Weights(const uint8_t *p, Sub16Weights &s) {
  if constexpr (F == BlockFormat::q6_k) {
    kQuantWeights<F>(p, s.w);
    s.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + kQ6KScOffset)));
    s.mn16 = _mm256_setzero_si256();
    s.d = halfAt(p + kQ6KDOffset);
    s.dmin = 0.0f;
  } else if constexpr (isLowBitKQuant(F)) {
    lowBitWeights<F>(p, s);
  } else {
    iqWeights<F>(p, s);
  }
}

/// One row's integer dot products of a sub-16 super-block: dot[h] holds activation blocks
/// 4h..4h+3, one per 128-bit lane (four partial sums each): maddubs pairs times the 16-code
/// sub-block's scale (scale16: lane t, all words, the scale of sub-block 2 (4h + t) + half),
/// summed into int32 by vpdpwssd, exact.
HELM_QAVX512 inline void sub16Dots(const __m512i w[2][2], const __m512i scale16[2][2], const int8_t *codes, __m512i dot[2]) {
  for (int h = 0; h < 2; ++h) {
    const int8_t *c = codes + h * 128;
    dot[h] = _mm512_dpwssd_epi32(
        _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_maddubs_epi16(w[h][0], _mm512_loadu_si512(c)), scale16[h][0]),
        _mm512_maddubs_epi16(w[h][1], _mm512_loadu_si512(c + 64)), scale16[h][1]);
  }
}

/// A sub-16 super-block at p (x at its group of 8 activation blocks) added to the MB rows' lanes,
/// QuantGemvImpl.h's arithmetic: lane j += float(isum) * (d * dx), then (q2_k) lane j -=
/// float(msum) * (dmin * dx), msum = mn[2j] * (sum of block j's first 16 codes) + mn[2j + 1] *
/// (of its second 16). Rows of x go in pairs, as pathKQuantGroup's.
template <BlockFormat F, int MB>
HELM_QAVX512 inline void pathSub16Group(const uint8_t *p, const XRows &x, PathAcc<MB> &acc) {
  Sub16Weights s;
  sub16Weights<F>(p, s);
  __m512i scale16[2][2];
  const __m512i words = _mm512_castsi256_si512(s.sc16);
  for (int h = 0; h < 2; ++h)
    for (int half = 0; half < 2; ++half) {
      const int base = 8 * h + half;
      scale16[h][half] = _mm512_permutexvar_epi16(
          _mm512_set_epi16(base + 6, base + 6, base + 6, base + 6, base + 6, base + 6, base + 6, base + 6,
                           base + 4, base + 4, base + 4, base + 4, base + 4, base + 4, base + 4, base + 4,
                           base + 2, base + 2, base + 2, base + 2, base + 2, base + 2, base + 2, base + 2,
                           base, base, base, base, base, base, base, base),
          words);
    }
  constexpr int shift = sub16OffsetShift<F>();
  constexpr bool hasMins = F == BlockFormat::q2_k;
  const __m256 d = _mm256_set1_ps(s.d), dmin = _mm256_set1_ps(s.dmin);
  const __m512 d2 = twice(d), dmin2 = twice(dmin);
  const __m512i sc16x2 = _mm512_broadcast_i64x4(s.sc16), mn16x2 = _mm512_broadcast_i64x4(s.mn16);
#pragma GCC unroll 8
  for (int m = 0; m + 1 < MB; m += 2) {
    __m512i da[2], db[2];
    sub16Dots(s.w, scale16, x.codes(m), da);
    sub16Dots(s.w, scale16, x.codes(m + 1), db);
    __m512i isum = reduce8x2(da[0], da[1], db[0], db[1]);
    const __m512i halfSums = loadPair(x.halfSum(m));
    if constexpr (shift >= 0) // lane j: 2^shift * (sc[2j] * halfSum[2j] + sc[2j + 1] * halfSum[2j + 1])
      isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(_mm512_madd_epi16(sc16x2, halfSums), shift));
    __m512 &a = acc.pair[m / 2];
    addBlockTerms(a, isum, d2, x, m);
    if constexpr (hasMins) {
      const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(mn16x2, halfSums)),
                                     _mm512_mul_ps(dmin2, loadPair(x.dx(m))));
      a = _mm512_sub_ps(a, t);
    }
  }
  if constexpr (MB % 2 == 1) {
    constexpr int m = MB - 1;
    __m512i dot[2];
    sub16Dots(s.w, scale16, x.codes(m), dot);
    __m256i isum = reduce8(dot[0], dot[1]);
    const __m256i halfSums = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x.halfSum(m)));
    if constexpr (shift >= 0)
      isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_madd_epi16(s.sc16, halfSums), shift));
    addBlockTerms(acc.last, isum, d, x, m);
    if constexpr (hasMins) {
      const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s.mn16, halfSums)),
                                     _mm256_mul_ps(dmin, _mm256_loadu_ps(x.dx(m))));
      acc.last = _mm256_sub_ps(acc.last, t);
    }
  }
}

/// q2_k, q3_k and the iq lattice formats: the sub-16 kernel.
template <BlockFormat F, int MB>
HELM_QAVX512 inline void pathLowBitGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc) {
  pathSub16Group<F, MB>(p, x, acc);
}

/// The k-quant super-block at p (x at its group of 8 activation blocks) added to the MB rows' lanes, as
/// kQuantGroup computes it: the same exact integer sums per activation block, then the same float
/// operations, so the results are bit-identical. q4_k / q5_k: each block's codes meet the weights in
/// 512-bit VNNI byte dot products; q6_k is a sub-16 format (pathSub16Group). Rows of x go in pairs:
/// one reduction and one 512-bit float step for two.
template <BlockFormat F, int MB>
HELM_QAVX512 inline void pathKQuantGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc) {
  if constexpr (F == BlockFormat::q6_k) {
    pathSub16Group<F, MB>(p, x, acc);
  } else {
    __m512i w[2][2];
    kQuantWeights<F>(p, w);
    __m256 dsc, dmn;
    kQuantScalesMins(p, dsc, dmn);
    const __m512 dsc2 = twice(dsc), dmn2 = twice(dmn);
#pragma GCC unroll 8
    for (int m = 0; m + 1 < MB; m += 2) {
      __m512i da[2], db[2];
      kQuantDots(w, x.codes(m), da);
      kQuantDots(w, x.codes(m + 1), db);
      __m512 &a = acc.pair[m / 2];
      addBlockTerms(a, reduce8x2(da[0], da[1], db[0], db[1]), dsc2, x, m);
      a = _mm512_sub_ps(a, _mm512_mul_ps(dmn2, _mm512_mul_ps(loadPair(x.dx(m)), _mm512_cvtepi32_ps(loadPair(x.xsum(m))))));
    }
    if constexpr (MB % 2 == 1) {
      constexpr int m = MB - 1;
      __m512i dot[2];
      kQuantDots(w, x.codes(m), dot);
      addBlockTerms(acc.last, reduce8(dot[0], dot[1]), dsc, x, m);
      acc.last = _mm256_sub_ps(acc.last, _mm256_mul_ps(dmn, exactScaledSum(x, m)));
    }
  }
}

// ---- 16 rows of x at once: lanes (block, row), no reduction --------------------------------------
//
// With x in quads (quantizeXAvx512), one 512-bit VNNI step multiplies 4 codes of each of 4 blocks
// (the 128-bit lanes: the weight register's dword d broadcast within its lane, vpshufd) with the same
// 4 codes of 4 rows of x (the dwords of each lane): after the 8 steps of a half-group (2 halves x 4
// dwords) every lane holds one block's exact integer sum for one row. That is the reference's isum
// per (row, block), already in the lanes the f32 step wants, where the per-row kernels spend about
// as many operations reducing four partial sums per block as on the dot products themselves. The
// f32 accumulators keep the same lanes: lane (l, r) of acc[h][k] is lane 4h + l of row 4k + r, so
// each lane sees the reference's operations in the reference's order, and the final sum per row
// is ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) with lanes combined a 128-bit lane at a time.

/// Lanes (l, r) = v[4h + l]: a weight's per-block value for all 4 rows of a quad.
HELM_QAVX512 inline __m512 spreadBlocks(__m256 v, int h) {
  const __m512i idx = _mm512_add_epi32(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                                       _mm512_set1_epi32(4 * h));
  return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(v));
}

/// vpermw indices over q6_k's 16 scales (words 0-15) for lanes (l, r): both words of lane (l, r)
/// = word 2 (4h + l) + half (the scale of the 16-code sub-block), or (offset) word e = 2 (4h + l) + e.
struct WordTable {
  alignas(64) int16_t idx[32];
};
constexpr WordTable q6ScaleWords(int h, int half) {
  WordTable t{};
  for (int lane = 0; lane < 16; ++lane)
    for (int e = 0; e < 2; ++e)
      t.idx[2 * lane + e] = int16_t(2 * (4 * h + lane / 4) + half);
  return t;
}
constexpr WordTable q6PairWords(int h) {
  WordTable t{};
  for (int lane = 0; lane < 16; ++lane)
    for (int e = 0; e < 2; ++e)
      t.idx[2 * lane + e] = int16_t(2 * (4 * h + lane / 4) + e);
  return t;
}
constexpr WordTable kQ6ScaleWords[2][2] = {{q6ScaleWords(0, 0), q6ScaleWords(0, 1)},
                                           {q6ScaleWords(1, 0), q6ScaleWords(1, 1)}};
constexpr WordTable kQ6PairWords[2] = {q6PairWords(0), q6PairWords(1)};

/// Adds one group of W's row (at p; blocks >= valid of a legacy format count as 0) to the lanes of
/// the 4 quads of x (x at that group). Quad k is rows 4k..4k+3 of the call: its codes and entries
/// start where row 4k's would (x.codes(4 * k), ...), in the quad order of quantizeXAvx512.
template <BlockFormat F>
HELM_QAVX512 inline void quadGroup(const uint8_t *p, int valid, const XRows &x, __m512 (&acc)[2][4]) {
  __m512i w[2][2];
  // legacy: dw and q4_1's / q5_1's mw; q4_k / q5_k: dsc and dmn; sub-16 formats: d and dmin.
  __m256 scale, second = _mm256_setzero_ps();
  __m256i sc16 = _mm256_setzero_si256(), mn16 = _mm256_setzero_si256(); // sub-16: scales, q2_k's mins
  if constexpr (isSub16(F)) {
    Sub16Weights s;
    sub16Weights<F>(p, s);
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half)
        w[h][half] = s.w[h][half];
    sc16 = s.sc16;
    mn16 = s.mn16;
    scale = _mm256_set1_ps(s.d);
    second = _mm256_set1_ps(s.dmin);
  } else if constexpr (isKQuant(F)) {
    kQuantWeights<F>(p, w);
    kQuantScalesMins(p, scale, second);
  } else {
    legacyWeights<F>(p, valid, w, scale, second);
    if constexpr (F == BlockFormat::q8_0) // w + 128 as unsigned bytes; 128 * sum(c) is taken off below
      for (int h = 0; h < 2; ++h)
        for (int half = 0; half < 2; ++half)
          w[h][half] = _mm512_xor_si512(w[h][half], _mm512_set1_epi8(char(0x80)));
  }
  const __m512i words = _mm512_castsi256_si512(sc16), minWords = _mm512_castsi256_si512(mn16);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512 scaleL = spreadBlocks(scale, h);
    const __m512 secondL = spreadBlocks(second, h);
    __m512i scaleW[2] = {}, offsetW = _mm512_setzero_si512(), minW = _mm512_setzero_si512();
    if constexpr (isSub16(F)) {
      for (int half = 0; half < 2; ++half)
        scaleW[half] = _mm512_permutexvar_epi16(_mm512_load_si512(kQ6ScaleWords[h][half].idx), words);
      // -2^shift sc[2j + e] against halfSum[e]: the codes' offset, as the sum's start.
      if constexpr (sub16OffsetShift<F>() >= 0)
        offsetW = _mm512_sub_epi16(_mm512_setzero_si512(),
                                   _mm512_slli_epi16(_mm512_permutexvar_epi16(_mm512_load_si512(kQ6PairWords[h].idx), words),
                                                     sub16OffsetShift<F>()));
      if constexpr (F == BlockFormat::q2_k)
        minW = _mm512_permutexvar_epi16(_mm512_load_si512(kQ6PairWords[h].idx), minWords);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      __m512i isum = _mm512_setzero_si512();
      if constexpr (isSub16(F) && sub16OffsetShift<F>() >= 0)
        isum = _mm512_dpwssd_epi32(isum, _mm512_loadu_si512(x.halfSum(4 * k) + 32 * h), offsetW);
      else if constexpr (codeOffsetShift<F>() >= 0) // q4_0: nibble - 8, q5_0: q - 16, iq4: (T + 128) - 128
        isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(_mm512_loadu_si512(x.xsum(4 * k) + 16 * h), codeOffsetShift<F>()));
      else if constexpr (F == BlockFormat::q8_0) // codes are (w + 128) - 128
        isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(_mm512_loadu_si512(x.xsum(4 * k) + 16 * h), 7));
      const int8_t *c = x.codes(4 * k) + 512 * h;
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const __m512i wh = w[h][half];
        const __m512i w0 = _mm512_shuffle_epi32(wh, _MM_PERM_AAAA), w1 = _mm512_shuffle_epi32(wh, _MM_PERM_BBBB);
        const __m512i w2 = _mm512_shuffle_epi32(wh, _MM_PERM_CCCC), w3 = _mm512_shuffle_epi32(wh, _MM_PERM_DDDD);
        const int8_t *ch = c + 256 * half;
        if constexpr (isSub16(F)) {
          // maddubs pairs (|pair| <= 2 * 126 * 127) times the sub-block's int8 scale, into int32.
          isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w0, _mm512_loadu_si512(ch)), scaleW[half]);
          isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w1, _mm512_loadu_si512(ch + 64)), scaleW[half]);
          isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w2, _mm512_loadu_si512(ch + 128)), scaleW[half]);
          isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w3, _mm512_loadu_si512(ch + 192)), scaleW[half]);
        } else {
          isum = _mm512_dpbusd_epi32(isum, w0, _mm512_loadu_si512(ch));
          isum = _mm512_dpbusd_epi32(isum, w1, _mm512_loadu_si512(ch + 64));
          isum = _mm512_dpbusd_epi32(isum, w2, _mm512_loadu_si512(ch + 128));
          isum = _mm512_dpbusd_epi32(isum, w3, _mm512_loadu_si512(ch + 192));
        }
      }
      const __m512 s = _mm512_mul_ps(scaleL, _mm512_loadu_ps(x.dx(4 * k) + 16 * h));
      __m512 &a = acc[h][k];
      a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), s));
      if constexpr (F == BlockFormat::q4_1 || F == BlockFormat::q5_1)
        a = _mm512_add_ps(a, _mm512_mul_ps(secondL, _mm512_loadu_ps(x.sx(4 * k) + 16 * h)));
      else if constexpr (F == BlockFormat::q4_k || F == BlockFormat::q5_k) // dmn * (dx * float(sum))
        a = _mm512_sub_ps(a, _mm512_mul_ps(secondL, _mm512_mul_ps(_mm512_loadu_ps(x.dx(4 * k) + 16 * h),
                                                                  _mm512_cvtepi32_ps(_mm512_loadu_si512(x.xsum(4 * k) + 16 * h)))));
      else if constexpr (F == BlockFormat::q2_k) { // minus float(msum) * (dmin * dx)
        const __m512i msum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(x.halfSum(4 * k) + 32 * h), minW);
        a = _mm512_sub_ps(a, _mm512_mul_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(secondL, _mm512_loadu_ps(x.dx(4 * k) + 16 * h))));
      }
    }
  }
}

/// K in chunks of this many groups of 8 blocks for calls of 16 rows: the chunk's x (16 rows x
/// 256 codes per group, 4 KiB, plus 2 KiB of per-block entries) stays in L1 while every weight
/// row of the call reads it. Unchunked, a row of K = 8192 read 128 KiB of x's codes from L2 for
/// each weight row, and the down projection ran at 45% of the others' GFLOP/s.
constexpr int64_t kChunkGroups = 4;
/// Weight rows whose partial lanes are kept between chunks (8 registers, 512 bytes, each).
constexpr int64_t kChunkRows = 32;

template <BlockFormat F>
HELM_QAVX512 void pathRows16(const QuantizedX &q, int64_t m0, const uint8_t *w, int64_t n0, int64_t n1, float *y,
                             int64_t N) {
  constexpr int64_t gb = groupBytes(F);
  const int64_t groups = q.blocks / kLanes, tail = q.blocks % kLanes, rowBytes = q.blocks * gb / kLanes;
  const uint8_t *wEnd = w + N * rowBytes;
  alignas(64) uint8_t tailBlocks[gb];
  if (tail)
    std::memset(tailBlocks, 0, sizeof tailBlocks);
  // Chunks of K, each over a slice of up to kChunkRows weight rows, whose lanes wait in `kept`
  // between chunks. Every lane still sees its blocks in order, so the bits do not change.
  const int64_t chunks = groups <= kChunkGroups ? 1 : (groups + kChunkGroups - 1) / kChunkGroups;
  // Within a chunk, the next rows' same chunk is what comes next: prefetch that far ahead.
  const int64_t chunkBytes = std::min(groups, kChunkGroups) * gb;
  const int64_t prefetchRows = chunks == 1 ? 0 : std::max<int64_t>(1, kPrefetchBytes / chunkBytes);
  __m512 kept[kChunkRows][2][4];
  for (int64_t s0 = n0; s0 < n1; s0 += kChunkRows) {
    const int64_t s1 = std::min(n1, s0 + kChunkRows);
    XRows xc = XRows::at(q, m0); // x at the chunk's first group
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t g0 = c * kChunkGroups, g1 = std::min(groups, g0 + kChunkGroups);
      const bool last = c + 1 == chunks;
      for (int64_t n = s0; n < s1; ++n) {
        const uint8_t *row = w + n * rowBytes;
        __m512 acc[2][4];
        for (int h = 0; h < 2; ++h)
          for (int k = 0; k < 4; ++k)
            acc[h][k] = c == 0 ? _mm512_setzero_ps() : kept[n - s0][h][k];
        XRows x = xc;
        for (int64_t g = g0; g < g1; ++g, x.next()) {
          const uint8_t *gp = row + g * gb;
          if (prefetchRows) // prefetchAhead adds kPrefetchBytes: this lands prefetchRows rows on
            prefetchAhead<F>(gp + (prefetchRows * rowBytes - kPrefetchBytes));
          else
            prefetchAhead<F>(gp);
          quadGroup<F>(gp, int(kLanes), x, acc);
        }
        if (!last) {
          for (int h = 0; h < 2; ++h)
            for (int k = 0; k < 4; ++k)
              kept[n - s0][h][k] = acc[h][k];
          continue;
        }
        if constexpr (!hasSuperBlocks(F))
          if (tail)
            quadGroup<F>(partialGroup<F>(row + groups * gb, tail, wEnd, tailBlocks), int(tail), x, acc);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          // 128-bit lane l of s: (l_l + l_{l+4}) for the quad's 4 rows; u's lane 0: (l0 + l4) + (l2 + l6),
          // lane 1: (l1 + l5) + (l3 + l7); their sum, row r in element r.
          const __m512 s = _mm512_add_ps(acc[0][k], acc[1][k]);
          const __m512 u = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, _MM_SHUFFLE(1, 0, 3, 2)));
          const __m128 t = _mm_add_ps(_mm512_castps512_ps128(u), _mm512_extractf32x4_ps(u, 1));
          alignas(16) float out[4];
          _mm_store_ps(out, t);
          for (int r = 0; r < 4; ++r)
            y[(m0 + 4 * k + r) * N + n] = out[r];
        }
      }
      for (int64_t g = g0; g < g1; ++g)
        xc.next();
    }
  }
}

} // namespace

const QuantKernels &quantKernelsAvx512Vnni() {
  static const QuantKernels k{&quantizeXAvx512, &rowsVector, kPathMaxRows};
  return k;
}

} // namespace helm::quant::detail
