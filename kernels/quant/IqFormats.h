//===- IqFormats.h - the iq2 / iq3 lattice formats: layouts and one decoding --------===//
//
// ggml's iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s (ggml-common.h's block_iq*): super-blocks of
// 256 weights whose groups of 8 (iq2) or 4 (iq3) weights are an index into a lattice of
// magnitudes (IqGrids.h) plus 8 sign bits per 8 weights. Every one of them is, per super-block,
//   x[l] = (D * s[l / 16]) * c[l]
// with an f32 factor D (the f16 d times 1/8, 1/4 or 1), an odd integer scale s = 2 ls + 1 per 16
// weights (ls a 4-bit code; the formats with one scale per 32 repeat it) and a signed lattice
// code c (|c| <= 62). ggml's dequantizer computes the same product (d * (0.5 + ls) * 0.25 is
// (d / 8) * (2 ls + 1) bit for bit: both scale the one rounded product d * (2 ls + 1) by a power
// of two), so decodeIq below is the one decoding that the dequantizer, every CPU path and the
// tests share. The kernels' arithmetic on it is q3_k's (QuantGemvImpl.h).
//
// Portable C++: no intrinsics (the vector paths call it in their own target's code).
//===------------------------------------------------------------------------------===//
#ifndef HELM_KERNELS_QUANT_IQFORMATS_H
#define HELM_KERNELS_QUANT_IQFORMATS_H

#include "kernels/common/Numeric.h"
#include "kernels/quant/BlockFormats.h"
#include "kernels/quant/IqGrids.h"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace helm::quant {

/// 8 lattice indices of 8 weights and their signs per 32 weights: qs[2j] has the 4 index bytes of
/// sub-block j, qs[2j + 1] four 7-bit sign indices (bits 7t ..) and the 4-bit scale (bits 28 ..).
struct BlockIq2Xxs {
  uint16_t d;
  uint8_t qs[64];
};
/// 32 entries of a 9-bit lattice index and a 7-bit sign index (bits 9 ..); scales[j]: the 4-bit
/// scales of sub-block j's two halves of 16 (low nibble first).
struct BlockIq2Xs {
  uint16_t d;
  uint8_t qs[64];
  uint8_t scales[8];
};
/// 32 lattice indices of 10 bits (the low 8 in qs[i], the top 2 in qh[i / 4] bits 2 (i % 4)), 32
/// bytes of sign bits (signs[i] for weights 8i ..), scales as iq2_xs'.
struct BlockIq2S {
  uint16_t d;
  uint8_t qs[32];
  uint8_t signs[32];
  uint8_t qh[8];
  uint8_t scales[8];
};
/// 64 lattice indices of 4 weights, then per 32 weights a word of four 7-bit sign indices and the
/// 4-bit scale (bits 28 ..).
struct BlockIq3Xxs {
  uint16_t d;
  uint8_t qs[64];
  uint8_t scalesAndSigns[32];
};
/// 64 lattice indices of 9 bits (the 9th of index i in qh[i / 8] bit i % 8), sign bits as
/// iq2_s', 4-bit scales per 32 weights (scales[j / 2] nibble j % 2).
struct BlockIq3S {
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t signs[32];
  uint8_t scales[4];
};

inline constexpr uint64_t kIq2XxsGrid[256] = {HELM_IQ2XXS_GRID};
inline constexpr uint64_t kIq2XsGrid[512] = {HELM_IQ2XS_GRID};
inline constexpr uint64_t kIq2SGrid[1024] = {HELM_IQ2S_GRID};
inline constexpr uint32_t kIq3XxsGrid[256] = {HELM_IQ3XXS_GRID};
inline constexpr uint32_t kIq3SGrid[512] = {HELM_IQ3S_GRID};

/// The 8 sign bits a 7-bit sign index stands for: the index and, as bit 7, its parity (ggml's
/// ksigns_iq2xs), so that every group has an even number of negative weights.
constexpr uint8_t iqSigns(uint32_t index) { return uint8_t(index | (uint32_t(std::popcount(index & 127u)) & 1u) << 7); }

/// The formats decodeIq reads.
constexpr bool isIq(BlockFormat f) {
  return f == BlockFormat::iq2_xxs || f == BlockFormat::iq2_xs || f == BlockFormat::iq2_s ||
         f == BlockFormat::iq3_xxs || f == BlockFormat::iq3_s;
}

namespace iq_detail {
inline uint32_t load32(const uint8_t *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint32_t load16(const uint8_t *p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }

/// For each sign byte, the 8 bytes that are 0xFF where its bit is set (weight j: byte j).
inline constexpr auto kSignMasks = [] {
  std::array<uint64_t, 256> masks{};
  for (uint32_t v = 0; v < 256; ++v)
    for (int j = 0; j < 8; ++j)
      if ((v >> j) & 1)
        masks[v] |= uint64_t(0xFF) << (8 * j);
  return masks;
}();
/// For each sign byte, the 8 bytes +1 or -1 (0xFF) that multiply weight j (byte j): the vector
/// paths apply them to the activation codes.
inline constexpr auto kSignMultipliers = [] {
  std::array<uint64_t, 256> bytes{};
  for (uint32_t v = 0; v < 256; ++v)
    bytes[v] = kSignMasks[v] | 0x0101010101010101ull;
  return bytes;
}();

/// iqSigns of every 7-bit index (a load instead of a parity computation).
inline constexpr auto kSevenBitSigns = [] {
  std::array<uint8_t, 128> signs{};
  for (uint32_t i = 0; i < 128; ++i)
    signs[i] = iqSigns(i);
  return signs;
}();
} // namespace iq_detail

/// Sub-block j (0..7: weights 32j ..) of a super-block: its four groups of 8 weights' lattice
/// magnitudes (one byte each, weight 0 lowest; iq3: two 4-weight entries a group) and 8 sign bits,
/// and the 4-bit scale codes of its two halves of 16.
template <BlockFormat K>
inline void iqSubBlock(const uint8_t *blk, int j, uint64_t magnitudes[4], uint32_t signs[4], int &lo, int &hi) {
  using namespace iq_detail;
  if constexpr (K == BlockFormat::iq2_xxs) {
    const uint8_t *q = blk + offsetof(BlockIq2Xxs, qs) + 8 * j;
    const uint32_t aux = load32(q + 4);
    for (int t = 0; t < 4; ++t) {
      magnitudes[t] = kIq2XxsGrid[q[t]];
      signs[t] = kSevenBitSigns[(aux >> (7 * t)) & 127];
    }
    lo = hi = int(aux >> 28);
  } else if constexpr (K == BlockFormat::iq2_xs) {
    const uint8_t *q = blk + offsetof(BlockIq2Xs, qs) + 8 * j;
    for (int t = 0; t < 4; ++t) {
      const uint32_t e = load16(q + 2 * t);
      magnitudes[t] = kIq2XsGrid[e & 511];
      signs[t] = kSevenBitSigns[e >> 9];
    }
    const uint8_t v = blk[offsetof(BlockIq2Xs, scales) + j];
    lo = v & 0xF;
    hi = v >> 4;
  } else if constexpr (K == BlockFormat::iq2_s) {
    const uint32_t qh = blk[offsetof(BlockIq2S, qh) + j];
    for (int t = 0; t < 4; ++t) {
      magnitudes[t] = kIq2SGrid[blk[offsetof(BlockIq2S, qs) + 4 * j + t] | ((qh >> (2 * t)) & 3) << 8];
      signs[t] = blk[offsetof(BlockIq2S, signs) + 4 * j + t];
    }
    const uint8_t v = blk[offsetof(BlockIq2S, scales) + j];
    lo = v & 0xF;
    hi = v >> 4;
  } else if constexpr (K == BlockFormat::iq3_xxs) {
    const uint8_t *q = blk + offsetof(BlockIq3Xxs, qs) + 8 * j;
    const uint32_t aux = load32(blk + offsetof(BlockIq3Xxs, scalesAndSigns) + 4 * j);
    for (int t = 0; t < 4; ++t) {
      magnitudes[t] = uint64_t(kIq3XxsGrid[q[2 * t]]) | uint64_t(kIq3XxsGrid[q[2 * t + 1]]) << 32;
      signs[t] = kSevenBitSigns[(aux >> (7 * t)) & 127];
    }
    lo = hi = int(aux >> 28);
  } else {
    static_assert(K == BlockFormat::iq3_s, "an iq lattice format without a layout");
    const uint8_t *q = blk + offsetof(BlockIq3S, qs) + 8 * j;
    const uint32_t qh = blk[offsetof(BlockIq3S, qh) + j]; // the 9th bits of indices 8j ..
    for (int t = 0; t < 4; ++t) {
      magnitudes[t] = uint64_t(kIq3SGrid[q[2 * t] | ((qh >> (2 * t)) & 1) << 8]) |
                      uint64_t(kIq3SGrid[q[2 * t + 1] | ((qh >> (2 * t + 1)) & 1) << 8]) << 32;
      signs[t] = blk[offsetof(BlockIq3S, signs) + 4 * j + t];
    }
    lo = hi = (blk[offsetof(BlockIq3S, scales) + j / 2] >> (4 * (j % 2))) & 0xF;
  }
}

/// The super-block's factor D from its f16 d (as f32): d / 8 (iq2), d / 4 (iq3_xxs), d (iq3_s).
template <BlockFormat K> constexpr float iqFactor(float d) {
  return K == BlockFormat::iq3_s ? d : K == BlockFormat::iq3_xxs ? d * 0.25f : d * 0.125f;
}

/// The 8 signed codes of magnitudes m (each 1..62) under sign bits `signs`, as 8 bytes: -m is
/// (m ^ 0xFF) + 1, which never carries out of its byte for m >= 1.
inline uint64_t iqSignedCodes(uint64_t magnitudes, uint32_t signs) {
  const uint64_t mask = iq_detail::kSignMasks[signs & 0xFF];
  return (magnitudes ^ mask) + (mask & 0x0101010101010101ull);
}

/// One super-block (at blk) decoded: c[256] the signed lattice codes, s[16] the odd integer scales
/// of each 16 weights, and D; x[l] = (D * float(s[l / 16])) * float(c[l]) is the format's value.
template <BlockFormat K> inline void decodeIq(const uint8_t *blk, int8_t c[256], int16_t s[16], float &D) {
  for (int j = 0; j < 8; ++j) {
    uint64_t magnitudes[4];
    uint32_t signs[4];
    int lo, hi;
    iqSubBlock<K>(blk, j, magnitudes, signs, lo, hi);
    for (int t = 0; t < 4; ++t) {
      const uint64_t codes = iqSignedCodes(magnitudes[t], signs[t]);
      std::memcpy(c + 32 * j + 8 * t, &codes, 8);
    }
    s[2 * j] = int16_t(2 * lo + 1);
    s[2 * j + 1] = int16_t(2 * hi + 1);
  }
  D = iqFactor<K>(kernels::halfToFloat(uint16_t(iq_detail::load16(blk))));
}

} // namespace helm::quant

#endif
