//===- HostDeviceOpsTest.cpp - the cpu/emu device ops on weights in blocks --------------===//
//
// The kernel form of a GPU stage runs on emu through these ops. For weights in blocks they must
// do what the CPU stage does: the embedding returns quant::dequantizeRow's values of the picked
// rows (clamped ids), and the linear is x . dequant(W)^T with x quantized to 8 bits per block of
// 32 as the CPU's GEMV does it (re-implemented here) up to 8 rows, f32 x beyond, plus the bias.
// References: kernels/quant's scalar quantizer and dequantizer, sums in double.
//
//===----------------------------------------------------------------------===//
#include "contract/helm_contract.h"
#include "kernels/common/Numeric.h"
#include "kernels/quant/BlockFormats.h"
#include "runtime/backends/host/HostBackend.h"

#include "test/unit/DeviceTestSupport.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace helm::rt;
using helm::kernels::DType;
using helm::test::blockDtypeCode;
using helm::test::blockRows;
using helm::test::errorText;
using helm::test::randomFloats;
namespace quant = helm::quant;

namespace {

TEST(HostDeviceOps, EmbedBlocksGivesTheDequantizedRows) {
  auto ops = createHostDeviceOps();
  const int64_t vocab = 4, width = 512;
  const std::vector<int64_t> ids = {2, -3, 9, 0, 2};
  for (const quant::BlockFormatInfo &info : quant::allBlockFormats()) {
    std::vector<char> table;
    std::vector<float> values;
    blockRows(info.format, vocab, width, 11, table, values);
    for (DType out : {DType::f32, DType::f16, DType::bf16}) {
      std::vector<char> y(ids.size() * size_t(width) * 4, 0x7f);
      ASSERT_FALSE(bool(ops->embedBlocks(ids.data(), table.data(), blockDtypeCode(info.format), y.data(),
                                         out, int64_t(ids.size()), vocab, width)))
          << info.name;
      for (size_t r = 0; r < ids.size(); ++r) {
        const int64_t row = std::clamp<int64_t>(ids[r], 0, vocab - 1);
        for (int64_t c = 0; c < width; ++c) {
          const float want = helm::kernels::roundTo(values[size_t(row * width + c)], out);
          const float got = helm::kernels::loadAs(y.data(), out, int64_t(r) * width + c);
          ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
              << info.name << " row " << r << " column " << c << ": " << got << " vs " << want;
        }
      }
    }
  }
}

TEST(HostDeviceOps, LinearBlocksIsXTimesTheDequantizedWeights) {
  auto ops = createHostDeviceOps();
  const int64_t k = 512, n = 24;
  for (const quant::BlockFormatInfo &info : quant::allBlockFormats())
    for (int64_t m : {1, 3, 8, 20}) { // every row count: the integer path (prefill's too)
      std::vector<char> w;
      std::vector<float> wf;
      blockRows(info.format, n, k, 100 + uint32_t(m), w, wf);
      const std::vector<float> x = randomFloats(size_t(m * k), -2, 2, 7 + uint32_t(m));
      const std::vector<float> bias = randomFloats(size_t(n), -1, 1, 9);
      std::vector<float> y(size_t(m * n), 1e30f);
      ASSERT_FALSE(bool(ops->linearBlocks(x.data(), DType::f32, w.data(), blockDtypeCode(info.format),
                                          bias.data(), y.data(), DType::f32, m, k, n)))
          << info.name;
      // The CPU quantizes x per block of 32 as llama.cpp's q8_0 (QuantGemvImpl.h: codes
      // nearbyint(clamp(x * (127 / amax), -127, 127)), d = amax / 127 rounded to f16), re-done here.
      // The min terms of q4_1 / q5_1 use the block's s = f16(amax / 127 * sum of codes) (ggml's q8_1
      // s) instead of d times the codes: minDelta is s - d * sum, per block. The k-quants' take d
      // times the codes' exact sum: no delta.
      std::vector<double> xq(x.begin(), x.end()), minDelta(x.size() / 32);
      for (size_t b = 0; b < xq.size() / 32; ++b) {
        float amax = 0;
        for (size_t c = 32 * b; c < 32 * b + 32; ++c)
          amax = std::max(amax, std::fabs(x[c]));
        const float id = amax == 0 ? 0.0f : 127.0f / amax;
        const auto toHalf = [](float v) { return double(helm::kernels::halfToFloat(helm::kernels::floatToHalf(v))); };
        const double d = toHalf(amax / 127.0f);
        int sum = 0;
        for (size_t c = 32 * b; c < 32 * b + 32; ++c) {
          const int code = int(std::nearbyint(std::clamp(x[c] * id, -127.0f, 127.0f)));
          xq[c] = double(code) * d;
          sum += code;
        }
        minDelta[b] = toHalf(amax / 127.0f * float(sum)) - d * sum;
      }
      // The weight row's min per block of 32 (w = q d + min) where its term reads s: q4_1's and q5_1's
      // m.
      const auto blockMin = [&](int64_t row, int64_t b) -> double {
        const char *r = w.data() + row * (k / info.weightsPerBlock) * info.bytesPerBlock;
        if (info.format == quant::BlockFormat::q4_1) {
          quant::BlockQ4_1 blk;
          std::memcpy(&blk, r + b * info.bytesPerBlock, sizeof blk);
          return helm::kernels::halfToFloat(blk.m);
        }
        if (info.format == quant::BlockFormat::q5_1) {
          quant::BlockQ5_1 blk;
          std::memcpy(&blk, r + b * info.bytesPerBlock, sizeof blk);
          return helm::kernels::halfToFloat(blk.m);
        }
        return 0.0;
      };
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j) {
          double want = 0, magnitude = 0;
          for (int64_t c = 0; c < k; ++c) {
            want += xq[size_t(r * k + c)] * wf[size_t(j * k + c)];
            magnitude += std::fabs(xq[size_t(r * k + c)] * wf[size_t(j * k + c)]);
          }
          for (int64_t b = 0; b < k / 32; ++b)
            want += blockMin(j, b) * minDelta[size_t(r * (k / 32) + b)];
          want = float(want) + bias[size_t(j)];
          // f32 products and sums in another order, then the bias's rounding.
          const double allowed = 2e-6 * magnitude + 1e-6 * std::fabs(want) + 1e-7;
          EXPECT_NEAR(y[size_t(r * n + j)], want, allowed)
              << info.name << " m " << m << " row " << r << " column " << j;
        }
    }
}

// The rope's frequency divisors (Llama 3's rope_freqs): f = float(1 / (theta^(2c/d) * factor_c)),
// a = float(p) * f, each pair rotated by cos a and sin a (DeviceOps.h). Factors of 1 are no factors.
TEST(HostDeviceOps, RopeFrequencyFactorsDivideEachPairsFrequency) {
  auto ops = createHostDeviceOps();
  const int64_t heads = 2, headDim = 16, half = headDim / 2, rows = 3;
  const std::vector<int64_t> positions = {0, 7, 5000};
  const std::vector<float> x = randomFloats(size_t(rows * heads * headDim), -2, 2, 21);
  std::vector<float> factors, ones(size_t(half), 1.0f);
  for (int64_t c = 0; c < half; ++c)
    factors.push_back(c < 2 ? 1.0f : c < 6 ? 1.0f + float(c) : 8.0f);
  for (bool interleaved : {false, true}) {
    std::vector<float> plain(x.size()), unit(x.size()), scaled(x.size());
    ASSERT_FALSE(bool(ops->rope(x.data(), positions.data(), plain.data(), DType::f32, rows, heads, headDim,
                                headDim, 500000.0, nullptr, interleaved)));
    ASSERT_FALSE(bool(ops->rope(x.data(), positions.data(), unit.data(), DType::f32, rows, heads, headDim,
                                headDim, 500000.0, ones.data(), interleaved)));
    ASSERT_FALSE(bool(ops->rope(x.data(), positions.data(), scaled.data(), DType::f32, rows, heads, headDim,
                                headDim, 500000.0, factors.data(), interleaved)));
    EXPECT_EQ(std::memcmp(plain.data(), unit.data(), plain.size() * 4), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t c = 0; c < half; ++c) {
          const double f = double(float(1.0 / (std::pow(500000.0, double(float(2 * c) / float(headDim))) *
                                               double(factors[size_t(c)]))));
          const double a = double(float(positions[size_t(r)]) * float(f));
          const size_t base = size_t((r * heads + h) * headDim);
          const size_t i0 = base + size_t(interleaved ? 2 * c : c);
          const size_t i1 = base + size_t(interleaved ? 2 * c + 1 : c + half);
          const double want0 = x[i0] * std::cos(a) - x[i1] * std::sin(a);
          const double want1 = x[i1] * std::cos(a) + x[i0] * std::sin(a);
          EXPECT_NEAR(scaled[i0], want0, 1e-5) << "row " << r << " pair " << c;
          EXPECT_NEAR(scaled[i1], want1, 1e-5) << "row " << r << " pair " << c;
        }
    // Position 5000's lowest frequencies differ with their factor of 8.
    EXPECT_NE(std::memcmp(plain.data(), scaled.data(), plain.size() * 4), 0);
  }
}

// Gemma's elementwise ops against their definitions computed in double: GELU's tanh form
// (0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3)))) times up, the scale, and the soft cap
// cap * tanh(x / cap); in f16 the activation is rounded before the product.
TEST(HostDeviceOps, GemmaElementwiseOpsFollowTheirDefinitions) {
  auto ops = createHostDeviceOps();
  const int64_t n = 4096;
  const std::vector<float> gate = randomFloats(size_t(n), -12, 12, 31), up = randomFloats(size_t(n), -3, 3, 32);
  std::vector<float> y(static_cast<size_t>(n));
  ASSERT_FALSE(bool(ops->geglu(gate.data(), up.data(), y.data(), DType::f32, n)));
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[size_t(i)];
    const double gelu = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    EXPECT_NEAR(y[size_t(i)], gelu * up[size_t(i)], 2e-6 * (1.0 + std::fabs(gelu * up[size_t(i)]))) << "g " << g;
  }
  ASSERT_FALSE(bool(ops->scale(gate.data(), y.data(), DType::f32, n, 25.298221588134766f)));
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(y[size_t(i)], gate[size_t(i)] * 25.298221588134766f);
  ASSERT_FALSE(bool(ops->softcap(gate.data(), y.data(), DType::f32, n, 5.0f)));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(y[size_t(i)], 5.0 * std::tanh(double(gate[size_t(i)]) / 5.0), 2e-6);
    EXPECT_LT(std::fabs(y[size_t(i)]), 5.0f);
  }
  // f16: the activation rounded to f16, then the product rounded.
  std::vector<uint16_t> g16(static_cast<size_t>(n)), u16(g16.size()), y16(g16.size());
  for (int64_t i = 0; i < n; ++i) {
    g16[size_t(i)] = helm::kernels::floatToHalf(gate[size_t(i)]);
    u16[size_t(i)] = helm::kernels::floatToHalf(up[size_t(i)]);
  }
  ASSERT_FALSE(bool(ops->geglu(g16.data(), u16.data(), y16.data(), DType::f16, n)));
  for (int64_t i = 0; i < n; ++i) {
    const float g = helm::kernels::halfToFloat(g16[size_t(i)]);
    const double gelu = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * double(g) * g * g)));
    const float act = helm::kernels::halfToFloat(helm::kernels::floatToHalf(float(gelu)));
    const float want = helm::kernels::halfToFloat(
        helm::kernels::floatToHalf(act * helm::kernels::halfToFloat(u16[size_t(i)])));
    EXPECT_NEAR(helm::kernels::halfToFloat(y16[size_t(i)]), want, 1e-3 * (1.0 + std::fabs(want))) << "g " << g;
  }
}

TEST(HostDeviceOps, BlockCallsRefuseWhatIsNotBlocks) {
  auto ops = createHostDeviceOps();
  std::vector<char> buf(1 << 16);
  const auto *ids = reinterpret_cast<const int64_t *>(buf.data());
  EXPECT_EQ(errorText(ops->linearBlocks(buf.data(), DType::f32, buf.data(), HELM_DTYPE_F16,
                                        nullptr, buf.data(), DType::f32, 1, 32, 2)),
            "linear: unsupported block dtype code 1");
  EXPECT_EQ(errorText(ops->linearBlocks(buf.data(), DType::f32, buf.data(), HELM_DTYPE_Q4_K,
                                        nullptr, buf.data(), DType::f32, 1, 96, 2)),
            "linear: 96 weights per row are not whole q4_k blocks of 256");
  EXPECT_EQ(errorText(ops->embedBlocks(ids, buf.data(), HELM_DTYPE_BF16, buf.data(), DType::f32, 1,
                                       4, 32)),
            "embed: unsupported block dtype code 2");
  EXPECT_EQ(errorText(ops->embedBlocks(ids, buf.data(), HELM_DTYPE_Q8_0, buf.data(), DType::f32, 1,
                                       0, 32)),
            "embed: bad sizes");
  EXPECT_EQ(errorText(ops->embedBlocks(ids, buf.data(), HELM_DTYPE_Q8_0, buf.data(), DType::f32, 1,
                                       4, 48)),
            "embed: 48 weights per row are not whole q8_0 blocks of 32");
}

} // namespace
