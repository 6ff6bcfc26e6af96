//===- WeightQuantizerTest.cpp - ONNX blocked integers stored dequantized -----------===//
//
// dequantizeOnnxBlocks, for rows that are not whole blocks of 32: each weight must be
// (code - zero point) * scale of its block, written out here value by value from the layouts
// (MatMulNBits' padded byte rows with row-padded zero points; a DequantizeLinear's K-major int4
// with f16 scales, rounded to f16), and a source of the wrong size is a one-line error naming the
// weight.
//
//===----------------------------------------------------------------------===//
#include "compiler/WeightQuantizer.h"

#include "kernels/common/Numeric.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

using helm::OnnxBlockedSource;

llvm::ArrayRef<char> bytesOf(const std::vector<uint8_t> &v) {
  return {reinterpret_cast<const char *>(v.data()), v.size()};
}
template <class T> llvm::ArrayRef<char> bytesOf(const std::vector<T> &v) {
  return {reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T)};
}

// MatMulNBits: N = 2 rows of K = 40 4-bit codes in blocks of 32 (the second block padded to 32),
// u8 codes two to a byte, u8 zero points two to a byte with each row padded to a whole byte.
TEST(WeightQuantizer, DequantizesPaddedMatMulNBitsRows) {
  constexpr int64_t N = 2, K = 40, block = 32, blocks = 2, blob = 16;
  std::vector<uint8_t> codes(N * blocks * blob);
  auto codeOf = [](int64_t n, int64_t k) { return int((n * 7 + k * 3) % 16); };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < blocks * block; ++k) {
      // The padding codes (k >= K) are 15: they must not reach the output.
      const int c = k < K ? codeOf(n, k) : 15;
      uint8_t &byte = codes[size_t(n * blocks * blob + k / 2)];
      byte = uint8_t(byte | (c << (4 * (k % 2))));
    }
  const std::vector<float> scales = {0.5f, -0.25f, 2.0f, 0.125f}; // [N, blocks]
  const std::vector<uint8_t> zeroPoints = {uint8_t(3 | (9 << 4)), uint8_t(8 | (0 << 4))};
  const int zp[2][2] = {{3, 9}, {8, 0}};
  OnnxBlockedSource source;
  source.N = N;
  source.K = K;
  source.bits = 4;
  source.blockSize = block;
  source.codes = bytesOf(codes);
  source.codeDtype = "u8";
  source.scales = bytesOf(scales);
  source.scaleDtype = "f32";
  source.zeroPoints = bytesOf(zeroPoints);
  source.zeroPointDtype = "u8";
  std::vector<char> out;
  llvm::Error e = helm::dequantizeOnnxBlocks("w", source, out);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  ASSERT_EQ(out.size(), size_t(N * K * sizeof(float)));
  std::vector<float> w(N * K);
  std::memcpy(w.data(), out.data(), out.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t b = k / block;
      EXPECT_EQ(w[size_t(n * K + k)], float(codeOf(n, k) - zp[n][b]) * scales[size_t(n * blocks + b)])
          << "n " << n << " k " << k;
    }
}

// A DequantizeLinear feeding a MatMul: K-major [K, N] int4 codes (ONNX packs them over the whole
// tensor, low nibble first), [blocks, N] f16 scales, no zero points (0): f16 results.
TEST(WeightQuantizer, DequantizesKMajorInt4WithHalfScales) {
  constexpr int64_t N = 3, K = 48, block = 32, blocks = 2;
  auto valueOf = [](int64_t n, int64_t k) { return int((n * 5 + k) % 16) - 8; }; // -8..7
  std::vector<uint8_t> codes((N * K + 1) / 2);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t e = k * N + n;
      codes[size_t(e / 2)] = uint8_t(codes[size_t(e / 2)] | ((valueOf(n, k) & 0xF) << (4 * (e % 2))));
    }
  const float scaleValues[blocks][N] = {{0.1f, 3.0f, -0.7f}, {1e-3f, 0.33f, 65.0f}};
  std::vector<uint16_t> scales;
  for (const auto &row : scaleValues)
    for (float s : row)
      scales.push_back(helm::kernels::floatToHalf(s));
  OnnxBlockedSource source;
  source.N = N;
  source.K = K;
  source.bits = 4;
  source.blockSize = block;
  source.kMajor = true;
  source.codes = bytesOf(codes);
  source.codeDtype = "i4";
  source.scales = bytesOf(scales);
  source.scaleDtype = "f16";
  std::vector<char> out;
  llvm::Error e = helm::dequantizeOnnxBlocks("w", source, out);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  ASSERT_EQ(out.size(), size_t(N * K * 2));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      uint16_t h;
      std::memcpy(&h, out.data() + 2 * (n * K + k), 2);
      const float scale = helm::kernels::halfToFloat(scales[size_t((k / block) * N + n)]);
      const float want = helm::kernels::halfToFloat(helm::kernels::floatToHalf(float(valueOf(n, k)) * scale));
      EXPECT_EQ(helm::kernels::halfToFloat(h), want) << "n " << n << " k " << k;
    }
}

TEST(WeightQuantizer, DequantizingWrongSizesIsAOneLineError) {
  std::vector<uint8_t> codes(10);
  std::vector<float> scales(2);
  OnnxBlockedSource source;
  source.N = 2;
  source.K = 40;
  source.bits = 4;
  source.blockSize = 32;
  source.codes = bytesOf(codes);
  source.codeDtype = "u8";
  source.scales = bytesOf(scales);
  source.scaleDtype = "f32";
  std::vector<char> out;
  const std::string message = llvm::toString(helm::dequantizeOnnxBlocks("proj.weight", source, out));
  EXPECT_EQ(message, "cannot dequantize the blocks of weight 'proj.weight': 10 bytes of codes, 64 expected "
                     "(2 x 40 4-bit codes in blocks of 32)");
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

} // namespace
