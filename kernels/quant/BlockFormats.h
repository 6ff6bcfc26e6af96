//===- BlockFormats.h - GGUF / ggml block formats: layouts, quantize, dequantize --===//
//
// The reference implementation of the ggml block formats HELM reads and writes (docs/quantization.md):
// the byte layouts of ggml-common.h, a quantizer and a dequantizer per format. Portable C++, no
// LLVM or MLIR: the compile-time quantizer and the kernels' tests both use it as the definition.
//
// Exactness: q8_0, q4_0, q4_1, q5_0 and q5_1 quantize byte-for-byte like ggml's reference
// quantizers (quantize_row_*_ref). The k-quants (q2_k .. q6_k) use ggml's scale search in spirit
// but never clip a sub-block's extremes beyond one step, so their bytes may differ from ggml's;
// every format's bytes decode to the same floats with ggml's dequantizer as with dequantizeRow.
// The iq formats are read only (the table's quantizable column is 0): quantizeRow refuses them.
//===------------------------------------------------------------------------------===//
#ifndef HELM_KERNELS_QUANT_BLOCKFORMATS_H
#define HELM_KERNELS_QUANT_BLOCKFORMATS_H

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace helm::quant {

// The f16 fields are stored as host uint16_t; the files are little-endian, as is every host HELM
// runs on. A big-endian port would have to byte-swap them.
static_assert(std::endian::native == std::endian::little, "block layouts assume a little-endian host");

/// The contract's table (HELM_BLOCK_FORMATS) in its order: BlockFormat(code - HELM_DTYPE_Q8_0).
enum class BlockFormat {
  q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k,
  iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s // the lattice formats: layouts in IqFormats.h
};

/// One row of the format table.
struct BlockFormatInfo {
  BlockFormat format;
  std::string_view name;  ///< "q8_0", "q4_k", ... (lower case, as on helmc's command line)
  int ggmlType;           ///< the GGML type id written in GGUF tensor infos
  int64_t weightsPerBlock;
  int64_t bytesPerBlock;
  bool quantizable;       ///< whether quantizeRow writes it (the contract table's column)
};

/// Every format, in enum order.
std::span<const BlockFormatInfo> allBlockFormats();
const BlockFormatInfo &blockFormatInfo(BlockFormat format);
/// The format named `name` ("q8_0", ..., exact lower-case spelling), or nullopt.
std::optional<BlockFormat> parseBlockFormat(std::string_view name);

/// The format of the contract's block dtype code (HELM_DTYPE_Q8_0 ...), or nullopt for any other
/// code. A switch, not a name lookup: helm_k_linear asks on every call.
std::optional<BlockFormat> blockFormatOfDtype(int32_t helmDtype);

/// Bytes of a row of n weights, or nullopt when n is negative or not a multiple of the block size.
std::optional<int64_t> rowBytes(BlockFormat format, int64_t n);

// ---- Layouts (ggml-common.h). f16 fields hold IEEE binary16 bits; every member has alignment at
// most 2, so the structs have no padding and sizeof equals the format's bytes per block. Raw
// buffers need not be aligned: read and write blocks with memcpy.

/// 32 weights: x = qs[j] * d.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
/// 32 weights: byte j holds element j (low nibble) and element j + 16 (high nibble); x = (q - 8) * d.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
/// 32 weights, nibbles as Q4_0; x = q * d + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
/// 256 weights in 8 sub-blocks of 32, each with a 6-bit scale sc and a 6-bit min code mc packed
/// in `scales` (see unpackScaleMin); x = d * sc * q - dmin * mc with q in [0, 15]. qs holds 64
/// weights per 32 bytes: sub-block 2i in the low nibbles, 2i + 1 in the high nibbles.
struct BlockQ4K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
/// As Q4_K with 5-bit q: the low 4 bits in qs, bit 4 of sub-block s's element l in qh[l] bit s.
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
/// 256 weights in 16 sub-blocks of 16 with int8 scales; x = d * scales[s] * (q - 32), q in [0, 63]:
/// the low 4 bits in ql, the high 2 bits in qh (layout in BlockFormats.cpp, packQ6K).
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

/// 32 weights: byte j holds the low 4 bits of element j (low nibble) and j + 16 (high nibble), bit
/// i of the little-endian qh word the fifth bit of element i; x = (q - 16) * d.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
/// 32 weights, codes as Q5_0; x = q * d + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
/// 32 weights, nibbles as Q4_0; x = d * kIq4Values[nibble].
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
/// 256 weights in 8 sub-blocks of 32 with 6-bit scales ls (the low 4 bits in scalesLow[j / 2]'s
/// nibble j % 2, the high 2 bits in scalesHigh's bits 2j, 2j + 1); x = d * (ls - 32) *
/// kIq4Values[nibble], sub-block j's nibbles in qs[16 j .. 16 j + 15] as Q4_0's.
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scalesHigh;
  uint8_t scalesLow[4];
  uint8_t qs[128];
};

/// 256 weights in 16 sub-blocks of 16; scales[s] holds sub-block s's 4-bit scale (low nibble) and
/// 4-bit min (high); x = d * sc * q - dmin * m with q in [0, 3]. Sub-block s = 8n + 2t + h (n: half
/// of 128 weights, t: 0..3, h: 0..1) takes bits 2t, 2t + 1 of qs[32n + 16h + l], l < 16.
struct BlockQ2K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
/// 256 weights in 16 sub-blocks of 16 with 6-bit scales (q3KScale); x = d * (sc - 32) * q with
/// q = (2 low bits as Q2_K's) - (hmask[16h + l] bit 4n + t ? 0 : 4), in [-4, 3].
struct BlockQ3K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};

/// Q3_K sub-block s's 6-bit scale code (the scale is the code - 32): its low 4 bits are nibble
/// s / 8 of scales[s % 8], its top 2 bits bits 2 (s / 4), + 1 of scales[8 + s % 4].
inline int q3KScale(const uint8_t scales[12], int s) {
  return ((scales[s % 8] >> (4 * (s / 8))) & 0xF) | (((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
}

/// The 16 values an iq4 nibble stands for (ggml's kvalues_iq4nl): a non-linear grid, denser near 0.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/// iq4_xs sub-block j's 6-bit scale code ls (the scale is ls - 32).
inline int iq4XsScale(const uint8_t *block, int j) {
  const uint16_t high = uint16_t(block[2] | (block[3] << 8));
  return ((block[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((high >> (2 * j)) & 3) << 4);
}

/// Q4_K / Q5_K sub-block `j`'s 6-bit scale and min codes from the 12 packed bytes (ggml's
/// get_scale_min_k4): sub-blocks 0-3 keep both codes in the low 6 bits of bytes j and j + 4;
/// sub-blocks 4-7 keep their low 4 bits in byte j + 4 and their top 2 bits in the top bits of
/// bytes j - 4 (scale) and j (min).
/// Inline: the k-quant kernels call it per sub-block.
inline void unpackScaleMin(const uint8_t packed[12], int j, uint8_t &scale, uint8_t &min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = uint8_t((packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4));
    min = uint8_t((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

/// The result of a row operation: ok(), or a one-line reason in `error`.
struct [[nodiscard]] QuantStatus {
  std::string error;
  bool ok() const { return error.empty(); }
};

/// Quantizes n floats (n a multiple of the block size) into rowBytes(format, n) bytes at dst.
/// Fails, leaving dst unspecified, on a bad n, a non-finite input, or a block whose scale does
/// not fit f16 (values too large for the format to represent).
QuantStatus quantizeRow(BlockFormat format, const float *src, int64_t n, uint8_t *dst);
/// Decodes rowBytes(format, n) bytes into n floats. Fails only on a bad n.
QuantStatus dequantizeRow(BlockFormat format, const uint8_t *src, int64_t n, float *dst);

} // namespace helm::quant

#endif
