//===- QuantGemvImpl.h - internals shared by the quantized GEMV paths -------------===//
//
// Included by QuantGemv.cpp (dispatch, threads, the scalar reference) and QuantGemvAvx2.cpp /
// QuantGemvAvx512.cpp (the vector paths, each compiled with its own target attribute). Only plain
// declarations and baseline inline helpers live here: no vector code is shared between files.
//
// The arithmetic every path implements (docs/quantization.md, "Kernels"):
//   activations, per row m and block b of 32 values, exactly as llama.cpp's q8_0 / q8_1 blocks
//     (ggml-cpu's quantize_row_q8_0 / q8_1 on x86): amax = largest |x| (compared as the integer
//     bits of |x|, so NaN and infinities are caught); a non-finite block gets d = NaN, codes 0 and
//     scaledSum NaN; otherwise d = amax / 127 and id = 127 / amax (f32), codes
//     c = nearbyint(clamp(x * id, -127, 127)) (0 if amax == 0, or so small that id overflows),
//     sum = sum of the codes; the block keeps scale = f16(d) and scaledSum = f16(d * float(sum))
//     (each rounded to f16, nearest even, and back: ggml stores both as f16).
//   weights, per block: isum = sum_j c_j * q_j exactly in int32 (q: q8_0 the int8 code, q4_0 the
//     nibble - 8, q4_1 the nibble); term = float(isum) * (dw * d), plus for q4_1 a second term
//     mw * scaledSum. Block b is added to lane b % 8 of eight f32 partial sums (q4_1: the first term,
//     then the second), in block order; y = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
//   k-quants (K a multiple of 256): a super-block of 256 weights covers activation blocks 8s..8s+7,
//     so its sub-blocks of 32 fall on lanes 0..7 in order. q4_k / q5_k, sub-block j with 6-bit
//     scale and min codes sc, mc: isum = sum c * q exactly (q in 0..15 / 0..31);
//     dsc = d * float(sc), dmn = dmin * float(mc); lane = lane + float(isum) * (dsc * dx), then
//     lane = lane - dmn * (dx * float(sum)) (the exact code sum, not the f16 scaledSum: the min term
//     nearly cancels the first, so rounding it to f16 would be most of the error). q6_k, activation block j over sub-blocks 2j, 2j + 1 (16 weights
//     each, int8 scales): isum = sc[2j] * sum (q - 32) c + sc[2j+1] * sum (q - 32) c exactly;
//     lane = lane + float(isum) * (d * dx).
//   q2_k, q3_k (sub-blocks of 16, as q6_k: activation block j spans sub-blocks 2j, 2j + 1):
//     q3_k (6-bit scale codes, sc = code - 32; q in -4..3): isum = sc[2j] * sum q c (first 16) +
//     sc[2j+1] * sum q c (second 16) exactly; lane = lane + float(isum) * (d * dx). q2_k (4-bit
//     scales sc and mins mn; q in 0..3): isum as q3_k's, msum = mn[2j] * (sum of the first 16
//     codes) + mn[2j+1] * (sum of the second 16) exactly; lane = lane + float(isum) * (d * dx),
//     then lane = lane - float(msum) * (dmin * dx) (llama.cpp's q2_K uses q8_K's per-16 sums the
//     same way).
//   iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s (the lattice formats, decoded per super-block to signed
//     codes c, odd integer scales s per 16 weights and one f32 factor D: IqFormats.h): q3_k's
//     arithmetic with those, isum = s[2j] * sum c x (first 16) + s[2j+1] * sum c x (second 16)
//     exactly; lane = lane + float(isum) * (D * dx).
//   q5_0, q5_1, iq4_nl, iq4_xs (the "decoded" formats: every path decodes a group of 256 weights to
//     int8 codes and one f32 scale, and for q5_1 one f32 min, per block of 32, then runs one
//     kernel for all of them): q5_0's code is q - 16, q5_1's q (0..31), iq4's kIq4Values[nibble];
//     the scale is the block's d (iq4_xs: d * float(ls - 32)), q5_1's min its m. Per block as the
//     32-weight formats above: isum = sum c * code exactly; lane = lane + float(isum) * (dw * dx),
//     then for q5_1 lane = lane + mw * scaledSum.
// Every f32 operation is a single IEEE operation (no FMA: the library is built with
// -ffp-contract=off), so any implementation of this order gives the same bits.
//
//===------------------------------------------------------------------------------===//
#ifndef HELM_KERNELS_QUANT_QUANTGEMVIMPL_H
#define HELM_KERNELS_QUANT_QUANTGEMVIMPL_H

#include "kernels/quant/BlockFormats.h"
#include "kernels/quant/IqFormats.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace helm::quant::detail {

constexpr int64_t kBlock = 32;     ///< values per block (activations and every supported format)
constexpr int64_t kLanes = 8;      ///< f32 partial sums per output: block b goes to lane b % 8
constexpr int64_t kMaxRowsOfX = 8; ///< rows of x one kernel call of the scalar and AVX2 paths handles
constexpr int64_t kMaxRowsOfXWide = 16; ///< ... and of the AVX-512 path (two rows per register)

/// How far ahead of the group being read the vector paths prefetch the weight row (one sequential
/// stream per thread). Measured from DRAM on one thread: on Zen 4, q4_0 12 -> 16-18 GB/s with 4 KiB,
/// flat from 4 to 8 KiB; on Zen 5, 8 KiB over 4 KiB gave q4_k 30 -> 33 GB/s and q6_k 33 -> 36
/// (Qwen3-0.6B-shaped Q4_K_M decode +9% on one thread, two threads unchanged), 16 KiB no more.
/// Prefetches past the end of W are harmless: they never fault.
constexpr int64_t kPrefetchBytes = 8192;

/// The k-quants with kernels of their own: 256-weight super-blocks, one per group of 8 activation
/// blocks.
constexpr bool isKQuant(BlockFormat f) {
  return f == BlockFormat::q4_k || f == BlockFormat::q5_k || f == BlockFormat::q6_k;
}
/// The formats every path runs through one kernel on decoded groups (the arithmetic above).
constexpr bool isDecoded(BlockFormat f) {
  return f == BlockFormat::q5_0 || f == BlockFormat::q5_1 || f == BlockFormat::iq4_nl || f == BlockFormat::iq4_xs;
}
/// The k-quants of sub-blocks of 16 whose codes fit 3 bits: one kernel for both on every path.
constexpr bool isLowBitKQuant(BlockFormat f) { return f == BlockFormat::q2_k || f == BlockFormat::q3_k; }
/// Formats of 256-weight blocks: a row is whole groups, never a partial last one.
constexpr bool hasSuperBlocks(BlockFormat f) {
  return isKQuant(f) || isLowBitKQuant(f) || isIq(f) || f == BlockFormat::iq4_xs;
}

/// Bytes per weight block of the 32-weight formats, from the layouts.
constexpr int64_t blockBytes(BlockFormat f) {
  switch (f) {
  case BlockFormat::q8_0: return sizeof(BlockQ8_0);
  case BlockFormat::q4_0: return sizeof(BlockQ4_0);
  case BlockFormat::q4_1: return sizeof(BlockQ4_1);
  case BlockFormat::q5_0: return sizeof(BlockQ5_0);
  case BlockFormat::q5_1: return sizeof(BlockQ5_1);
  case BlockFormat::iq4_nl: return sizeof(BlockIq4Nl);
  default: return 0; // 256-weight formats: groupBytes
  }
}

/// Bytes of the weights one group of 8 activation blocks (256 weights) reads, in every format.
constexpr int64_t groupBytes(BlockFormat f) {
  switch (f) {
  case BlockFormat::q4_k: return sizeof(BlockQ4K);
  case BlockFormat::q5_k: return sizeof(BlockQ5K);
  case BlockFormat::q6_k: return sizeof(BlockQ6K);
  case BlockFormat::iq4_xs: return sizeof(BlockIq4Xs);
  case BlockFormat::q2_k: return sizeof(BlockQ2K);
  case BlockFormat::q3_k: return sizeof(BlockQ3K);
  case BlockFormat::iq2_xxs: return sizeof(BlockIq2Xxs);
  case BlockFormat::iq2_xs: return sizeof(BlockIq2Xs);
  case BlockFormat::iq2_s: return sizeof(BlockIq2S);
  case BlockFormat::iq3_xxs: return sizeof(BlockIq3Xxs);
  case BlockFormat::iq3_s: return sizeof(BlockIq3S);
  default: return 8 * blockBytes(f);
  }
}

/// Calls fn(std::integral_constant<BlockFormat, F>{}) for the runtime format f: one switch for
/// every per-format template dispatch of the paths (a format missing here is a -Wswitch error).
template <class Fn> inline void withFormat(BlockFormat f, Fn &&fn) {
  switch (f) {
  case BlockFormat::q8_0: return fn(std::integral_constant<BlockFormat, BlockFormat::q8_0>{});
  case BlockFormat::q4_0: return fn(std::integral_constant<BlockFormat, BlockFormat::q4_0>{});
  case BlockFormat::q4_1: return fn(std::integral_constant<BlockFormat, BlockFormat::q4_1>{});
  case BlockFormat::q4_k: return fn(std::integral_constant<BlockFormat, BlockFormat::q4_k>{});
  case BlockFormat::q5_k: return fn(std::integral_constant<BlockFormat, BlockFormat::q5_k>{});
  case BlockFormat::q6_k: return fn(std::integral_constant<BlockFormat, BlockFormat::q6_k>{});
  case BlockFormat::q5_0: return fn(std::integral_constant<BlockFormat, BlockFormat::q5_0>{});
  case BlockFormat::q5_1: return fn(std::integral_constant<BlockFormat, BlockFormat::q5_1>{});
  case BlockFormat::iq4_nl: return fn(std::integral_constant<BlockFormat, BlockFormat::iq4_nl>{});
  case BlockFormat::iq4_xs: return fn(std::integral_constant<BlockFormat, BlockFormat::iq4_xs>{});
  case BlockFormat::q2_k: return fn(std::integral_constant<BlockFormat, BlockFormat::q2_k>{});
  case BlockFormat::q3_k: return fn(std::integral_constant<BlockFormat, BlockFormat::q3_k>{});
  case BlockFormat::iq2_xxs: return fn(std::integral_constant<BlockFormat, BlockFormat::iq2_xxs>{});
  case BlockFormat::iq2_xs: return fn(std::integral_constant<BlockFormat, BlockFormat::iq2_xs>{});
  case BlockFormat::iq2_s: return fn(std::integral_constant<BlockFormat, BlockFormat::iq2_s>{});
  case BlockFormat::iq3_xxs: return fn(std::integral_constant<BlockFormat, BlockFormat::iq3_xxs>{});
  case BlockFormat::iq3_s: return fn(std::integral_constant<BlockFormat, BlockFormat::iq3_s>{});
  }
}

/// Byte offsets inside the k-quant super-blocks, from the layouts (BlockFormats.h). The kernels
/// read raw bytes, never the structs; q4_k and q5_k keep d at 0 and dmin at 2, q6_k's ql is at 0.
constexpr int kScalesOffset = offsetof(BlockQ4K, scales); ///< q4_k / q5_k: 12 packed scale / min bytes
static_assert(offsetof(BlockQ5K, scales) == kScalesOffset && offsetof(BlockQ4K, dmin) == 2 &&
              offsetof(BlockQ5K, dmin) == 2 && offsetof(BlockQ6K, ql) == 0);
constexpr int kQ4KQsOffset = offsetof(BlockQ4K, qs); ///< q4_k: 128 bytes of nibbles
constexpr int kQ5KQhOffset = offsetof(BlockQ5K, qh); ///< q5_k: 32 bytes of fifth bits
constexpr int kQ5KQsOffset = offsetof(BlockQ5K, qs); ///< q5_k: 128 bytes of nibbles
constexpr int kQ6KQhOffset = offsetof(BlockQ6K, qh); ///< q6_k: 64 bytes of top-two bits
constexpr int kQ6KScOffset = offsetof(BlockQ6K, scales); ///< q6_k: 16 int8 scales
constexpr int kQ6KDOffset = offsetof(BlockQ6K, d);       ///< q6_k: d

/// x quantized once per call. Blocks are padded to a multiple of kLanes with zero codes, zero
/// scales and zero sums, so that a kernel may always work on whole groups of 8 blocks.
/// `v` rounded to f16 (nearest even) and back: the activation block's stored d and d * sum.
float roundToHalf(float v);

/// Every per-block array is group-major: [paddedBlocks / 8 groups][M rows][8 blocks], so that the
/// rows of x one kernel call reads for a group of weights lie at constant offsets from one pointer
/// per array (16 rows: 4 KiB of codes), and a call steps one pointer per array from group to group.
/// For M = 1 (decode) this is the plain row. blockIndex gives the position of row m's block b.
struct QuantizedX {
  int64_t M = 0, blocks = 0, paddedBlocks = 0;
  /// Whether the AVX-512 path stores the rows of its 16-row calls in quads (see quadRow there):
  /// on a path that takes 16 rows a call (every format has a 16-row kernel there).
  bool quads = false;
  /// [groups][M][8 * 32], 32 codes per block at 32 * blockIndex. The scalar and AVX2 paths keep
  /// each block's 32 codes in order; the AVX-512 path stores each group of 4 blocks as the 4 first
  /// halves then the 4 second halves (16 codes each), the order its weight registers hold them in.
  /// The values are the same.
  int8_t *codes = nullptr;
  float *scale = nullptr;     ///< [groups][M][8]: f16(d)
  int32_t *sum = nullptr;     ///< [groups][M][8]: the sum of the block's codes
  float *scaledSum = nullptr; ///< [groups][M][8]: f16(d * float(sum)), d before its rounding
  /// [groups][M][8 * 2]: the sums of each block's first and of its second 16 codes (q6_k's
  /// 16-weight sub-blocks): the vector paths' q6_k kernels subtract its offset of 32 with them,
  /// once per block instead of a product per code. Filled by the vector quantizers only (the
  /// scalar reference subtracts the 32 from each code).
  int16_t *halfSum = nullptr;
  /// Row m's block b in the per-block arrays (times 32 in codes, times 2 in halfSum).
  int64_t blockIndex(int64_t m, int64_t b) const { return ((b / kLanes) * M + m) * kLanes + b % kLanes; }
};

/// Fills rows [m0, m1) of q (whose sizes and buffers the caller set) from x [M, K]; rows are
/// independent, so threads may fill disjoint ranges.
using QuantizeXFn = void (*)(const float *x, const QuantizedX &q, int64_t m0, int64_t m1);
/// y[(m0 + m) * N + n] for m < mb (<= the path's maxRows) and n in [n0, n1); w holds N rows of
/// q.blocks blocks.
using RowsFn = void (*)(BlockFormat f, const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0,
                        int64_t n1, float *y, int64_t N);

struct QuantKernels {
  QuantizeXFn quantizeX;
  RowsFn rows;
  /// The most rows of x one rows call takes: each super-block's weights are unpacked once for
  /// all of them. Which rows share a call changes no bits (each output is one call's).
  int64_t maxRows;
};

const QuantKernels &quantKernelsScalar();
const QuantKernels &quantKernelsAvx2();       // only where quantPathSupported(avx2)
const QuantKernels &quantKernelsAvx512Vnni(); // only where quantPathSupported(avx512vnni)

} // namespace helm::quant::detail

#endif
