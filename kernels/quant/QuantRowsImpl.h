//===- QuantRowsImpl.h - the vector paths' row loop and k-quant groups, written once ---===//
//
// Included (only) by QuantGemvAvx2.cpp and QuantGemvAvx512.cpp, which define HELM_QTARGET (the
// path's function attribute) and PathAcc before and these (declared here) after:
//   kPathMaxRows                   the most rows of x one call takes (8 or 16);
//   PathAcc<MB>                    the f32 partial sums of MB rows of x: zero() clears them,
//                                  row(m) is row m's eight lanes, add(m, v) adds v to them
//                                  (AVX2: one register per row; AVX-512: two rows per 512-bit
//                                  register);
//   loadCodes(codes, b)            block b's 32 activation codes, in order, from the path's
//                                  QuantizedX layout (AVX2: in order; AVX-512: interleaved halves);
//   dotU8S8(u, s)                  eight int32 sums of four u8 x s8 products, exact for the ranges
//                                  used here (AVX2: maddubs + madd; AVX-512: 256-bit VNNI);
//   legacyGroup<F, MB>(...)        the path's kernel for a group of 8 blocks of q8_0 / q4_0 / q4_1
//                                  (the first `valid` of them: the others' weight scales count as 0);
//   pathKQuantGroup<F, MB>(...)    the path's kernel for a k-quant super-block: AVX2 forwards to
//                                  kQuantGroup below, AVX-512 has its own with 512-bit VNNI;
//   pathDecodedGroup<F, MB>(...)   ... for a group of q5_0 / q5_1 / iq4_nl / iq4_xs: AVX2 forwards
//                                  to decodedGroup below, AVX-512 decodes into legacyGroup's
//                                  registers;
//   pathLowBitGroup<F, MB>(...)    ... for a q2_k / q3_k / iq lattice super-block: AVX2 forwards
//                                  to lowBitKQuantGroup / iqSuperBlock below, AVX-512 runs its
//                                  512-bit sub-16 kernel;
//   pathRows16<F>(...)             (kPathMaxRows >= 16 only) a whole call of 16 rows of x.
// This file adds the 256-bit groups (the k-quants: one 256-weight super-block = 8 activation
// blocks; the iq lattice formats' super-blocks, then q3_k's kernel; the decoded formats' groups,
// each block decoded to 32 codes in a register, one kernel for all four), which the AVX2 path runs,
// and the loop over rows, groups and the tail. Everything is in an anonymous namespace: each
// including file gets its own copy, compiled for its target.
//
// The arithmetic is QuantGemvImpl.h's, lane j = sub-block j of the super-block.
//
//===------------------------------------------------------------------------------===//
#ifndef HELM_KERNELS_QUANT_QUANTROWSIMPL_H
#define HELM_KERNELS_QUANT_QUANTROWSIMPL_H

#ifndef HELM_QTARGET
#error "define HELM_QTARGET before including QuantRowsImpl.h"
#endif

#include "kernels/quant/QuantGemvImpl.h"

#include <immintrin.h>

#include <cstring>

namespace helm::quant::detail {
namespace {

// ---- provided by the including file ----
HELM_QTARGET inline __m256i loadCodes(const int8_t *codes, int64_t b);
HELM_QTARGET inline __m256i dotU8S8(__m256i u, __m256i s);
/// The rows of x a kernel call handles, at one group of 8 activation blocks: one pointer per array
/// (QuantizedX is group-major, so row m of the call is a constant offset away: m * 256 codes, m * 8
/// blocks), stepped by next() from group to group. Not a pointer per row and array, which for 16
/// rows would not fit the general registers.
struct XRows {
  const int8_t *codes0;
  const float *dx0, *sx0;
  const int32_t *xsum0;
  const int16_t *halfSum0;
  int64_t groupStride; ///< blocks from a row's group to its next: 8 * M
  /// Rows m0.. of q at group 0.
  static XRows at(const QuantizedX &q, int64_t m0) {
    const int64_t first = q.blockIndex(m0, 0);
    return {q.codes + first * kBlock, q.scale + first, q.scaledSum + first, q.sum + first, q.halfSum + 2 * first,
            kLanes * q.M};
  }
  const int8_t *codes(int m) const { return codes0 + m * kLanes * kBlock; }
  const float *dx(int m) const { return dx0 + m * kLanes; }
  const float *sx(int m) const { return sx0 + m * kLanes; }
  const int32_t *xsum(int m) const { return xsum0 + m * kLanes; }
  const int16_t *halfSum(int m) const { return halfSum0 + 2 * m * kLanes; }
  void next() {
    codes0 += groupStride * kBlock;
    dx0 += groupStride;
    sx0 += groupStride;
    xsum0 += groupStride;
    halfSum0 += 2 * groupStride;
  }
};

/// Where a kernel reads a row's partial last group (tail < 8 blocks of a 32-weight format, at tp):
/// where it lies, its other blocks being the next row's bytes, whose weight scales the kernel
/// zeroes (`valid`) against x's zero padding codes and scales, so that they add +0 to the lanes,
/// which leaves them unchanged (a lane starts at +0 and is never -0 under round-to-nearest). Only
/// where the group would run past W's end is it copied into `scratch` (zero past the tail) first:
/// a copy costs a store-forwarding stall (for 576-wide rows, two groups and a tail of 2 blocks,
/// copying every row's tail took a third of the kernel's time).
template <BlockFormat F>
inline const uint8_t *partialGroup(const uint8_t *tp, int64_t tail, const uint8_t *wEnd, uint8_t *scratch) {
  if (wEnd - tp >= groupBytes(F))
    return tp;
  std::memcpy(scratch, tp, size_t(tail * blockBytes(F)));
  return scratch;
}
template <BlockFormat F, int MB>
HELM_QTARGET inline void legacyGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc, int valid = kLanes);
template <BlockFormat F, int MB>
HELM_QTARGET inline void pathKQuantGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc);
template <BlockFormat F, int MB>
HELM_QTARGET inline void pathDecodedGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc, int valid = kLanes);
/// The path's kernel for a q2_k / q3_k or iq lattice super-block (AVX2: lowBitKQuantGroup and
/// iqSuperBlock below; AVX-512: its own with 512-bit registers).
template <BlockFormat F, int MB>
HELM_QTARGET inline void pathLowBitGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc);
/// Paths whose calls take 16 rows of x (kPathMaxRows >= 16) provide their own kernel for a whole
/// call of 16 (QuantizedX stores those rows in the layout it reads).
template <BlockFormat F>
HELM_QTARGET void pathRows16(const QuantizedX &q, int64_t m0, const uint8_t *w, int64_t n0, int64_t n1, float *y,
                             int64_t N);

/// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the reference's order.
HELM_QTARGET inline float hsumOrder(__m256 acc) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

/// Lane j = the sum of the eight int32 lanes of p[j].
HELM_QTARGET inline __m256i reduce8x8(const __m256i p[8]) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

/// Prefetches the group kPrefetchBytes after the one at p (one prefetch per cache line it may
/// touch). The address is computed as an integer: it may lie past the end of W.
template <BlockFormat F> HELM_QTARGET inline void prefetchAhead(const uint8_t *p) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + uintptr_t(kPrefetchBytes);
  for (int64_t line = 0; line < groupBytes(F); line += 64)
    _mm_prefetch(reinterpret_cast<const char *>(ahead + uintptr_t(line)), _MM_HINT_T0);
}

/// roundToHalf with F16C: the same round to nearest even, subnormals and overflow to infinity, so
/// the same bits for every finite v, without two table and branch-heavy calls per block on the
/// thread that quantizes x while the pool waits.
HELM_QTARGET inline float roundToHalfF16c(float v) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
}

HELM_QTARGET inline float halfAt(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/// Bits shift..shift+1 of each byte of qh, moved to bits 4-5 (q6_k's high bits of one quarter).
/// 16-bit shifts move bits across bytes; the mask drops them again.
HELM_QTARGET inline __m256i q6TopBits(__m256i qh, int shift, __m256i low2) {
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), low2), 4);
}

/// Row m's eight dx * float(sum): the k-quants' min term reads the blocks' exact code sums, not the
/// f16 scaledSum (q4_1 / q5_1's, as llama.cpp's q8_1 blocks): that term nearly cancels the first,
/// so an f16 rounding of it would be most of the error (llama.cpp's q8_K sums are exact too).
HELM_QTARGET inline __m256 exactScaledSum(const XRows &x, int m) {
  return _mm256_mul_ps(_mm256_loadu_ps(x.dx(m)),
                       _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x.xsum(m)))));
}

/// A q4_k / q5_k super-block's eight sub-block scales and mins as f32 lanes, lane j = sub-block j:
/// dsc = d * scale_j, dmn = dmin * min_j (unpackScaleMin for all eight at once, on 32-bit words:
/// bytes 0-7 of `unpacked` are the scales, bytes 8-15 the mins).
HELM_QTARGET inline void kQuantScalesMins(const uint8_t *p, __m256 &dsc, __m256 &dmn) {
  uint32_t packed[3], unpacked[4];
  std::memcpy(packed, p + kScalesOffset, sizeof packed);
  constexpr uint32_t low6 = 0x3f3f3f3f, low4s = 0x0f0f0f0f, low2s = 0x03030303;
  unpacked[0] = packed[0] & low6;
  unpacked[1] = (packed[2] & low4s) | (((packed[0] >> 6) & low2s) << 4);
  unpacked[2] = packed[1] & low6;
  unpacked[3] = ((packed[2] >> 4) & low4s) | (((packed[1] >> 6) & low2s) << 4);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(unpacked));
  dsc = _mm256_mul_ps(_mm256_set1_ps(halfAt(p)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)));
  dmn = _mm256_mul_ps(_mm256_set1_ps(halfAt(p + 2)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8))));
}

/// Adds the super-block at p to acc[m] for the MB rows of x (x at its group of 8 activation blocks).
template <BlockFormat F, int MB>
HELM_QTARGET inline void kQuantGroup(const uint8_t *p, const XRows &x, __m256 *acc) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i wv[8]; // sub-block j's 32 weight codes, unsigned (q6_k: q, 0..63, before the -32)
  if constexpr (F == BlockFormat::q6_k) {
    const __m256i low2 = _mm256_set1_epi8(0x03);
    for (int half = 0; half < 2; ++half) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 64 * half));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 64 * half + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + kQ6KQhOffset + 32 * half));
      wv[4 * half + 0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), q6TopBits(qh, 0, low2));
      wv[4 * half + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), q6TopBits(qh, 2, low2));
      wv[4 * half + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), q6TopBits(qh, 4, low2));
      wv[4 * half + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), q6TopBits(qh, 6, low2));
    }
    // Activation block j spans sub-blocks 2j (int16 lanes 0-7 of the pair sums) and 2j + 1 (8-15).
    __m256i scale16[8];
    const int8_t *sc = reinterpret_cast<const int8_t *>(p + kQ6KScOffset);
    for (int j = 0; j < 8; ++j)
      scale16[j] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * j + 1]), _mm_set1_epi16(sc[2 * j]));
    // The 16 scales as words in sub-block order, for the offset of 32 (below).
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(sc)));
    const __m256 d = _mm256_set1_ps(halfAt(p + kQ6KDOffset));
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      __m256i prod[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        // q . c in pairs with q unsigned (0..63): |pair| <= 2 * 63 * 127 fits int16; times an int8
        // scale, summed in pairs: int32.
        prod[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[j], loadCodes(x.codes(m), j)), scale16[j]);
      }
      // Minus the offset: lane j loses 32 * (sc[2j] * halfSum[2j] + sc[2j + 1] * halfSum[2j + 1]).
      const __m256i offset = _mm256_madd_epi16(
          sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x.halfSum(m))));
      const __m256i isum = _mm256_sub_epi32(reduce8x8(prod), _mm256_slli_epi32(offset, 5));
      const __m256 s = _mm256_mul_ps(d, _mm256_loadu_ps(x.dx(m)));
      acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
    }
  } else {
    const uint8_t *qs = p + (F == BlockFormat::q4_k ? kQ4KQsOffset : kQ5KQsOffset);
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qs + 32 * pair));
      wv[2 * pair] = _mm256_and_si256(v, low4);
      wv[2 * pair + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    }
    if constexpr (F == BlockFormat::q5_k) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + kQ5KQhOffset));
      const __m256i sixteen = _mm256_set1_epi8(16);
      for (int j = 0; j < 8; ++j) {
        const __m256i bit = _mm256_set1_epi8(char(1 << j));
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
        wv[j] = _mm256_or_si256(wv[j], _mm256_and_si256(set, sixteen));
      }
    }
    __m256 dsc, dmn;
    kQuantScalesMins(p, dsc, dmn);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      __m256i prod[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        prod[j] = dotU8S8(wv[j], loadCodes(x.codes(m), j));
      const __m256i isum = reduce8x8(prod);
      const __m256 s = _mm256_mul_ps(dsc, _mm256_loadu_ps(x.dx(m)));
      acc[m] = _mm256_add_ps(acc[m], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
      acc[m] = _mm256_sub_ps(acc[m], _mm256_mul_ps(dmn, exactScaledSum(x, m)));
    }
  }
}

/// Block j's five-bit codes (q5_0 / q5_1) as unsigned bytes 0..31, in element order: the nibbles
/// of qs (element l < 16 low, l + 16 high) and bit l of the little-endian qh word as bit 4.
HELM_QTARGET inline __m256i fiveBitCodes(const uint8_t *qs, const uint8_t *qh) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
  const __m256i low = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
  uint32_t high;
  std::memcpy(&high, qh, sizeof high);
  // Byte l takes qh byte l / 8 (the word is in every 4 bytes of both 128-bit lanes), keeps bit l % 8.
  const __m256i which = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int(high)), which);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_or_si256(low, _mm256_and_si256(set, _mm256_set1_epi8(16)));
}

/// 16 bytes of iq4 nibbles as their 32 table values (signed bytes), in element order.
HELM_QTARGET inline __m256i iq4Codes(const uint8_t *qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
  const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i *>(kIq4Values));
  return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nibbles);
}

/// A decoded format's block j of the group at p: q5_0 / q5_1 the unsigned codes 0..31 (q5_0's
/// offset of 16 is taken off the sums), iq4 the signed table values.
template <BlockFormat F> HELM_QTARGET inline __m256i decodedBlock(const uint8_t *p, int j) {
  if constexpr (F == BlockFormat::q5_0)
    return fiveBitCodes(p + j * blockBytes(F) + offsetof(BlockQ5_0, qs), p + j * blockBytes(F) + offsetof(BlockQ5_0, qh));
  else if constexpr (F == BlockFormat::q5_1)
    return fiveBitCodes(p + j * blockBytes(F) + offsetof(BlockQ5_1, qs), p + j * blockBytes(F) + offsetof(BlockQ5_1, qh));
  else if constexpr (F == BlockFormat::iq4_nl)
    return iq4Codes(p + j * blockBytes(F) + offsetof(BlockIq4Nl, qs));
  else
    return iq4Codes(p + offsetof(BlockIq4Xs, qs) + 16 * j);
}

/// The eight blocks' scales (dw) and q5_1's mins (mw), lane j = block j; lanes >= valid are 0.
template <BlockFormat F> HELM_QTARGET inline void decodedScalesVector(const uint8_t *p, int valid, __m256 &dw, __m256 &mw) {
  if constexpr (F == BlockFormat::iq4_xs) {
    alignas(32) int32_t ls[8];
    for (int j = 0; j < 8; ++j)
      ls[j] = iq4XsScale(p, j) - 32;
    dw = _mm256_mul_ps(_mm256_set1_ps(halfAt(p)), _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i *>(ls))));
    mw = _mm256_setzero_ps();
  } else {
    // Eight word loads and inserts (a gather is slower on the CPUs measured; QuantGemvAvx2.cpp).
    constexpr int bs = int(blockBytes(F));
    uint16_t d[8], m[8];
    for (int j = 0; j < 8; ++j) {
      std::memcpy(&d[j], p + j * bs, 2);
      std::memcpy(&m[j], p + j * bs + 2, 2);
    }
    dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(d)));
    mw = F == BlockFormat::q5_1 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(m)))
                                : _mm256_setzero_ps();
  }
  if (valid < kLanes) { // a row's tail: lanes >= valid are the next row's blocks
    const __m256 keep = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    dw = _mm256_and_ps(dw, keep);
    mw = _mm256_and_ps(mw, keep);
  }
}

/// Adds a decoded format's group of 8 blocks (at p) to the MB rows of x (QuantGemvImpl.h's
/// arithmetic for the decoded formats).
template <BlockFormat F, int MB>
HELM_QTARGET inline void decodedGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc, int valid = kLanes) {
  constexpr bool isSigned = F == BlockFormat::iq4_nl || F == BlockFormat::iq4_xs;
  __m256i wv[8], magnitude[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    wv[j] = decodedBlock<F>(p, j);
    if constexpr (isSigned) // the sign trick: |w| (<= 127) against the codes negated where w < 0
      magnitude[j] = _mm256_abs_epi8(wv[j]);
  }
  __m256 dw, mw;
  decodedScalesVector<F>(p, valid, dw, mw);
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    __m256i prod[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i c = loadCodes(x.codes(m), j);
      if constexpr (isSigned)
        prod[j] = dotU8S8(magnitude[j], _mm256_sign_epi8(c, wv[j]));
      else
        prod[j] = dotU8S8(wv[j], c);
    }
    __m256i isum = reduce8x8(prod);
    if constexpr (F == BlockFormat::q5_0) // codes are q - 16
      isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x.xsum(m))), 4));
    const __m256 s = _mm256_mul_ps(dw, _mm256_loadu_ps(x.dx(m)));
    acc.add(m, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
    if constexpr (F == BlockFormat::q5_1)
      acc.add(m, _mm256_mul_ps(mw, _mm256_loadu_ps(x.sx(m))));
  }
}

/// Adds a super-block of sub-blocks of 16 to the MB rows of x (QuantGemvImpl.h's arithmetic), given
/// its 256 codes unsigned in wv (each code plus 2^OffsetShift; OffsetShift < 0: no offset),
/// its int16 sub-block scales (and, for HasMins, mins) and its factors: u8 x s8 pairs times the
/// scales (sub-block 2j in the low 128 bits, 2j + 1 in the high), the offset and the mins through
/// the per-16 sums of the codes (halfSum). Codes below 128: |pair| <= 2 * 126 * 127 fits int16.
/// With `signs` (bytes +1 / -1), the weights are wv's magnitudes times those signs, applied to the
/// activation codes instead (sign_epi8: the same integer products, c * (s * q) = (s * c) * q).
template <int OffsetShift, bool HasMins, int MB>
HELM_QTARGET inline void subBlocks16Group(const __m256i (&wv)[8], const int16_t (&scale)[16], const int16_t (&min)[16],
                                          float d, float dmin, const XRows &x, PathAcc<MB> &acc,
                                          const __m256i *signs = nullptr) {
  __m256i scale16[8];
  for (int j = 0; j < 8; ++j)
    scale16[j] = _mm256_set_m128i(_mm_set1_epi16(scale[2 * j + 1]), _mm_set1_epi16(scale[2 * j]));
  const __m256i scales = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(scale));
  const __m256i mins = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(min));
  const __m256 dv = _mm256_set1_ps(d), dminv = _mm256_set1_ps(dmin);
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    __m256i prod[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) { // a pair times a scale of |s| <= 32, summed in pairs: int32
      __m256i codes = loadCodes(x.codes(m), j);
      if (signs)
        codes = _mm256_sign_epi8(codes, signs[j]);
      prod[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[j], codes), scale16[j]);
    }
    __m256i isum = reduce8x8(prod);
    const __m256i halfSums = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x.halfSum(m)));
    if constexpr (OffsetShift >= 0) // lane j loses 2^shift * (sc . per-16 sums)
      isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_madd_epi16(scales, halfSums), OffsetShift));
    const __m256 dx = _mm256_loadu_ps(x.dx(m));
    acc.add(m, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dv, dx)));
    if constexpr (HasMins) { // lane - t is lane + (-t), bit for bit
      const __m256i msum = _mm256_madd_epi16(mins, halfSums);
      const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dminv, dx));
      acc.add(m, _mm256_xor_ps(t, _mm256_set1_ps(-0.0f)));
    }
  }
}

/// Adds a q2_k / q3_k super-block (at p) to the MB rows of x: the codes unsigned in registers
/// (q2_k: q, 0..3; q3_k: q + 4, 0..7), q3_k's offset of 4 and q2_k's mins (subBlocks16Group).
template <BlockFormat F, int MB>
HELM_QTARGET inline void lowBitKQuantGroup(const uint8_t *p, const XRows &x, PathAcc<MB> &acc) {
  const __m256i three = _mm256_set1_epi8(3);
  __m256i wv[8];
  int16_t scale[16], min[16] = {};
  float d, dmin = 0.0f;
  if constexpr (F == BlockFormat::q2_k) {
    for (int n = 0; n < 2; ++n) {
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + offsetof(BlockQ2K, qs) + 32 * n));
      for (int t = 0; t < 4; ++t)
        wv[4 * n + t] = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * t), three);
    }
    for (int s = 0; s < 16; ++s) {
      scale[s] = int16_t(p[offsetof(BlockQ2K, scales) + s] & 0xF);
      min[s] = int16_t(p[offsetof(BlockQ2K, scales) + s] >> 4);
    }
    d = halfAt(p + offsetof(BlockQ2K, d));
    dmin = halfAt(p + offsetof(BlockQ2K, dmin));
  } else {
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + offsetof(BlockQ3K, hmask)));
    const __m256i one = _mm256_set1_epi8(1);
    for (int n = 0; n < 2; ++n) {
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + offsetof(BlockQ3K, qs) + 32 * n));
      for (int t = 0; t < 4; ++t) {
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * n + t), one); // 0 or 1 a byte
        wv[4 * n + t] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qv, 2 * t), three), _mm256_slli_epi16(high, 2));
      }
    }
    for (int s = 0; s < 16; ++s)
      scale[s] = int16_t(q3KScale(p + offsetof(BlockQ3K, scales), s) - 32);
    d = halfAt(p + offsetof(BlockQ3K, d));
  }
  subBlocks16Group<F == BlockFormat::q3_k ? 2 : -1, F == BlockFormat::q2_k, MB>(wv, scale, min, d, dmin, x, acc);
}

/// Adds an iq lattice super-block (at p) to the MB rows of x: each group of 8 weights' lattice
/// magnitudes (1..62, unsigned bytes as they are) and sign bytes (+1 / -1) read from tables
/// (iqSubBlock, kSignMultipliers), four groups to a register, then q3_k's arithmetic
/// (subBlocks16Group): for one to three rows of x with the signs on the activation codes, for more
/// on the weights once.
template <BlockFormat F, int MB>
HELM_QTARGET inline void iqSuperBlock(const uint8_t *p, const XRows &x, PathAcc<MB> &acc) {
  int16_t scale[16];
  const int16_t none[16] = {};
  __m256i wv[8], sv[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    uint64_t magnitudes[4];
    uint32_t signs[4];
    int lo, hi;
    iqSubBlock<F>(p, j, magnitudes, signs, lo, hi);
    wv[j] = _mm256_set_epi64x(static_cast<long long>(magnitudes[3]), static_cast<long long>(magnitudes[2]),
                              static_cast<long long>(magnitudes[1]), static_cast<long long>(magnitudes[0]));
    sv[j] = _mm256_set_epi64x(static_cast<long long>(iq_detail::kSignMultipliers[signs[3]]),
                              static_cast<long long>(iq_detail::kSignMultipliers[signs[2]]),
                              static_cast<long long>(iq_detail::kSignMultipliers[signs[1]]),
                              static_cast<long long>(iq_detail::kSignMultipliers[signs[0]]));
    scale[2 * j] = int16_t(2 * lo + 1);
    scale[2 * j + 1] = int16_t(2 * hi + 1);
  }
  const float d = iqFactor<F>(halfAt(p));
  if constexpr (MB < 4) {
    subBlocks16Group<-1, false, MB>(wv, scale, none, d, 0.0f, x, acc, sv);
  } else {
    // Several rows of x (a prefill chunk, a server's batch): the signs once on the weights rather
    // than on every row's codes, the signed codes offset by 64 into unsigned bytes (1..126) and the
    // offset taken off through the per-16 sums, as q3_k's.
    const __m256i offset = _mm256_set1_epi8(64);
    for (int j = 0; j < 8; ++j)
      wv[j] = _mm256_add_epi8(_mm256_sign_epi8(wv[j], sv[j]), offset);
    subBlocks16Group<6, false, MB>(wv, scale, none, d, 0.0f, x, acc);
  }
}

template <BlockFormat F, int MB>
HELM_QTARGET void rowsT(const QuantizedX &q, int64_t m0, const uint8_t *w, int64_t n0, int64_t n1, float *y,
                        int64_t N) {
  constexpr int64_t gb = groupBytes(F);
  const XRows x0 = XRows::at(q, m0);
  // Rows of 256-weight blocks are whole groups (quantLinear checked K), so only the 32-weight
  // formats have a tail.
  const int64_t groups = q.blocks / kLanes, tail = q.blocks % kLanes, rowBytes = q.blocks * gb / kLanes;
  const uint8_t *wEnd = w + N * rowBytes;
  alignas(64) uint8_t tailBlocks[gb];
  if (tail)
    std::memset(tailBlocks, 0, sizeof tailBlocks);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t *row = w + n * rowBytes;
    PathAcc<MB> acc;
    acc.zero();
    XRows x = x0;
    for (int64_t g = 0; g < groups; ++g, x.next()) {
      const uint8_t *gp = row + g * gb;
      prefetchAhead<F>(gp);
      if constexpr (isKQuant(F))
        pathKQuantGroup<F, MB>(gp, x, acc);
      else if constexpr (isDecoded(F))
        pathDecodedGroup<F, MB>(gp, x, acc);
      else if constexpr (isLowBitKQuant(F) || isIq(F))
        pathLowBitGroup<F, MB>(gp, x, acc);
      else
        legacyGroup<F, MB>(gp, x, acc);
    }
    if constexpr (!hasSuperBlocks(F))
      if (tail) {
        const uint8_t *tp = partialGroup<F>(row + groups * gb, tail, wEnd, tailBlocks);
        if constexpr (isDecoded(F))
          pathDecodedGroup<F, MB>(tp, x, acc, int(tail));
        else
          legacyGroup<F, MB>(tp, x, acc, int(tail));
      }
    // Unrolled, so that every access to acc has a constant index (an indexed access would need
    // its registers in memory).
#pragma GCC unroll 16
    for (int m = 0; m < MB; ++m)
      y[(m0 + m) * N + n] = hsumOrder(acc.row(m));
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
  case 8: return rowsT<F, 8>(q, m0, w, n0, n1, y, N);
  default:
    // 9..15 rows: 8, then the rest (only 16 has its own instance, a server's usual batch).
    if constexpr (kPathMaxRows >= 16) {
      if (mb == 16)
        return pathRows16<F>(q, m0, w, n0, n1, y, N);
      rowsT<F, 8>(q, m0, w, n0, n1, y, N);
      return rowsF<F>(q, m0 + 8, mb - 8, w, n0, n1, y, N);
    }
    return rowsT<F, 8>(q, m0, w, n0, n1, y, N);
  }
}

/// The path's RowsFn.
void rowsVector(BlockFormat f, const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0,
                int64_t n1, float *y, int64_t N) {
  withFormat(f, [&](auto format) { rowsF<format>(q, m0, mb, w, n0, n1, y, N); });
}

} // namespace
} // namespace helm::quant::detail

#endif
