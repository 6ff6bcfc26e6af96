//===- QuantGemvScalar.cpp - the quantized GEMV's scalar reference -----------------===//
//
// The definition of the arithmetic every path computes (QuantGemvImpl.h): x quantized per block of
// 32, integer dot products per block, f32 accumulation in a fixed order.
//
//===------------------------------------------------------------------------------===//
#include "kernels/common/Numeric.h"
#include "kernels/quant/QuantGemvImpl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace helm::quant {

using namespace detail;

float detail::roundToHalf(float v) { return kernels::halfToFloat(kernels::floatToHalf(v)); }

namespace {

// ---- the scalar reference ----------------------------------------------------------------------

void quantizeBlockScalar(const float *xb, int8_t *codes, float &scale, int32_t &sum, float &scaledSum) {
  uint32_t amaxBits = 0;
  for (int j = 0; j < kBlock; ++j) {
    uint32_t bits;
    std::memcpy(&bits, &xb[j], sizeof bits);
    amaxBits = std::max(amaxBits, bits & 0x7fffffffu);
  }
  sum = 0;
  if (amaxBits >= 0x7f800000u) { // an infinity or NaN: the whole row of y becomes NaN
    scale = scaledSum = std::numeric_limits<float>::quiet_NaN();
    std::memset(codes, 0, kBlock);
    return;
  }
  float amax;
  std::memcpy(&amax, &amaxBits, sizeof amax);
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f; // amax 0: id 0, codes 0
  const bool coded = id <= std::numeric_limits<float>::max(); // a subnormal amax: 127 / amax overflows
  for (int j = 0; j < kBlock; ++j) {
    int c = 0;
    if (coded) {
      // |x * id| exceeds 127 only by rounding: clamp.
      const float v = std::min(std::max(xb[j] * id, -127.0f), 127.0f);
      c = int(std::nearbyint(v)); // the current rounding mode (nearest even), as cvtps2dq
    }
    codes[j] = int8_t(c);
    sum += c;
  }
  scale = roundToHalf(d);
  scaledSum = roundToHalf(d * float(sum));
}

void quantizeXScalar(const float *x, const QuantizedX &q, int64_t m0, int64_t m1) {
  const int64_t K = q.blocks * kBlock;
  for (int64_t m = m0; m < m1; ++m)
    for (int64_t b = 0; b < q.blocks; ++b) {
      const int64_t i = q.blockIndex(m, b);
      quantizeBlockScalar(x + m * K + b * kBlock, q.codes + i * kBlock, q.scale[i], q.sum[i], q.scaledSum[i]);
    }
}

float halfAt(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return kernels::halfToFloat(h);
}

/// The exact integer dot product of one weight block with 32 activation codes.
template <BlockFormat F> int32_t blockDot(const uint8_t *blk, const int8_t *c) {
  int32_t isum = 0;
  if constexpr (F == BlockFormat::q8_0) {
    for (int j = 0; j < 32; ++j)
      isum += int32_t(int8_t(blk[2 + j])) * c[j];
  } else {
    const int offset = F == BlockFormat::q4_0 ? 8 : 0;
    const uint8_t *qs = blk + (F == BlockFormat::q4_0 ? 2 : 4);
    for (int j = 0; j < 16; ++j) {
      isum += (int32_t(qs[j] & 0xF) - offset) * c[j];
      isum += (int32_t(qs[j] >> 4) - offset) * c[j + 16];
    }
  }
  return isum;
}

template <BlockFormat F>
void rowsScalarT(const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1, float *y,
                 int64_t N) {
  const int64_t bs = blockBytes(F);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t *row = w + n * q.blocks * bs;
    for (int64_t m = m0; m < m0 + mb; ++m) {
      float lanes[kLanes] = {};
      for (int64_t b = 0; b < q.blocks; ++b) {
        const int64_t i = q.blockIndex(m, b);
        const uint8_t *blk = row + b * bs;
        const float s = halfAt(blk) * q.scale[i];
        const float term = float(blockDot<F>(blk, q.codes + i * kBlock)) * s;
        float &lane = lanes[b % kLanes];
        lane = lane + term;
        if constexpr (F == BlockFormat::q4_1)
          lane = lane + halfAt(blk + 2) * q.scaledSum[i];
      }
      y[m * N + n] = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    }
  }
}

/// One k-quant or iq super-block decoded: the 256 weight codes as the integer dot product uses them
/// (q4_k / q5_k / q2_k: q; q6_k: q - 32; q3_k: q in -4..3; iq: the signed lattice codes), the
/// sub-block scales (q3_k: code - 32; iq: 2 ls + 1, d their D), and for q4_k / q5_k / q2_k the min
/// codes.
struct SuperBlock {
  int8_t q[256];
  int32_t scale[16];
  int32_t min[16];
  float d, dmin;
};

/// Sub-blocks of 16 weights (q6_k, q2_k, q3_k, the iq lattice formats) rather than 32.
constexpr bool hasSubBlocksOf16(BlockFormat f) { return f == BlockFormat::q6_k || isLowBitKQuant(f) || isIq(f); }

template <BlockFormat F> void decodeSuperBlock(const uint8_t *blk, SuperBlock &sb) {
  if constexpr (isIq(F)) {
    int16_t scale[16];
    decodeIq<F>(blk, sb.q, scale, sb.d);
    for (int s = 0; s < 16; ++s)
      sb.scale[s] = scale[s];
    sb.dmin = 0.0f;
  } else if constexpr (isLowBitKQuant(F)) {
    // Sub-block s = 8n + 2t + h: bits 2t of qs[32n + 16h + l] (q3_k: hmask[16h + l] bit 4n + t).
    const uint8_t *qs = blk + (F == BlockFormat::q2_k ? offsetof(BlockQ2K, qs) : offsetof(BlockQ3K, qs));
    for (int s = 0; s < 16; ++s) {
      const int n = s / 8, t = s % 8 / 2, h = s % 2;
      for (int l = 0; l < 16; ++l) {
        int q = (qs[32 * n + 16 * h + l] >> (2 * t)) & 3;
        if constexpr (F == BlockFormat::q3_k)
          q -= (blk[offsetof(BlockQ3K, hmask) + 16 * h + l] >> (4 * n + t)) & 1 ? 0 : 4;
        sb.q[16 * s + l] = int8_t(q);
      }
      if constexpr (F == BlockFormat::q2_k) {
        sb.scale[s] = blk[offsetof(BlockQ2K, scales) + s] & 0xF;
        sb.min[s] = blk[offsetof(BlockQ2K, scales) + s] >> 4;
      } else {
        sb.scale[s] = q3KScale(blk + offsetof(BlockQ3K, scales), s) - 32;
      }
    }
    if constexpr (F == BlockFormat::q2_k) {
      sb.d = halfAt(blk + offsetof(BlockQ2K, d));
      sb.dmin = halfAt(blk + offsetof(BlockQ2K, dmin));
    } else {
      sb.d = halfAt(blk + offsetof(BlockQ3K, d));
      sb.dmin = 0.0f;
    }
  } else if constexpr (F == BlockFormat::q6_k) {
    const uint8_t *ql = blk, *qh = blk + kQ6KQhOffset;
    for (int half = 0; half < 2; ++half)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo0 = ql[64 * half + l], lo1 = ql[64 * half + 32 + l], hi = qh[32 * half + l];
        int8_t *q = sb.q + 128 * half + l;
        q[0] = int8_t(((lo0 & 0xF) | ((hi & 3) << 4)) - 32);
        q[32] = int8_t(((lo1 & 0xF) | (((hi >> 2) & 3) << 4)) - 32);
        q[64] = int8_t(((lo0 >> 4) | (((hi >> 4) & 3) << 4)) - 32);
        q[96] = int8_t(((lo1 >> 4) | (((hi >> 6) & 3) << 4)) - 32);
      }
    for (int j = 0; j < 16; ++j)
      sb.scale[j] = int8_t(blk[kQ6KScOffset + j]);
    sb.d = halfAt(blk + kQ6KDOffset);
    sb.dmin = 0.0f;
  } else {
    const uint8_t *qs = blk + (F == BlockFormat::q4_k ? kQ4KQsOffset : kQ5KQsOffset);
    for (int pair = 0; pair < 4; ++pair)
      for (int l = 0; l < 32; ++l) {
        sb.q[64 * pair + l] = int8_t(qs[32 * pair + l] & 0xF);
        sb.q[64 * pair + 32 + l] = int8_t(qs[32 * pair + l] >> 4);
      }
    if constexpr (F == BlockFormat::q5_k)
      for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l)
          sb.q[32 * j + l] = int8_t(sb.q[32 * j + l] | (((blk[kQ5KQhOffset + l] >> j) & 1) << 4));
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mc;
      unpackScaleMin(blk + kScalesOffset, j, sc, mc);
      sb.scale[j] = sc;
      sb.min[j] = mc;
    }
    sb.d = halfAt(blk);
    sb.dmin = halfAt(blk + 2);
  }
}

template <BlockFormat F>
void kRowsScalarT(const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1, float *y,
                  int64_t N) {
  const int64_t supers = q.blocks / kLanes, gb = groupBytes(F);
  SuperBlock sb;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t *row = w + n * supers * gb;
    float lanes[kMaxRowsOfX][kLanes] = {};
    for (int64_t s = 0; s < supers; ++s) {
      decodeSuperBlock<F>(row + s * gb, sb);
      for (int64_t m = 0; m < mb; ++m) {
        const int64_t first = q.blockIndex(m0 + m, s * kLanes); // the super-block's 8 blocks follow
        for (int j = 0; j < kLanes; ++j) {
          const int8_t *c = q.codes + (first + j) * kBlock;
          const int8_t *qv = sb.q + 32 * j;
          float &lane = lanes[m][j];
          if constexpr (hasSubBlocksOf16(F)) {
            int32_t lo = 0, hi = 0, loCodes = 0, hiCodes = 0;
            for (int l = 0; l < 16; ++l) {
              lo += int32_t(qv[l]) * c[l];
              hi += int32_t(qv[16 + l]) * c[16 + l];
              loCodes += c[l];
              hiCodes += c[16 + l];
            }
            const int32_t isum = sb.scale[2 * j] * lo + sb.scale[2 * j + 1] * hi;
            lane = lane + float(isum) * (sb.d * q.scale[first + j]);
            if constexpr (F == BlockFormat::q2_k) {
              const int32_t msum = sb.min[2 * j] * loCodes + sb.min[2 * j + 1] * hiCodes;
              lane = lane - float(msum) * (sb.dmin * q.scale[first + j]);
            }
          } else {
            int32_t isum = 0;
            for (int l = 0; l < 32; ++l)
              isum += int32_t(qv[l]) * c[l];
            const float dsc = sb.d * float(sb.scale[j]), dmn = sb.dmin * float(sb.min[j]);
            lane = lane + float(isum) * (dsc * q.scale[first + j]);
            // The min term from the exact code sum (not the f16 scaledSum): it nearly cancels the
            // first, so an f16 rounding of it would be most of the error.
            lane = lane - dmn * (q.scale[first + j] * float(q.sum[first + j]));
          }
        }
      }
    }
    for (int64_t m = 0; m < mb; ++m) {
      const float *l = lanes[m];
      y[(m0 + m) * N + n] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    }
  }
}

/// A decoded format's group of 8 blocks (QuantGemvImpl.h's arithmetic): the 256 codes in block order, the
/// blocks' scales and (q5_1) mins. `valid` < 8 for a row's partial last group: the other blocks'
/// scales and mins are 0. (The vector paths decode in registers instead: QuantRowsImpl.h.)
template <BlockFormat F> inline void decodedScales(const uint8_t *p, int valid, float dw[8], float mw[8]) {
  for (int j = 0; j < 8; ++j) {
    dw[j] = mw[j] = 0.0f;
    if (j >= valid)
      continue;
    if constexpr (F == BlockFormat::iq4_xs) {
      dw[j] = kernels::halfToFloat(uint16_t(p[0] | (p[1] << 8))) * float(iq4XsScale(p, j) - 32);
    } else {
      const uint8_t *b = p + j * blockBytes(F);
      dw[j] = kernels::halfToFloat(uint16_t(b[0] | (b[1] << 8)));
      if constexpr (F == BlockFormat::q5_1)
        mw[j] = kernels::halfToFloat(uint16_t(b[2] | (b[3] << 8)));
    }
  }
}
template <BlockFormat F> inline void decodedCodes(const uint8_t *p, int valid, int8_t codes[256]) {
  for (int j = 0; j < 8; ++j) {
    int8_t *c = codes + 32 * j;
    if (j >= valid) {
      for (int l = 0; l < 32; ++l)
        c[l] = 0;
      continue;
    }
    if constexpr (F == BlockFormat::iq4_xs || F == BlockFormat::iq4_nl) {
      const uint8_t *qs = F == BlockFormat::iq4_xs ? p + offsetof(BlockIq4Xs, qs) + 16 * j
                                                   : p + j * blockBytes(F) + offsetof(BlockIq4Nl, qs);
      for (int l = 0; l < 16; ++l) {
        c[l] = kIq4Values[qs[l] & 0xF];
        c[l + 16] = kIq4Values[qs[l] >> 4];
      }
    } else {
      using Block = std::conditional_t<F == BlockFormat::q5_0, BlockQ5_0, BlockQ5_1>;
      const uint8_t *b = p + j * blockBytes(F), *qs = b + offsetof(Block, qs);
      const uint32_t high = uint32_t(b[offsetof(Block, qh)]) | uint32_t(b[offsetof(Block, qh) + 1]) << 8 |
                            uint32_t(b[offsetof(Block, qh) + 2]) << 16 | uint32_t(b[offsetof(Block, qh) + 3]) << 24;
      for (int l = 0; l < 32; ++l) {
        const int low = l < 16 ? qs[l] & 0xF : qs[l - 16] >> 4;
        const int q = low | int(((high >> l) & 1) << 4);
        c[l] = int8_t(F == BlockFormat::q5_0 ? q - 16 : q);
      }
    }
  }
}

/// The decoded formats (q5_0, q5_1, iq4_nl, iq4_xs): each group of 8 blocks decoded once for the
/// mb rows of x, then the 32-weight arithmetic per block.
template <BlockFormat F>
void decodedRowsScalarT(const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1,
                        float *y, int64_t N) {
  constexpr int64_t gb = groupBytes(F);
  const int64_t groups = q.blocks / kLanes, tail = q.blocks % kLanes, rowBytes = q.blocks * gb / kLanes;
  int8_t codes[256];
  float dw[8], mw[8];
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t *row = w + n * rowBytes;
    float lanes[kMaxRowsOfX][kLanes] = {};
    for (int64_t g = 0; g < groups + (tail ? 1 : 0); ++g) {
      const int valid = g < groups ? int(kLanes) : int(tail);
      decodedCodes<F>(row + g * gb, valid, codes);
      decodedScales<F>(row + g * gb, valid, dw, mw);
      for (int64_t m = 0; m < mb; ++m)
        for (int j = 0; j < valid; ++j) {
          const int64_t i = q.blockIndex(m0 + m, g * kLanes + j);
          const int8_t *c = q.codes + i * kBlock;
          int32_t isum = 0;
          for (int l = 0; l < 32; ++l)
            isum += int32_t(codes[32 * j + l]) * c[l];
          float &lane = lanes[m][j];
          lane = lane + float(isum) * (dw[j] * q.scale[i]);
          if constexpr (F == BlockFormat::q5_1)
            lane = lane + mw[j] * q.scaledSum[i];
        }
    }
    for (int64_t m = 0; m < mb; ++m) {
      const float *l = lanes[m];
      y[(m0 + m) * N + n] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    }
  }
}

void rowsScalar(BlockFormat f, const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1,
                float *y, int64_t N) {
  withFormat(f, [&](auto format) {
    if constexpr (isKQuant(format) || isLowBitKQuant(format) || isIq(format))
      kRowsScalarT<format>(q, m0, mb, w, n0, n1, y, N);
    else if constexpr (isDecoded(format))
      decodedRowsScalarT<format>(q, m0, mb, w, n0, n1, y, N);
    else
      rowsScalarT<format>(q, m0, mb, w, n0, n1, y, N);
  });
}

} // namespace

namespace detail {
const QuantKernels &quantKernelsScalar() {
  static const QuantKernels k{&quantizeXScalar, &rowsScalar, kMaxRowsOfX};
  return k;
}
} // namespace detail

} // namespace helm::quant
