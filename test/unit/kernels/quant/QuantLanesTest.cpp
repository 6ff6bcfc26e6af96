//===- QuantLanesTest.cpp - kernels/cuda/QuantLanes.h against quant::dequantizeRow ----===//
//
// helm_cuda_qgemv_q4k decodes each q4_k super-block in 8 lane parts with QuantLanes.h's code,
// which compiles here as plain C++ (this file is built with -ffp-contract=off, as the device code
// uses unfused __fmul_rn / __fsub_rn). For rows made by quant::quantizeRow (random, all-zero
// super-blocks, extreme and mixed magnitudes) and rows of random bytes (every 6-bit scale and min
// code), every part's 32 weights, read from the 16-byte words a lane loads, must be dequantizeRow's
// weights at the positions the kernel multiplies them with, bit for bit; and the 8 parts must
// cover the 256 weights of a super-block and its 128 code bytes exactly once.
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/QuantLanes.h"
#include "kernels/common/Numeric.h"
#include "kernels/quant/BlockFormats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace q = helm::quant;
using helm_cuda::kQ4KLaneParts;
using helm_cuda::kQ4KLaneWeights;

namespace {

constexpr int64_t kSuperBlock = 256;
constexpr int64_t kBlockBytes = int64_t(sizeof(q::BlockQ4K));

/// The 4 little-endian words of 16 bytes at p, as a 16-byte load gives them to a lane.
void wordsAt(const uint8_t *p, uint32_t (&words)[4]) { std::memcpy(words, p, 16); }

/// Checks every lane part of every super-block of the q4_k row `bytes` (n weights) against
/// dequantizeRow; `what` names the row in failures.
void expectLanesMatchDequantizeRow(const std::vector<uint8_t> &bytes, int64_t n, const std::string &what) {
  std::vector<float> want(size_t(n), 0.0f);
  ASSERT_TRUE(q::dequantizeRow(q::BlockFormat::q4_k, bytes.data(), n, want.data()).ok()) << what;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const uint8_t *block = bytes.data() + b * kBlockBytes;
    uint32_t header[4];
    wordsAt(block, header);
    for (int part = 0; part < kQ4KLaneParts; ++part) {
      uint32_t codes[4];
      wordsAt(block + helm_cuda::q4kLaneCodeOffset(part), codes);
      float got[kQ4KLaneWeights];
      helm_cuda::q4kLaneWeights(header, codes, part, got);
      for (int high = 0; high < 2; ++high) {
        const float *expected = want.data() + b * kSuperBlock + helm_cuda::q4kLaneFirstWeight(part, high);
        if (std::memcmp(got + 16 * high, expected, 16 * sizeof(float)) != 0) {
          for (int i = 0; i < 16; ++i)
            if (std::memcmp(got + 16 * high + i, expected + i, sizeof(float)) != 0)
              ADD_FAILURE() << what << ": super-block " << b << " part " << part << (high ? " high" : " low")
                            << " nibble weight " << i << ": lane " << got[16 * high + i] << " (0x" << std::hex
                            << helm::kernels::floatToBits(got[16 * high + i]) << "), dequantizeRow "
                            << expected[i] << " (0x" << helm::kernels::floatToBits(expected[i]) << std::dec << ")";
          return;
        }
      }
    }
  }
}

std::vector<uint8_t> quantized(const std::vector<float> &x) {
  std::vector<uint8_t> bytes(size_t(*q::rowBytes(q::BlockFormat::q4_k, int64_t(x.size()))));
  const q::QuantStatus status = q::quantizeRow(q::BlockFormat::q4_k, x.data(), int64_t(x.size()), bytes.data());
  EXPECT_TRUE(status.ok()) << status.error;
  return bytes;
}

TEST(QuantLanesTest, PartsCoverEverySuperBlockWeightAndCodeByteOnce) {
  int weightUses[kSuperBlock] = {}, codeUses[kBlockBytes] = {};
  for (int part = 0; part < kQ4KLaneParts; ++part) {
    const int offset = helm_cuda::q4kLaneCodeOffset(part);
    // The lane loads its codes as one 16-byte word: aligned in an aligned super-block.
    EXPECT_EQ(offset % 16, 0) << "part " << part;
    for (int i = 0; i < 16; ++i)
      ++codeUses[offset + i];
    for (int high = 0; high < 2; ++high) {
      const int first = helm_cuda::q4kLaneFirstWeight(part, high);
      // The lane loads x for its 16 weights as 16-byte words.
      EXPECT_EQ(first % 4, 0) << "part " << part;
      for (int i = 0; i < 16; ++i)
        ++weightUses[first + i];
    }
  }
  for (int i = 0; i < kSuperBlock; ++i)
    EXPECT_EQ(weightUses[i], 1) << "weight " << i;
  for (int i = 0; i < kBlockBytes; ++i)
    EXPECT_EQ(codeUses[i], i < int(offsetof(q::BlockQ4K, qs)) ? 0 : 1) << "byte " << i;
}

TEST(QuantLanesTest, PartsDecodeDequantizeRowsWeightsBitForBit) {
  const int64_t n = 8 * kSuperBlock;
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t b = 0; b < n / kSuperBlock; ++b) {
      // Per super-block: all zero, all one value, all positive (min code 0), mixed sub-block
      // magnitudes (scale codes far apart), or gaussian; at magnitudes from near f16's smallest
      // normal to near its largest.
      const int kind = int((b + seed) % 5);
      const float magnitude = std::ldexp(1.0f, int(rng() % 40) - 20);
      for (int64_t i = 0; i < kSuperBlock; ++i) {
        float v = 0.0f;
        switch (kind) {
        case 0: v = 0.0f; break;
        case 1: v = -magnitude; break;
        case 2: v = magnitude * (1.0f + uniform(rng)); break;
        case 3: v = magnitude * uniform(rng) * std::ldexp(1.0f, -int(i / 32)); break;
        default: v = magnitude * normal(rng); break;
        }
        x[size_t(b * kSuperBlock + i)] = v;
      }
    }
    expectLanesMatchDequantizeRow(quantized(x), n, "quantized row, seed " + std::to_string(seed));
  }
  // The extremes of the f16 scales: dmin near f16's largest value (at 4e6: 0x7ba3; 8e6 no
  // longer fits), d and dmin among the subnormals (1e-3, 1e-4), d rounded to 0 (1e-5), both (1e-6).
  for (float magnitude : {4e6f, 15000.0f, 1e-3f, 1e-4f, 1e-5f, 1e-6f}) {
    std::vector<float> x(static_cast<size_t>(kSuperBlock));
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float &v : x)
      v = magnitude * uniform(rng);
    expectLanesMatchDequantizeRow(quantized(x), kSuperBlock, "row at magnitude " + std::to_string(magnitude));
  }
}

// Random bytes reach every scale and min code (the quantizer's codes are skewed to large scales)
// and every nibble; d and dmin are random finite f16 values, subnormals and negatives included.
TEST(QuantLanesTest, PartsDecodeRandomBlocksBitForBit) {
  const int64_t n = 64 * kSuperBlock;
  std::mt19937 rng(99);
  std::vector<uint8_t> bytes(static_cast<size_t>(n / kSuperBlock * kBlockBytes));
  for (uint8_t &byte : bytes)
    byte = uint8_t(rng());
  for (int64_t b = 0; b < n / kSuperBlock; ++b)
    for (int field = 0; field < 2; ++field) {
      uint16_t half = uint16_t(rng());
      if (((half >> 10) & 0x1f) == 0x1f)
        half = uint16_t(half & ~(1u << 14)); // exponent 31 (inf, NaN) -> 15
      std::memcpy(bytes.data() + b * kBlockBytes + 2 * field, &half, 2);
    }
  expectLanesMatchDequantizeRow(bytes, n, "random bytes");
}

} // namespace
