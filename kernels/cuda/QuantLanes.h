//===- QuantLanes.h - one lane's share of a q4_k super-block, for the GPU and the host ----===//
//
// helm_cuda_qgemv_q4k (QuantBlocks.cu) gives each super-block of a q4_k row (BlockQ4K, 144
// bytes, 256 weights) to 8 lanes of a warp. Lane part p (0..7) loads the block's 16 header bytes
// (d, dmin, the 12 packed scale bytes) and the 16 code bytes at q4kLaneCodeOffset(p) as two
// 16-byte words, and decodes 32 weights from them: the low nibbles are 16 consecutive weights of
// sub-block 2 (p / 2), the high nibbles the 16 at the same place in sub-block 2 (p / 2) + 1
// (q4kLaneFirstWeight).
//
// The same code compiles as CUDA device code and as plain host C++, so the host's unit test
// (test/unit/kernels/quant/QuantLanesTest.cpp) checks the lanes' weights against
// quant::dequantizeRow bit for bit and the parts' placement against the super-block. That holds
// because every f32 step is dequantizeRow's, in its order, and none is fused: the device uses
// __fmul_rn / __fsub_rn (never contracted), the host test is compiled with -ffp-contract=off.
// (Today's products are exact, d * sc * q having at most 11 + 6 + 4 significant bits, so a fused
// multiply-subtract would round the same and the test could not tell; the rule keeps the lanes
// exact where a product rounds, as in the other formats.)
// Words are little-endian, as a 16-byte load gives them on the GPU and memcpy on the host; bytes
// are taken out of them with shifts, never by indexing an array with a lane-dependent index
// (which would put the array in local memory on the GPU).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CUDA_QUANTLANES_H
#define HELM_KERNELS_CUDA_QUANTLANES_H

#include "kernels/quant/BlockFormats.h"

#include <cstddef>
#include <stdint.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define HELM_LANE __host__ __device__ __forceinline__
#else
#include "kernels/common/Numeric.h"

#include <bit>
#define HELM_LANE inline
#endif

namespace helm_cuda {

/// Lanes that share a super-block, and the weights each one decodes.
constexpr int kQ4KLaneParts = 8;
constexpr int kQ4KLaneWeights = 32;

static_assert(sizeof(helm::quant::BlockQ4K) == 144 && offsetof(helm::quant::BlockQ4K, d) == 0 &&
                  offsetof(helm::quant::BlockQ4K, dmin) == 2 &&
                  offsetof(helm::quant::BlockQ4K, scales) == 4 &&
                  offsetof(helm::quant::BlockQ4K, qs) == 16,
              "the lanes read d | dmin as header word 0 and the scales as words 1 to 3");

/// Byte offset in a BlockQ4K of part p's 16 code bytes: 32-byte chunk p / 2, half p % 2.
HELM_LANE int q4kLaneCodeOffset(int part) {
  return int(offsetof(helm::quant::BlockQ4K, qs)) + 32 * (part / 2) + 16 * (part % 2);
}

/// Position in the super-block of part p's first weight among its low (high = 0) or high
/// (high = 1) nibbles; the 16 weights follow it. Code byte 32c + l holds weight 64c + l in its
/// low nibble and weight 64c + 32 + l in its high nibble.
HELM_LANE int q4kLaneFirstWeight(int part, int high) {
  return 64 * (part / 2) + 32 * high + 16 * (part % 2);
}

// The f32 steps of dequantizeQ4K, unfused.
HELM_LANE float laneMul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
HELM_LANE float laneSub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

/// The f16 at `bits` as f32 (exact on both sides).
HELM_LANE float laneHalf(uint32_t bits) {
#ifdef __CUDACC__
  __half_raw raw;
  raw.x = static_cast<unsigned short>(bits);
  return __half2float(__half(raw));
#else
  return helm::kernels::halfToFloat(uint16_t(bits));
#endif
}

/// float(q) for a code q below 2^23 (a 4-bit weight code, a 6-bit scale code), exactly: 2^23 + q
/// is the float whose low mantissa bits are q, and subtracting 2^23 is exact. An add instead of an
/// integer conversion, which GPUs issue at a fraction of the add's rate.
HELM_LANE float laneCode(uint32_t q) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(__uint_as_float(0x4B000000u | q), 8388608.0f);
#else
  return std::bit_cast<float>(0x4B000000u | q) - 8388608.0f;
#endif
}

/// Sub-block j's scale = d * sc and offset = dmin * mc (quant::unpackScaleMin's codes) from the
/// header words (word 0: d | dmin << 16; words 1-3: scales[0..11]).
HELM_LANE void laneScaleOffset(const uint32_t (&header)[4], int j, float &scale, float &offset) {
  const int shift = 8 * (j % 4);
  const uint32_t low = (header[1] >> shift) & 0xFF;  // scales[j % 4]
  const uint32_t mid = (header[2] >> shift) & 0xFF;  // scales[j % 4 + 4]
  const uint32_t top = (header[3] >> shift) & 0xFF;  // scales[j % 4 + 8]
  const uint32_t sc = j < 4 ? (low & 63) : ((top & 0xF) | ((low >> 6) << 4));
  const uint32_t mc = j < 4 ? (mid & 63) : ((top >> 4) | ((mid >> 6) << 4));
  scale = laneMul(laneHalf(header[0] & 0xFFFF), laneCode(sc));
  offset = laneMul(laneHalf(header[0] >> 16), laneCode(mc));
}

/// Part p's 16 weights of one nibble half (high = 0: low nibbles, sub-block 2 (p / 2); 1: high
/// nibbles, sub-block 2 (p / 2) + 1), in order from q4kLaneFirstWeight(p, high), from the header
/// words and the part's code words (code byte i is byte i % 4 of codes[i / 4]).
HELM_LANE void q4kLaneHalf(const uint32_t (&header)[4], const uint32_t (&codes)[4], int part,
                           int high, float (&out)[16]) {
  float scale, offset;
  laneScaleOffset(header, 2 * (part / 2) + high, scale, offset);
  const int nibble = 4 * high;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 0; i < 16; ++i) {
    const uint32_t q = (codes[i / 4] >> (8 * (i % 4) + nibble)) & 0xF;
    out[i] = laneSub(laneMul(scale, laneCode(q)), offset);
  }
}

/// All 32 weights of part p: out[0..15] its low nibbles' (from q4kLaneFirstWeight(p, 0)),
/// out[16..31] its high nibbles' (from q4kLaneFirstWeight(p, 1)).
HELM_LANE void q4kLaneWeights(const uint32_t (&header)[4], const uint32_t (&codes)[4], int part,
                              float (&out)[kQ4KLaneWeights]) {
  float half[16];
  for (int high = 0; high < 2; ++high) {
    q4kLaneHalf(header, codes, part, high, half);
    for (int i = 0; i < 16; ++i)
      out[16 * high + i] = half[i];
  }
}

} // namespace helm_cuda

#endif
