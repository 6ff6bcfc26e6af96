//===- BlockKernelsTest.cpp - the contract's kernels on weights in block formats ------===//
//
// helm_k_linear with a block-dtype weight takes the integer path (quantLinear) for any number of rows
// of x (prefill's in tiles of W); on the dequantize prefill path (linearBlocksWith) more than 8 rows
// dequantize the weight for the f32 kernels; helm_k_embed_blocks returns dequantized table rows. Each is checked against the library pieces it is built from, bit for bit: the glue
// (dtype codes, conversions of x and y, tiling of the dequantized weight, row addressing) is what
// is under test here; the pieces have their own tests.
//===------------------------------------------------------------------------------===//
#include "contract/helm_contract.h"
#include "contract/manifest_schema.h"
#include "kernels/common/Numeric.h"
#include "kernels/quant/BlockFormats.h"
#include "kernels/linear/BlockLinear.h"
#include "kernels/quant/QuantGemv.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace q = helm::quant;
namespace k = helm::kernels;

namespace {
std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// N rows of K weights quantized to `format`, row after row.
std::vector<uint8_t> quantizedRows(q::BlockFormat format, const std::vector<float> &w, int64_t N, int64_t K) {
  int64_t rowBytes = *q::rowBytes(format, K);
  std::vector<uint8_t> out(size_t(N * rowBytes));
  for (int64_t n = 0; n < N; ++n)
    EXPECT_TRUE(q::quantizeRow(format, w.data() + n * K, K, out.data() + n * rowBytes).ok());
  return out;
}

struct Case {
  q::BlockFormat format;
  int32_t code;
};
const Case kCases[] = {{q::BlockFormat::q8_0, HELM_DTYPE_Q8_0},
                       {q::BlockFormat::q4_0, HELM_DTYPE_Q4_0},
                       {q::BlockFormat::q4_1, HELM_DTYPE_Q4_1}};
} // namespace

TEST(BlockKernels, FewRowsTakeTheIntegerPath) {
  const int64_t K = 128, N = 37;
  for (const Case &c : kCases)
    for (int64_t M : {1, 3, 8}) {
      auto w = quantizedRows(c.format, randomFloats(size_t(N * K), 1), N, K);
      auto x = randomFloats(size_t(M * K), 2);
      std::vector<float> expected(size_t(M * N)), got(size_t(M * N));
      std::string error;
      ASSERT_TRUE(q::quantLinear(c.format, x.data(), M, K, w.data(), N, expected.data(), &error)) << error;
      // w_transposed is ignored for a block weight: its rows are always the output features.
      helm_k_linear(x.data(), HELM_DTYPE_F32, w.data(), c.code, /*w_transposed=*/0, got.data(), HELM_DTYPE_F32, M, K, N);
      EXPECT_EQ(0, std::memcmp(expected.data(), got.data(), expected.size() * sizeof(float)))
          << q::blockFormatInfo(c.format).name << " M=" << M;
    }
}

TEST(BlockKernels, ManyRowsRunTheF32KernelsOnTheDequantizedWeight) {
  // N above one dequantized tile (2^20 floats / K rows) checks the tiling and the y columns.
  const int64_t K = 256, N = 4096 + 3;
  for (const Case &c : kCases)
    for (int64_t M : {9, 40}) {
      auto w = quantizedRows(c.format, randomFloats(size_t(N * K), 3), N, K);
      auto x = randomFloats(size_t(M * K), 4);
      std::vector<float> dense(size_t(N * K));
      int64_t rowBytes = *q::rowBytes(c.format, K);
      for (int64_t n = 0; n < N; ++n)
        ASSERT_TRUE(q::dequantizeRow(c.format, w.data() + n * rowBytes, K, dense.data() + n * K).ok());
      // The dense reference, one call per tile as the kernel makes them (oneDNN's blocking depends
      // on N, so a single N-wide call could round differently).
      std::vector<float> expected(size_t(M * N)), got(size_t(M * N)), part;
      const int64_t tile = (int64_t(1) << 20) / K;
      for (int64_t n0 = 0; n0 < N; n0 += tile) {
        int64_t rows = std::min(tile, N - n0);
        part.assign(size_t(M * rows), 0.0f);
        helm_k_linear(x.data(), HELM_DTYPE_F32, dense.data() + n0 * K, HELM_DTYPE_F32, 1, part.data(),
                      HELM_DTYPE_F32, M, K, rows);
        for (int64_t m = 0; m < M; ++m)
          std::memcpy(expected.data() + m * N + n0, part.data() + m * rows, size_t(rows) * sizeof(float));
      }
      helm::kernels::linearBlocksWith(helm::kernels::BlockPrefillPath::dequantize, x.data(), HELM_DTYPE_F32, w.data(), c.code, got.data(),
                          HELM_DTYPE_F32, M, K, N);
      EXPECT_EQ(0, std::memcmp(expected.data(), got.data(), expected.size() * sizeof(float)))
          << q::blockFormatInfo(c.format).name << " M=" << M;
    }
}

TEST(BlockKernels, ManyRowsTakeTheIntegerPathInTilesOfTheWeight) {
  // Prefill's rows through quantLinear with W in tiles (N = 4099 rows of K = 256 is several tiles
  // and a partial one): each group of 8 rows of x must be exactly what a decode-sized call gives,
  // which covers W in one pass.
  const int64_t K = 256, N = 4096 + 3;
  for (const Case &c : kCases)
    for (int64_t M : {9, 40}) {
      auto w = quantizedRows(c.format, randomFloats(size_t(N * K), 5), N, K);
      auto x = randomFloats(size_t(M * K), 6);
      std::vector<float> expected(size_t(M * N)), got(size_t(M * N));
      for (int64_t m0 = 0; m0 < M; m0 += 8) {
        std::string error;
        ASSERT_TRUE(q::quantLinear(c.format, x.data() + m0 * K, std::min<int64_t>(8, M - m0), K, w.data(), N,
                                   expected.data() + m0 * N, &error))
            << error;
      }
      helm_k_linear(x.data(), HELM_DTYPE_F32, w.data(), c.code, 1, got.data(), HELM_DTYPE_F32, M, K, N);
      EXPECT_EQ(0, std::memcmp(expected.data(), got.data(), expected.size() * sizeof(float)))
          << q::blockFormatInfo(c.format).name << " M=" << M;
    }
}

TEST(BlockKernels, HalfActivationsAreWidenedAndOutputsNarrowed) {
  const int64_t M = 2, K = 64, N = 5;
  auto w = quantizedRows(q::BlockFormat::q8_0, randomFloats(size_t(N * K), 5), N, K);
  auto xf = randomFloats(size_t(M * K), 6);
  std::vector<uint16_t> xh(xf.size());
  k::narrow(xf.data(), k::DType::bf16, xh.data(), M * K);
  std::vector<float> widened(xf.size()), yf(size_t(M * N));
  k::widen(xh.data(), k::DType::bf16, widened.data(), M * K);
  std::string error;
  ASSERT_TRUE(q::quantLinear(q::BlockFormat::q8_0, widened.data(), M, K, w.data(), N, yf.data(), &error));
  std::vector<uint16_t> expected(size_t(M * N)), got(size_t(M * N));
  k::narrow(yf.data(), k::DType::bf16, expected.data(), M * N);
  helm_k_linear(xh.data(), HELM_DTYPE_BF16, w.data(), HELM_DTYPE_Q8_0, 1, got.data(), HELM_DTYPE_BF16, M, K, N);
  EXPECT_EQ(expected, got);
}

TEST(BlockKernels, EmbedDequantizesThePickedRows) {
  const int64_t vocab = 11, width = 96;
  for (const Case &c : kCases) {
    auto table = quantizedRows(c.format, randomFloats(size_t(vocab * width), 7), vocab, width);
    int64_t rowBytes = *q::rowBytes(c.format, width);
    // Ids outside the table read its first or last row, as the element tables' gather clamps.
    const std::vector<int64_t> ids = {3, 0, 10, 3, -5, 99};
    std::vector<float> got(ids.size() * static_cast<size_t>(width)), row(static_cast<size_t>(width));
    helm_k_embed_blocks(ids.data(), table.data(), c.code, got.data(), HELM_DTYPE_F32, int64_t(ids.size()), vocab,
                        width);
    for (size_t r = 0; r < ids.size(); ++r) {
      int64_t id = std::clamp<int64_t>(ids[r], 0, vocab - 1);
      ASSERT_TRUE(q::dequantizeRow(c.format, table.data() + id * rowBytes, width, row.data()).ok());
      EXPECT_EQ(0, std::memcmp(row.data(), got.data() + r * size_t(width), size_t(width) * sizeof(float)))
          << q::blockFormatInfo(c.format).name << " row " << r;
    }
    // An f16 output is the f32 row rounded once.
    std::vector<uint16_t> half(ids.size() * size_t(width)), expected(half.size());
    helm_k_embed_blocks(ids.data(), table.data(), c.code, half.data(), HELM_DTYPE_F16, int64_t(ids.size()), vocab,
                        width);
    k::narrow(got.data(), k::DType::f16, expected.data(), int64_t(expected.size()));
    EXPECT_EQ(expected, half);
  }
}

// The contract's block dtype codes and the library's formats name the same thing: the code's
// manifest spelling (manifest_schema.h) is the format's name, and no other code maps to a format.
TEST(BlockKernels, DtypeCodesMapToTheFormatsOfTheSameName) {
  for (int32_t code = -1; code < 16; ++code) {
    std::optional<q::BlockFormat> format = q::blockFormatOfDtype(code);
    if (helm_dtype_block_weights(code) == 0) {
      EXPECT_FALSE(format.has_value()) << code;
      continue;
    }
    ASSERT_TRUE(format.has_value()) << code;
    EXPECT_EQ(q::blockFormatInfo(*format).name, std::string_view(helm_dtype_name(code)));
    EXPECT_EQ(q::blockFormatInfo(*format).weightsPerBlock, helm_dtype_block_weights(code));
    EXPECT_EQ(q::blockFormatInfo(*format).bytesPerBlock, helm_dtype_block_bytes(code));
  }
}
