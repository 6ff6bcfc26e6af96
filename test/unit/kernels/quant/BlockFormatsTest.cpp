//===- BlockFormatsTest.cpp - kernels/quant: table, layouts, round-trip bounds -----===//
//
// The bounds below come from each format's definition (how the quantizer picks its scales and
// codes), with the f16 rounding of the stored scales and a float-arithmetic allowance:
//
//   halfError(v)  <= 2^-11 |v| + 2^-25: what f16 round-to-nearest-even can have moved a value that
//                    is stored as v (half an ulp: relative 2^-11 in the normal range, 2^-25
//                    absolute among the subnormals);
//   floatSlack    =  2^-20 * the block's largest magnitude: the quantizer and dequantizer each do a
//                    few float operations (<= 8 roundings of 2^-24 relative in all) on values no
//                    larger than twice the block's largest magnitude.
//
// q8_0  d = amax / 127, q = round(x / d) in [-127, 127], never clipped:
//       |x - x'| <= d/2 + 127 |d - f16(d)| + slack.
// q4_0  d = max / -8 (max: the value of largest magnitude), code = min(15, trunc(x/d + 8.5)):
//       the nearest of (c - 8) d except at x/d > 7.5, where the code clamps to 15 (x' = 7d):
//       |x - x'| <= (x/d > 7.5 ? |x - 7d| : |d|/2) + 8 |d - f16(d)| + slack.
// q4_1  d = (max - min) / 15, m = min, code = nearest in [0, 15]:
//       |x - x'| <= d/2 + 15 |d - f16(d)| + |m - f16(m)| + slack.
// q5_0  as q4_0 with 32 levels: d = max / -16, code = min(31, trunc(x/d + 16.5)), clamped above
//       x/d > 15.5 (x' = 15d): |x - x'| <= (x/d > 15.5 ? |x - 15d| : |d|/2) + 16 |d - f16(d)| + slack.
// q5_1  d = (max - min) / 31, m = min, code = nearest in [0, 31]:
//       |x - x'| <= d/2 + 31 |d - f16(d)| + |m - f16(m)| + slack.
// q4_k, q5_k (qmax 15, 31), per sub-block of 32 with stored scale S = dh * sc and offset
//       M = dminh * mc: the fit (s, m) reaches every weight within s/2 (the quantizer keeps no fit
//       that clips), the 6-bit codes move s by at most Ds = d/2 + 63 |d - dh| <= dh/2 + 64 halfError(dh)
//       and m by Dm = dminh/2 + 64 halfError(dminh), and the final codes are the nearest for (S, M), so
//       |x - x'| <= s/2 + qmax Ds + Dm <= S/2 + (qmax + 1/2) Ds + Dm + slack.
// q2_k  as q4_k with qmax 3, per sub-block of 16, and 4-bit scale and offset codes relative to
//       the largest (d = max s / 15, so Ds = dh/2 + 16 halfError(dh), Dm likewise):
//       |x - x'| <= S/2 + 3.5 Ds + Dm + slack.
// q3_k  as q6_k with q in [-4, 3] and 6-bit scale codes in [-32, 31] (the largest scale becomes
//       -32; Ds = |d| + 32 |d - dh| <= |dh| + 33 halfError(dh)): |x - x'| <= |s| + 4 Ds <=
//       |S| + 5 Ds + slack.
// q6_k  per sub-block of 16 with stored scale S = dh * sc: the fit s reaches every weight within
//       |s| (the start clamps the opposite extreme from +32 to 31 steps), the int8 code moves s by
//       at most Ds = |d| + 128 |d - dh| <= |dh| + 129 halfError(dh) (half a step, or a whole one
//       where +128 clamps to 127), and the final codes are the nearest for S, so
//       |x - x'| <= |s| + 32 Ds <= |S| + 33 Ds + slack.
//===------------------------------------------------------------------------------===//
#include "kernels/quant/BlockFormats.h"
#include "kernels/quant/IqFormats.h"
#include "kernels/common/Isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace q = helm::quant;
using q::BlockFormat;

namespace {

// An f16 -> f32 decoder written here by definition (not the library's), for the bound terms.
double halfValue(uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v = exponent == 0 ? std::ldexp(double(mantissa), -24) : std::ldexp(double(1024 + mantissa), exponent - 25);
  if (exponent == 31)
    v = mantissa ? NAN : INFINITY;
  return sign ? -v : v;
}
double halfError(double storedValue) { return std::ldexp(std::fabs(storedValue), -11) + std::ldexp(1.0, -25); }
double floatSlack(double blockAmax) { return std::ldexp(blockAmax, -20); }

template <typename Block> Block blockAt(const std::vector<uint8_t> &bytes, int64_t index) {
  Block b;
  std::memcpy(&b, bytes.data() + index * int64_t(sizeof(Block)), sizeof(Block));
  return b;
}

/// The largest error each weight may have, from the format's definition (file comment) and the
/// stored fields of `bytes`.
std::vector<double> errorBounds(BlockFormat format, const std::vector<float> &x, const std::vector<uint8_t> &bytes) {
  const q::BlockFormatInfo &info = q::blockFormatInfo(format);
  std::vector<double> bound(x.size());
  for (int64_t block = 0; block < int64_t(x.size()) / info.weightsPerBlock; ++block) {
    const float *xb = x.data() + block * info.weightsPerBlock;
    double *boundOut = bound.data() + block * info.weightsPerBlock;
    double amax = 0;
    for (int64_t i = 0; i < info.weightsPerBlock; ++i)
      amax = std::max(amax, double(std::fabs(xb[i])));
    const double slack = floatSlack(amax);
    switch (format) {
    case BlockFormat::q8_0: {
      const float d = float(amax) / 127.0f;
      const double dh = halfValue(blockAt<q::BlockQ8_0>(bytes, block).d);
      for (int i = 0; i < 32; ++i)
        boundOut[i] = d / 2.0 + 127.0 * std::fabs(d - dh) + slack;
      break;
    }
    case BlockFormat::q4_0: {
      float max = 0;
      for (int i = 0; i < 32; ++i)
        if (std::fabs(xb[i]) > std::fabs(max))
          max = xb[i];
      const float d = max / -8.0f;
      const double dh = halfValue(blockAt<q::BlockQ4_0>(bytes, block).d);
      for (int i = 0; i < 32; ++i) {
        const double steps = d != 0 ? double(xb[i]) / d : 0.0;
        const double nearest = steps > 7.5 ? std::fabs(xb[i] - 7.0 * double(d)) : std::fabs(d) / 2.0;
        boundOut[i] = nearest + 8.0 * std::fabs(d - dh) + slack;
      }
      break;
    }
    case BlockFormat::q4_1: {
      const float min = *std::min_element(xb, xb + 32), max = *std::max_element(xb, xb + 32);
      const float d = (max - min) / 15.0f;
      const auto b = blockAt<q::BlockQ4_1>(bytes, block);
      for (int i = 0; i < 32; ++i)
        boundOut[i] = d / 2.0 + 15.0 * std::fabs(d - halfValue(b.d)) + std::fabs(min - halfValue(b.m)) + slack;
      break;
    }
    case BlockFormat::q5_0: {
      float max = 0;
      for (int i = 0; i < 32; ++i)
        if (std::fabs(xb[i]) > std::fabs(max))
          max = xb[i];
      const float d = max / -16.0f;
      const double dh = halfValue(blockAt<q::BlockQ5_0>(bytes, block).d);
      for (int i = 0; i < 32; ++i) {
        const double steps = d != 0 ? double(xb[i]) / d : 0.0;
        const double nearest = steps > 15.5 ? std::fabs(xb[i] - 15.0 * double(d)) : std::fabs(d) / 2.0;
        boundOut[i] = nearest + 16.0 * std::fabs(d - dh) + slack;
      }
      break;
    }
    case BlockFormat::q5_1: {
      const float min = *std::min_element(xb, xb + 32), max = *std::max_element(xb, xb + 32);
      const float d = (max - min) / 31.0f;
      const auto b = blockAt<q::BlockQ5_1>(bytes, block);
      for (int i = 0; i < 32; ++i)
        boundOut[i] = d / 2.0 + 31.0 * std::fabs(d - halfValue(b.d)) + std::fabs(min - halfValue(b.m)) + slack;
      break;
    }
    case BlockFormat::iq4_nl:
    case BlockFormat::iq4_xs:
    case BlockFormat::iq2_xxs:
    case BlockFormat::iq2_xs:
    case BlockFormat::iq2_s:
    case BlockFormat::iq3_xxs:
    case BlockFormat::iq3_s:
      ADD_FAILURE() << "HELM does not quantize to " << info.name;
      break;
    case BlockFormat::q2_k: {
      const auto b = blockAt<q::BlockQ2K>(bytes, block);
      const double dh = halfValue(b.d), dminh = halfValue(b.dmin);
      const double scaleMove = dh / 2 + 16 * halfError(dh), offsetMove = dminh / 2 + 16 * halfError(dminh);
      for (int j = 0; j < 16; ++j)
        for (int l = 0; l < 16; ++l)
          boundOut[16 * j + l] = dh * (b.scales[j] & 0xF) / 2 + 3.5 * scaleMove + offsetMove + slack;
      break;
    }
    case BlockFormat::q3_k: {
      const auto b = blockAt<q::BlockQ3K>(bytes, block);
      const double dh = halfValue(b.d);
      const double scaleMove = std::fabs(dh) + 33 * halfError(dh);
      for (int j = 0; j < 16; ++j)
        for (int l = 0; l < 16; ++l)
          boundOut[16 * j + l] = std::fabs(dh * (q::q3KScale(b.scales, j) - 32)) + 5 * scaleMove + slack;
      break;
    }
    case BlockFormat::q4_k:
    case BlockFormat::q5_k: {
      const bool q4 = format == BlockFormat::q4_k;
      uint16_t dField, dminField;
      uint8_t scales[12];
      if (q4) {
        const auto b = blockAt<q::BlockQ4K>(bytes, block);
        dField = b.d, dminField = b.dmin;
        std::memcpy(scales, b.scales, 12);
      } else {
        const auto b = blockAt<q::BlockQ5K>(bytes, block);
        dField = b.d, dminField = b.dmin;
        std::memcpy(scales, b.scales, 12);
      }
      const double qmax = q4 ? 15 : 31;
      const double dh = halfValue(dField), dminh = halfValue(dminField);
      const double scaleMove = dh / 2 + 64 * halfError(dh), offsetMove = dminh / 2 + 64 * halfError(dminh);
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, mc;
        q::unpackScaleMin(scales, j, sc, mc);
        for (int l = 0; l < 32; ++l)
          boundOut[32 * j + l] = dh * sc / 2 + (qmax + 0.5) * scaleMove + offsetMove + slack;
      }
      break;
    }
    case BlockFormat::q6_k: {
      const auto b = blockAt<q::BlockQ6K>(bytes, block);
      const double dh = halfValue(b.d);
      const double scaleMove = std::fabs(dh) + 129 * halfError(dh);
      for (int j = 0; j < 16; ++j)
        for (int l = 0; l < 16; ++l)
          boundOut[16 * j + l] = std::fabs(dh * b.scales[j]) + 33 * scaleMove + slack;
      break;
    }
    }
  }
  return bound;
}

struct RoundTrip {
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;
  double maxRelativeError = 0; // max |x - x'| / (block amax), for the report
};

/// Quantizes and dequantizes `x`, expects every weight within its bound, and returns the result.
RoundTrip roundTrip(BlockFormat format, const std::vector<float> &x, const std::string &what) {
  RoundTrip r;
  const int64_t n = int64_t(x.size());
  r.bytes.assign(size_t(*q::rowBytes(format, n)), 0);
  r.decoded.assign(x.size(), 0.0f);
  const q::QuantStatus quantized = q::quantizeRow(format, x.data(), n, r.bytes.data());
  EXPECT_TRUE(quantized.ok()) << what << ": " << quantized.error;
  const q::QuantStatus dequantized = q::dequantizeRow(format, r.bytes.data(), n, r.decoded.data());
  EXPECT_TRUE(dequantized.ok()) << what << ": " << dequantized.error;
  if (!quantized.ok() || !dequantized.ok())
    return r;
  const std::vector<double> bound = errorBounds(format, x, r.bytes);
  const int64_t block = q::blockFormatInfo(format).weightsPerBlock;
  int reported = 0;
  for (int64_t start = 0; start < n; start += block) {
    double amax = 0;
    for (int64_t i = start; i < start + block; ++i)
      amax = std::max(amax, double(std::fabs(x[i])));
    for (int64_t i = start; i < start + block; ++i) {
      const double err = std::fabs(double(x[i]) - double(r.decoded[i]));
      if (amax > 0)
        r.maxRelativeError = std::max(r.maxRelativeError, err / amax);
      if (!(err <= bound[i]) && reported++ < 5)
        ADD_FAILURE() << q::blockFormatInfo(format).name << " " << what << ": element " << i << " = " << x[i]
                      << " decodes to " << r.decoded[i] << ", error " << err << " > bound " << bound[i];
    }
  }
  return r;
}

std::vector<float> randomRow(int64_t n, uint32_t seed, int kind) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-3.0f, 5.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float &v : x) {
    switch (kind) {
    case 0: v = normal(rng); break;
    case 1: v = uniform(rng); break;
    default: { // heavy tails: a Student-t-like ratio, capped so the row stays representable
      const float denominator = std::max(std::fabs(normal(rng)), 0.02f);
      v = normal(rng) / denominator;
    }
    }
  }
  return x;
}

/// A representable value range per format: the largest magnitudes its f16 scale fields allow
/// (q4_1 also stores its minimum in f16; q4_k/q5_k store the offset's scale as dmin).
std::pair<float, float> largestRange(BlockFormat format) {
  switch (format) {
  case BlockFormat::q8_0: return {-65504.0f * 127, 65504.0f * 127};
  case BlockFormat::q4_0: return {-65504.0f * 8, 65504.0f * 7};
  case BlockFormat::q4_1: return {-65504.0f, 65504.0f * 14};
  case BlockFormat::q4_k:
  case BlockFormat::q5_k: return {-4.0e6f, 4.0e6f};
  case BlockFormat::q6_k: return {-2.4e8f, 2.4e8f}; // below 65504 * 128 * 32: the scale search may widen the step
  case BlockFormat::q5_0: return {-65504.0f * 16, 65504.0f * 15};
  case BlockFormat::q5_1: return {-65504.0f, 65504.0f * 30};
  // q2_k: offsets up to 65504 * 15 and steps up to that over codes 0..3, with room for the
  // search's wider steps (down to range / 2.5); q3_k: steps up to 65504 * 32 over codes -4..3,
  // likewise (down to amax / 3.1).
  case BlockFormat::q2_k: return {-6.0e5f, 1.2e6f};
  case BlockFormat::q3_k: return {-6.0e6f, 6.0e6f};
  case BlockFormat::iq4_nl:
  case BlockFormat::iq4_xs:
  case BlockFormat::iq2_xxs:
  case BlockFormat::iq2_xs:
  case BlockFormat::iq2_s:
  case BlockFormat::iq3_xxs:
  case BlockFormat::iq3_s: break; // not quantizable
  }
  return {0, 0};
}

class EveryFormat : public ::testing::TestWithParam<BlockFormat> {};

std::string formatName(const ::testing::TestParamInfo<BlockFormat> &info) {
  return std::string(q::blockFormatInfo(info.param).name);
}

constexpr int64_t kRowLength = 1024; // 4 super-blocks, 32 small blocks

} // namespace

TEST(BlockFormats, TableMatchesGgmlAndLayouts) {
  struct Expected {
    BlockFormat format;
    const char *name;
    int ggmlType;
    int64_t weights, bytes, layoutSize;
    bool quantizable;
  };
  const Expected expected[] = {
      {BlockFormat::q8_0, "q8_0", 8, 32, 34, sizeof(q::BlockQ8_0), true},
      {BlockFormat::q4_0, "q4_0", 2, 32, 18, sizeof(q::BlockQ4_0), true},
      {BlockFormat::q4_1, "q4_1", 3, 32, 20, sizeof(q::BlockQ4_1), true},
      {BlockFormat::q4_k, "q4_k", 12, 256, 144, sizeof(q::BlockQ4K), true},
      {BlockFormat::q5_k, "q5_k", 13, 256, 176, sizeof(q::BlockQ5K), true},
      {BlockFormat::q6_k, "q6_k", 14, 256, 210, sizeof(q::BlockQ6K), true},
      {BlockFormat::q5_0, "q5_0", 6, 32, 22, sizeof(q::BlockQ5_0), true},
      {BlockFormat::q5_1, "q5_1", 7, 32, 24, sizeof(q::BlockQ5_1), true},
      {BlockFormat::iq4_nl, "iq4_nl", 20, 32, 18, sizeof(q::BlockIq4Nl), false},
      {BlockFormat::iq4_xs, "iq4_xs", 23, 256, 136, sizeof(q::BlockIq4Xs), false},
      {BlockFormat::q2_k, "q2_k", 10, 256, 84, sizeof(q::BlockQ2K), true},
      {BlockFormat::q3_k, "q3_k", 11, 256, 110, sizeof(q::BlockQ3K), true},
      {BlockFormat::iq2_xxs, "iq2_xxs", 16, 256, 66, sizeof(q::BlockIq2Xxs), false},
      {BlockFormat::iq2_xs, "iq2_xs", 17, 256, 74, sizeof(q::BlockIq2Xs), false},
      {BlockFormat::iq2_s, "iq2_s", 22, 256, 82, sizeof(q::BlockIq2S), false},
      {BlockFormat::iq3_xxs, "iq3_xxs", 18, 256, 98, sizeof(q::BlockIq3Xxs), false},
      {BlockFormat::iq3_s, "iq3_s", 21, 256, 110, sizeof(q::BlockIq3S), false},
  };
  ASSERT_EQ(q::allBlockFormats().size(), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    const q::BlockFormatInfo &info = q::allBlockFormats()[i];
    EXPECT_EQ(info.format, expected[i].format);
    EXPECT_EQ(&q::blockFormatInfo(expected[i].format), &info);
    EXPECT_EQ(info.name, expected[i].name);
    EXPECT_EQ(info.ggmlType, expected[i].ggmlType);
    EXPECT_EQ(info.weightsPerBlock, expected[i].weights);
    EXPECT_EQ(info.bytesPerBlock, expected[i].bytes);
    EXPECT_EQ(info.bytesPerBlock, expected[i].layoutSize) << info.name << ": layout struct size";
    EXPECT_EQ(info.quantizable, expected[i].quantizable) << info.name;
    EXPECT_EQ(q::parseBlockFormat(expected[i].name), expected[i].format);
  }
  // Field offsets of ggml-common.h.
  EXPECT_EQ(offsetof(q::BlockQ4_1, qs), 4u);
  EXPECT_EQ(offsetof(q::BlockQ4K, scales), 4u);
  EXPECT_EQ(offsetof(q::BlockQ4K, qs), 16u);
  EXPECT_EQ(offsetof(q::BlockQ5K, qh), 16u);
  EXPECT_EQ(offsetof(q::BlockQ5K, qs), 48u);
  EXPECT_EQ(offsetof(q::BlockQ6K, qh), 128u);
  EXPECT_EQ(offsetof(q::BlockQ6K, scales), 192u);
  EXPECT_EQ(offsetof(q::BlockQ6K, d), 208u);
  EXPECT_EQ(offsetof(q::BlockQ5_0, qs), 6u);
  EXPECT_EQ(offsetof(q::BlockQ5_1, qh), 4u);
  EXPECT_EQ(offsetof(q::BlockQ5_1, qs), 8u);
  EXPECT_EQ(offsetof(q::BlockIq4Nl, qs), 2u);
  EXPECT_EQ(offsetof(q::BlockIq4Xs, scalesLow), 4u);
  EXPECT_EQ(offsetof(q::BlockIq4Xs, qs), 8u);
  EXPECT_EQ(offsetof(q::BlockQ2K, qs), 16u);
  EXPECT_EQ(offsetof(q::BlockQ2K, d), 80u);
  EXPECT_EQ(offsetof(q::BlockQ3K, qs), 32u);
  EXPECT_EQ(offsetof(q::BlockQ3K, scales), 96u);
  EXPECT_EQ(offsetof(q::BlockQ3K, d), 108u);
  EXPECT_EQ(offsetof(q::BlockIq2Xs, scales), 66u);
  EXPECT_EQ(offsetof(q::BlockIq2S, signs), 34u);
  EXPECT_EQ(offsetof(q::BlockIq2S, qh), 66u);
  EXPECT_EQ(offsetof(q::BlockIq2S, scales), 74u);
  EXPECT_EQ(offsetof(q::BlockIq3Xxs, scalesAndSigns), 66u);
  EXPECT_EQ(offsetof(q::BlockIq3S, qh), 66u);
  EXPECT_EQ(offsetof(q::BlockIq3S, signs), 74u);
  EXPECT_EQ(offsetof(q::BlockIq3S, scales), 106u);
  for (const char *bad : {"", "Q8_0", "q8", "q4_K", "q8_0 ", "f16"})
    EXPECT_FALSE(q::parseBlockFormat(bad).has_value()) << bad;
}

TEST(BlockFormats, RowLengthIsValidated) {
  std::vector<float> x(512, 1.0f), y(512);
  std::vector<uint8_t> bytes(1024);
  EXPECT_EQ(q::rowBytes(BlockFormat::q8_0, 64), 68);
  EXPECT_EQ(q::rowBytes(BlockFormat::q6_k, 512), 420);
  EXPECT_EQ(q::rowBytes(BlockFormat::q4_0, 0), 0);
  EXPECT_FALSE(q::rowBytes(BlockFormat::q8_0, 33).has_value());
  EXPECT_FALSE(q::rowBytes(BlockFormat::q4_k, 32).has_value());
  EXPECT_FALSE(q::rowBytes(BlockFormat::q4_1, -32).has_value());

  const q::QuantStatus odd = q::quantizeRow(BlockFormat::q8_0, x.data(), 33, bytes.data());
  EXPECT_EQ(odd.error, "q8_0: row length 33 is not a multiple of its block size 32");
  const q::QuantStatus smallK = q::dequantizeRow(BlockFormat::q5_k, bytes.data(), 128, y.data());
  EXPECT_EQ(smallK.error, "q5_k: row length 128 is not a multiple of its block size 256");
  EXPECT_FALSE(q::quantizeRow(BlockFormat::q4_0, x.data(), -32, bytes.data()).ok());
  EXPECT_FALSE(q::quantizeRow(BlockFormat::q4_0, nullptr, 32, bytes.data()).ok());
  EXPECT_FALSE(q::dequantizeRow(BlockFormat::q4_0, bytes.data(), 32, nullptr).ok());
  // An empty row is fine, even without buffers.
  EXPECT_TRUE(q::quantizeRow(BlockFormat::q6_k, nullptr, 0, nullptr).ok());
  EXPECT_TRUE(q::dequantizeRow(BlockFormat::q6_k, nullptr, 0, nullptr).ok());
}

// Hand-built blocks, decoded: the positions of ggml's fields, independent of the quantizer.
TEST(BlockFormats, HandBuiltBlocksDecodeAsGgml) {
  { // Q4_0: byte j = element j (low nibble) | element j + 16 (high nibble); (q - 8) * d.
    q::BlockQ4_0 b{};
    b.d = 0x4000; // 2.0
    for (int j = 0; j < 16; ++j)
      b.qs[j] = uint8_t(j | ((15 - j) << 4));
    float y[32];
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::q4_0, reinterpret_cast<const uint8_t *>(&b), 32, y).ok());
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], 2.0f * float(j - 8));
      EXPECT_EQ(y[j + 16], 2.0f * float(7 - j));
    }
  }
  { // Q4_K: sub-block 5's scale code 0b101101 and min code 0b110010 split over bytes 1, 5 and 9.
    q::BlockQ4K b{};
    b.d = 0x3c00;    // 1.0
    b.dmin = 0x3800; // 0.5
    b.scales[1] = uint8_t(0b10 << 6);           // scale code top bits
    b.scales[5] = uint8_t(0b11 << 6);           // min code top bits
    b.scales[9] = uint8_t(0b1101 | 0b0010 << 4); // low nibbles: scale | min << 4
    b.qs[64 + 7] = uint8_t(9 << 4);             // sub-block 5 = chunk 2 (bytes 64-95), high nibbles; element 7
    std::vector<float> y(256);
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::q4_k, reinterpret_cast<const uint8_t *>(&b), 256, y.data()).ok());
    EXPECT_EQ(y[5 * 32 + 7], 45.0f * 9.0f - 0.5f * 50.0f);
    EXPECT_EQ(y[5 * 32 + 8], -0.5f * 50.0f);
    EXPECT_EQ(y[4 * 32 + 7], 0.0f); // sub-block 4: codes 0 and 0
  }
  { // Q6_K: weight 64 + 128 + 3 (second half, third quarter) = ql[64 + 3] high nibble, qh[32 + 3]
    // bits 4-5; its sub-block is 12 (16 weights each).
    q::BlockQ6K b{};
    b.d = 0x3c00;
    b.scales[12] = -3;
    b.ql[64 + 3] = uint8_t(0xA << 4);
    b.qh[32 + 3] = uint8_t(0x2 << 4);
    std::vector<float> y(256);
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::q6_k, reinterpret_cast<const uint8_t *>(&b), 256, y.data()).ok());
    EXPECT_EQ(y[128 + 64 + 3], -3.0f * float((0xA | 0x2 << 4) - 32));
    EXPECT_EQ(y[128 + 64 + 4], -3.0f * -32.0f); // code 0 is -32
  }
  { // Q5_0: element 21's fifth bit is bit 21 of the little-endian qh word (byte 2, bit 5), its low
    // bits the high nibble of byte 5; (q - 16) * d.
    q::BlockQ5_0 b{};
    b.d = 0x4000; // 2.0
    b.qh[2] = 1 << 5;
    b.qs[5] = uint8_t(0x3 << 4 | 0x9);
    float y[32];
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::q5_0, reinterpret_cast<const uint8_t *>(&b), 32, y).ok());
    EXPECT_EQ(y[21], 2.0f * float((0x3 | 16) - 16));
    EXPECT_EQ(y[5], 2.0f * float(0x9 - 16));
    EXPECT_EQ(y[0], 2.0f * -16.0f);
  }
  { // Q5_1: q * d + m, the fifth bit of element 3 in qh byte 0 bit 3.
    q::BlockQ5_1 b{};
    b.d = 0x3c00;
    b.m = 0xbc00; // -1.0
    b.qh[0] = 1 << 3;
    b.qs[3] = 0x7;
    float y[32];
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::q5_1, reinterpret_cast<const uint8_t *>(&b), 32, y).ok());
    EXPECT_EQ(y[3], 23.0f - 1.0f);
    EXPECT_EQ(y[19], -1.0f);
  }
  { // IQ4_NL: the nibbles index ggml's kvalues_iq4nl; d * value.
    q::BlockIq4Nl b{};
    b.d = 0x3800; // 0.5
    b.qs[0] = uint8_t(0x0 | 0xF << 4);
    b.qs[1] = uint8_t(0x8 | 0x7 << 4);
    float y[32];
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::iq4_nl, reinterpret_cast<const uint8_t *>(&b), 32, y).ok());
    EXPECT_EQ(y[0], 0.5f * -127.0f);
    EXPECT_EQ(y[16], 0.5f * 113.0f);
    EXPECT_EQ(y[1], 0.5f * 1.0f);
    EXPECT_EQ(y[17], 0.5f * -10.0f);
  }
  { // IQ4_XS: sub-block 5's scale: low nibble = scalesLow[2] high nibble, high bits = scalesHigh
    // bits 10-11; value d * (ls - 32) * kvalues[nibble]; its nibbles at qs[80..95].
    q::BlockIq4Xs b{};
    b.d = 0x3c00;
    b.scalesLow[2] = uint8_t(0x6 << 4 | 0xF);
    b.scalesHigh = uint16_t(0x2 << 10);
    b.qs[80 + 4] = uint8_t(0xE << 4 | 0x3);
    std::vector<float> y(256);
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::iq4_xs, reinterpret_cast<const uint8_t *>(&b), 256, y.data()).ok());
    EXPECT_EQ(y[5 * 32 + 4], float((0x6 | 0x2 << 4) - 32) * -65.0f);
    EXPECT_EQ(y[5 * 32 + 20], float((0x6 | 0x2 << 4) - 32) * 89.0f);
    EXPECT_EQ(y[4 * 32 + 0], float(0xF - 32) * -127.0f); // sub-block 4: scalesLow[2]'s low nibble
    EXPECT_EQ(y[0], -32.0f * -127.0f);
  }
  { // Q2_K: sub-block 11 = half 1, t = 1, second 16: bits 2-3 of qs[32 + 16 + l]; scales[11] =
    // scale 5 (low nibble), min 3 (high); d = 1, dmin = 0.5.
    q::BlockQ2K b{};
    b.d = 0x3c00;
    b.dmin = 0x3800;
    b.scales[11] = uint8_t(5 | 3 << 4);
    b.qs[48 + 4] = uint8_t(2 << 2);
    std::vector<float> y(256);
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::q2_k, reinterpret_cast<const uint8_t *>(&b), 256, y.data()).ok());
    EXPECT_EQ(y[11 * 16 + 4], 5.0f * 2.0f - 1.5f);
    EXPECT_EQ(y[11 * 16 + 5], -1.5f);
    EXPECT_EQ(y[10 * 16 + 4], 0.0f); // sub-block 10: scale and min 0
  }
  { // Q3_K: sub-block 13 = half 1, t = 2, second 16: bits 4-5 of qs[32 + 16 + l], the third bit
    // hmask[16 + l] bit 6; scale code 13: low nibble = high nibble of scales[5], top bits = bits
    // 6-7 of scales[9].
    q::BlockQ3K b{};
    b.d = 0x3c00;
    b.scales[5] = uint8_t(0x9 << 4);
    b.scales[9] = uint8_t(0x2 << 6);
    b.qs[48 + 7] = uint8_t(3 << 4);
    b.hmask[16 + 7] = uint8_t(1 << 6);
    std::vector<float> y(256);
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::q3_k, reinterpret_cast<const uint8_t *>(&b), 256, y.data()).ok());
    EXPECT_EQ(y[13 * 16 + 7], float((0x9 | 0x2 << 4) - 32) * 3.0f);       // third bit set: q = 3
    EXPECT_EQ(y[13 * 16 + 8], float((0x9 | 0x2 << 4) - 32) * -4.0f);      // clear: q = 0 - 4
    EXPECT_EQ(y[0], -32.0f * -4.0f);                                       // scale code 0, q = -4
  }
  { // Q5_K: bit 4 of sub-block 3's element 10 is qh[10] bit 3.
    q::BlockQ5K b{};
    b.d = 0x3c00;
    b.scales[3] = 1;
    b.qh[10] = 1 << 3;
    b.qs[32 + 10] = uint8_t(0x7 << 4);
    std::vector<float> y(256);
    ASSERT_TRUE(q::dequantizeRow(BlockFormat::q5_k, reinterpret_cast<const uint8_t *>(&b), 256, y.data()).ok());
    EXPECT_EQ(y[3 * 32 + 10], 23.0f);
  }
}

// ggml's reference rounding, spelled out on blocks with exact scales: q8_0 rounds half away from
// zero (roundf); q4_0 and q4_1 truncate x/d + 8.5 and (x - min)/d + 0.5, so halves go up; the f16
// scale rounds to nearest even.
TEST(BlockFormats, ExactFormatsRoundLikeGgmlReference) {
  auto quantizeBlock = [](BlockFormat format, std::vector<float> x) {
    x.resize(32, 0.0f);
    std::vector<uint8_t> bytes(size_t(q::blockFormatInfo(format).bytesPerBlock));
    EXPECT_TRUE(q::quantizeRow(format, x.data(), 32, bytes.data()).ok());
    return bytes;
  };
  { // amax 127: d = 1 (f16 0x3c00), codes round(x).
    const auto b = blockAt<q::BlockQ8_0>(quantizeBlock(BlockFormat::q8_0, {127, 2.5f, -2.5f, 0.5f, -0.5f, 1.4999999f}), 0);
    EXPECT_EQ(b.d, 0x3c00);
    const int8_t expected[] = {127, 3, -3, 1, -1, 1, 0};
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ(b.qs[i], expected[i]) << i;
  }
  { // d = 1 + 2^-11 and 1 + 3 * 2^-11 are f16 midpoints: to the even neighbours 1 and 1 + 2^-9.
    EXPECT_EQ(blockAt<q::BlockQ8_0>(quantizeBlock(BlockFormat::q8_0, {127.0f * (1.0f + 0x1p-11f)}), 0).d, 0x3c00);
    EXPECT_EQ(blockAt<q::BlockQ8_0>(quantizeBlock(BlockFormat::q8_0, {127.0f * (1.0f + 0x3p-11f)}), 0).d, 0x3c02);
  }
  { // max -8: d = 1, code = min(15, trunc(x + 8.5)).
    const auto b = blockAt<q::BlockQ4_0>(quantizeBlock(BlockFormat::q4_0, {-8, -0.5f, 0.5f, 7.5f, -7.5f, 6.4f}), 0);
    EXPECT_EQ(b.d, 0x3c00);
    const int expected[] = {0, 8, 9, 15, 1, 14, 8};
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ(b.qs[i] & 0xF, expected[i]) << i;
    EXPECT_EQ(b.qs[0] >> 4, 8); // element 16 (zero)
  }
  { // max -16: d = 1, code = min(31, trunc(x + 16.5)), the fifth bit in qh.
    const auto b = blockAt<q::BlockQ5_0>(quantizeBlock(BlockFormat::q5_0, {-16, -0.5f, 0.5f, 15.5f, -15.5f, 14.4f}), 0);
    EXPECT_EQ(b.d, 0x3c00);
    const int expected[] = {0, 16, 17, 31, 1, 30, 16};
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ((b.qs[i] & 0xF) | ((qh >> i) & 1) << 4, expected[i]) << i;
  }
  { // min 0, max 31: d = 1, m = 0, code = trunc(x + 0.5).
    const auto b = blockAt<q::BlockQ5_1>(quantizeBlock(BlockFormat::q5_1, {0, 31, 2.5f, 0.5f, 30.5f, 3.49f}), 0);
    EXPECT_EQ(b.d, 0x3c00);
    EXPECT_EQ(b.m, 0x0000);
    const int expected[] = {0, 31, 3, 1, 31, 3};
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ((b.qs[i] & 0xF) | ((qh >> i) & 1) << 4, expected[i]) << i;
  }
  { // min 0, max 15: d = 1, m = 0, code = min(15, trunc(x + 0.5)).
    const auto b = blockAt<q::BlockQ4_1>(quantizeBlock(BlockFormat::q4_1, {0, 15, 2.5f, 0.5f, 14.5f, 3.49f}), 0);
    EXPECT_EQ(b.d, 0x3c00);
    EXPECT_EQ(b.m, 0x0000);
    const int expected[] = {0, 15, 3, 1, 15, 3};
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(b.qs[i] & 0xF, expected[i]) << i;
  }
}

TEST_P(EveryFormat, RandomRowsWithinBound) {
  static std::map<BlockFormat, double> worst;
  for (uint32_t seed = 1; seed <= 6; ++seed)
    for (int kind = 0; kind < 3; ++kind) {
      const RoundTrip r = roundTrip(GetParam(), randomRow(kRowLength, seed, kind),
                                    "seed " + std::to_string(seed) + " kind " + std::to_string(kind));
      worst[GetParam()] = std::max(worst[GetParam()], r.maxRelativeError);
    }
  std::cout << q::blockFormatInfo(GetParam()).name << ": max |x - x'| / block amax over random rows = "
            << worst[GetParam()] << "\n";
}

TEST_P(EveryFormat, AdversarialRowsWithinBound) {
  const BlockFormat format = GetParam();
  {
    const RoundTrip r = roundTrip(format, std::vector<float>(kRowLength, 0.0f), "all zeros");
    for (float v : r.decoded)
      ASSERT_EQ(v, 0.0f);
  }
  {
    std::vector<float> x = randomRow(kRowLength, 7, 0);
    x[100] = 1.0e4f;
    x[700] = -3.0e4f;
    roundTrip(format, x, "one huge outlier");
  }
  {
    std::vector<float> x = randomRow(kRowLength, 8, 0);
    for (float &v : x)
      v = -std::fabs(v) - 0.5f;
    roundTrip(format, x, "negative only");
  }
  {
    std::vector<float> x(kRowLength, 2.5f);
    roundTrip(format, x, "constant");
  }
  // Tiny values: scales in f16's subnormal range (1e-6), below it (1e-9: the scale rounds to 0),
  // and float subnormals (1e-40: 1/d overflows to infinity in ggml's quantizers).
  for (const float tiny : {1.0e-6f, 1.0e-9f, 1.0e-40f}) {
    std::vector<float> x = randomRow(kRowLength, 9, 0);
    for (float &v : x)
      v *= tiny;
    roundTrip(format, x, "tiny " + std::to_string(tiny));
  }
  {
    const auto [lo, hi] = largestRange(format);
    std::vector<float> x = randomRow(kRowLength, 10, 1);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = i % 32 == 0 ? lo : i % 32 == 1 ? hi : lo + (hi - lo) * (x[i] + 3.0f) / 8.0f;
    roundTrip(format, x, "largest magnitudes");
  }
}

TEST_P(EveryFormat, UnrepresentableInputsAreRefused) {
  const BlockFormat format = GetParam();
  const std::string name(q::blockFormatInfo(format).name);
  std::vector<float> x = randomRow(kRowLength, 11, 0);
  std::vector<uint8_t> bytes(static_cast<size_t>(*q::rowBytes(format, kRowLength)));
  // Twice the largest range: its scale (or q4_1's f16 minimum) overflows f16.
  std::vector<float> big = x;
  big[300] = 2.0f * largestRange(format).first;
  const q::QuantStatus tooBig = q::quantizeRow(format, big.data(), kRowLength, bytes.data());
  const int64_t block = 300 / q::blockFormatInfo(format).weightsPerBlock;
  EXPECT_EQ(tooBig.error.rfind(name + " block " + std::to_string(block) + ": magnitude ", 0), 0u) << tooBig.error;
  EXPECT_EQ(tooBig.error.find('\n'), std::string::npos);
  for (const float bad : {NAN, INFINITY, -INFINITY, 3.0e38f}) {
    std::vector<float> y = x;
    y[5] = bad;
    EXPECT_FALSE(q::quantizeRow(format, y.data(), kRowLength, bytes.data()).ok()) << bad;
  }
  x[5] = NAN;
  EXPECT_EQ(q::quantizeRow(format, x.data(), kRowLength, bytes.data()).error, name + ": element 5 is not finite (nan)");
}

// Blocks are independent: a row quantizes to its blocks' bytes, quantized one block at a time.
TEST_P(EveryFormat, RowIsItsBlocks) {
  const BlockFormat format = GetParam();
  const q::BlockFormatInfo &info = q::blockFormatInfo(format);
  const std::vector<float> x = randomRow(kRowLength, 12, 2);
  std::vector<uint8_t> whole(static_cast<size_t>(*q::rowBytes(format, kRowLength))), pieces(whole.size());
  ASSERT_TRUE(q::quantizeRow(format, x.data(), kRowLength, whole.data()).ok());
  for (int64_t b = 0; b < kRowLength / info.weightsPerBlock; ++b)
    ASSERT_TRUE(q::quantizeRow(format, x.data() + b * info.weightsPerBlock, info.weightsPerBlock,
                               pieces.data() + b * info.bytesPerBlock)
                    .ok());
  EXPECT_EQ(whole, pieces);
}

// The k-quant fits run in vector lanes compiled for each ISA (kernels/common's Isa): the bytes must
// not depend on which one ran, so a package is the same whichever machine compiled it. Rows of every
// kind the fits branch on: random, outliers, one-signed, constant, tiny, and sub-blocks of zeros.
TEST_P(EveryFormat, SameBytesOnEveryIsa) {
  std::vector<std::vector<float>> rows;
  for (uint32_t seed = 1; seed <= 4; ++seed)
    for (int kind = 0; kind < 3; ++kind)
      rows.push_back(randomRow(kRowLength, seed, kind));
  std::vector<float> x = randomRow(kRowLength, 7, 0);
  x[100] = 1.0e4f;
  x[700] = -3.0e4f;
  rows.push_back(x);
  for (float &v : x = randomRow(kRowLength, 8, 0))
    v = -std::fabs(v) - 0.5f;
  rows.push_back(x);
  for (float &v : x = randomRow(kRowLength, 10, 1))
    v = std::fabs(v);
  rows.push_back(x);
  rows.push_back(std::vector<float>(kRowLength, 2.5f));
  rows.push_back(std::vector<float>(kRowLength, -2.5f));
  for (const float tiny : {1.0e-6f, 1.0e-9f, 1.0e-40f}) {
    for (float &v : x = randomRow(kRowLength, 9, 0))
      v *= tiny;
    rows.push_back(x);
  }
  x = randomRow(kRowLength, 11, 0);
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f); // zero sub-blocks inside a super-block
  std::fill(x.begin() + 300, x.begin() + 316, 0.0f);
  rows.push_back(x);

  const BlockFormat format = GetParam();
  const int64_t rowBytes = *q::rowBytes(format, kRowLength);
  auto quantizeAll = [&] {
    std::vector<std::vector<uint8_t>> out;
    for (const auto &row : rows) {
      out.emplace_back(size_t(rowBytes));
      EXPECT_TRUE(q::quantizeRow(format, row.data(), kRowLength, out.back().data()).ok());
    }
    return out;
  };
  ASSERT_TRUE(helm::kernels::setIsaForTesting(helm::kernels::Isa::scalar));
  const auto reference = quantizeAll();
  for (helm::kernels::Isa isa : {helm::kernels::Isa::avx2, helm::kernels::Isa::avx512}) {
    if (!helm::kernels::isaSupported(isa))
      continue;
    ASSERT_TRUE(helm::kernels::setIsaForTesting(isa));
    const auto got = quantizeAll();
    for (size_t r = 0; r < rows.size(); ++r)
      EXPECT_EQ(got[r], reference[r]) << helm::kernels::isaName(isa) << ", row " << r;
  }
  helm::kernels::resetIsaForTesting();
}

INSTANTIATE_TEST_SUITE_P(BlockFormats, EveryFormat,
                         ::testing::Values(BlockFormat::q8_0, BlockFormat::q4_0, BlockFormat::q4_1, BlockFormat::q4_k,
                                           BlockFormat::q5_k, BlockFormat::q6_k, BlockFormat::q5_0, BlockFormat::q5_1,
                                           BlockFormat::q2_k, BlockFormat::q3_k),
                         formatName);

// The formats HELM only reads: quantizeRow refuses them in one line, and EveryFormat (above) covers
// every quantizable one.
TEST(BlockFormats, ReadOnlyFormatsAreRefusedByTheQuantizer) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> bytes(256);
  size_t quantizable = 0;
  for (const q::BlockFormatInfo &info : q::allBlockFormats()) {
    if (info.quantizable) {
      ++quantizable;
      continue;
    }
    const q::QuantStatus status = q::quantizeRow(info.format, x.data(), 256, bytes.data());
    EXPECT_EQ(status.error, std::string(info.name) + ": HELM reads this format from GGUF files but does not quantize to it");
  }
  EXPECT_EQ(quantizable, 10u) << "a quantizable format missing from EveryFormat's list";
}

// The lattices' shape (ggml's): iq2 entries hold the magnitudes 8, 25, 43; iq3_xxs' the 8 values
// 4 + 8 i but 62 for the last; iq3_s' the odd numbers 1..15; no entry twice; the first and last
// entries those of ggml-common.h's iq*_grid tables (read from that file, not from IqGrids.h).
// (check_block_formats.py compares every entry with the gguf package.)
TEST(BlockFormats, LatticesHaveGgmlsShape) {
  auto check = [](const auto &grid, int width, std::initializer_list<int> values, uint64_t first, uint64_t last) {
    std::set<uint64_t> seen;
    for (uint64_t entry : grid) {
      EXPECT_TRUE(seen.insert(entry).second) << std::hex << entry;
      for (int j = 0; j < width; ++j) {
        const int v = int((entry >> (8 * j)) & 0xFF);
        EXPECT_NE(std::find(values.begin(), values.end(), v), values.end()) << std::hex << entry;
      }
    }
    EXPECT_EQ(uint64_t(grid[0]), first);
    EXPECT_EQ(uint64_t(grid[std::size(grid) - 1]), last);
  };
  check(q::kIq2XxsGrid, 8, {8, 25, 43}, 0x0808080808080808ull, 0x2b2b2b1908081908ull);
  check(q::kIq2XsGrid, 8, {8, 25, 43}, 0x0808080808080808ull, 0x2b2b2b2b2b2b2b2bull);
  check(q::kIq2SGrid, 8, {8, 25, 43}, 0x0808080808080808ull, 0x2b2b2b2b2b2b2b2bull);
  check(q::kIq3XxsGrid, 4, {4, 12, 20, 28, 36, 44, 52, 62}, 0x04040404u, 0x3e341c04u);
  check(q::kIq3SGrid, 4, {1, 3, 5, 7, 9, 11, 13, 15}, 0x01010101u, 0x0f0f0101u);
  for (uint32_t i = 0; i < 128; ++i) { // ggml's ksigns_iq2xs: an even count of set bits
    EXPECT_EQ(q::iqSigns(i) & 127, i);
    EXPECT_EQ(std::popcount(unsigned(q::iqSigns(i))) % 2, 0) << i;
  }
  EXPECT_EQ(q::iqSigns(1), 0x81);
  EXPECT_EQ(q::iqSigns(3), 0x03);
}

// One hand-built super-block per iq format, its expected weights written from ggml's
// dequantize_row_iq* (ggml-quants.c), independently of decodeIq.
TEST(BlockFormats, HandBuiltIqBlocksDecodeAsGgml) {
  std::vector<float> y(256);
  auto decode = [&](BlockFormat f, const auto &b) {
    ASSERT_TRUE(q::dequantizeRow(f, reinterpret_cast<const uint8_t *>(&b), 256, y.data()).ok());
  };
  auto byteOf = [](uint64_t entry, int j) { return float((entry >> (8 * j)) & 0xFF); };
  { // IQ2_XXS sub-block 3: qs words 6, 7 (bytes 24..31); group 2's grid index in byte 26, its sign
    // index bits 14..20 of the second word, the scale its top 4 bits; db = d * (0.5 + ls) * 0.25.
    q::BlockIq2Xxs b{};
    b.d = 0x4000; // 2
    b.qs[24 + 2] = 200;
    const uint32_t aux = 5u << 14 | 9u << 28; // signs index 5: bits 0 and 2, parity even
    std::memcpy(b.qs + 28, &aux, 4);
    decode(BlockFormat::iq2_xxs, b);
    const float db = 2.0f * (0.5f + 9.0f) * 0.25f;
    for (int j = 0; j < 8; ++j) {
      const float sign = (j == 0 || j == 2) ? -1.0f : 1.0f;
      EXPECT_EQ(y[96 + 16 + j], db * byteOf(q::kIq2XxsGrid[200], j) * sign) << j;
    }
    EXPECT_EQ(y[96], db * 8.0f); // group 0: index 0, no signs
    EXPECT_EQ(y[0], 2.0f * 0.5f * 0.25f * 8.0f); // sub-block 0: ls 0
  }
  { // IQ2_XS entry 13 (sub-block 3, group 1: first half): index 0x1A5, sign index 0x41 (bits 0 and
    // 6); scales[3] = 0x72: the first 16 weights ls 2, the second 7.
    q::BlockIq2Xs b{};
    b.d = 0x3c00;
    const uint16_t e = uint16_t(0x1A5 | 0x41 << 9);
    std::memcpy(b.qs + 2 * 13, &e, 2);
    b.scales[3] = 0x72;
    decode(BlockFormat::iq2_xs, b);
    for (int j = 0; j < 8; ++j) {
      const float sign = (j == 0 || j == 6) ? -1.0f : 1.0f;
      EXPECT_EQ(y[104 + j], 1.0f * (0.5f + 2.0f) * 0.25f * byteOf(q::kIq2XsGrid[0x1A5], j) * sign) << j;
    }
    EXPECT_EQ(y[112], (0.5f + 7.0f) * 0.25f * 8.0f);
  }
  { // IQ2_S entry 6 (sub-block 1, group 2: second half): index qs[6] | qh[1] bits 4, 5 << 8; sign
    // byte signs[6]; scales[1] = 0xA3.
    q::BlockIq2S b{};
    b.d = 0x3c00;
    b.qs[6] = 0x37;
    b.qh[1] = 0x3 << 4;
    b.signs[6] = 0x81;
    b.scales[1] = 0xA3;
    decode(BlockFormat::iq2_s, b);
    for (int j = 0; j < 8; ++j) {
      const float sign = (j == 0 || j == 7) ? -1.0f : 1.0f;
      EXPECT_EQ(y[48 + j], (0.5f + 10.0f) * 0.25f * byteOf(q::kIq2SGrid[0x337], j) * sign) << j;
    }
    EXPECT_EQ(y[32], (0.5f + 3.0f) * 0.25f * 8.0f);
  }
  { // IQ3_XXS sub-block 2, group 3: grid indices qs[16 + 6], qs[16 + 7]; the word at 64 + 8 holds
    // its sign index (bits 21..27) and ls (top 4 bits); db = d * (0.5 + ls) * 0.5.
    q::BlockIq3Xxs b{};
    b.d = 0x3c00;
    b.qs[22] = 17;
    b.qs[23] = 255;
    const uint32_t aux = 0x7Fu << 21 | 4u << 28; // sign index 127: parity odd, so bit 7 too: all 8
    std::memcpy(b.scalesAndSigns + 8, &aux, 4);
    decode(BlockFormat::iq3_xxs, b);
    const float db = (0.5f + 4.0f) * 0.5f;
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(y[64 + 24 + j], -(db * byteOf(q::kIq3XxsGrid[17], j))) << j;
      EXPECT_EQ(y[64 + 28 + j], -(db * byteOf(q::kIq3XxsGrid[255], j))) << j;
    }
  }
  { // IQ3_S sub-block 5, group 1: grid indices qs[42] | qh[5] bit 2 << 8 and qs[43] | qh[5] bit 3;
    // signs[21]; ls = scales[2]'s high nibble; db = d * (1 + 2 ls).
    q::BlockIq3S b{};
    b.d = 0x3800; // 0.5
    b.qs[42] = 0x10;
    b.qs[43] = 0x20;
    b.qh[5] = 1 << 2; // the first index gets its 9th bit, the second not
    b.signs[21] = 0x10;
    b.scales[2] = 0x60;
    decode(BlockFormat::iq3_s, b);
    const float db = 0.5f * float(1 + 2 * 6);
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(y[160 + 8 + j], db * byteOf(q::kIq3SGrid[0x110], j)) << j;
      EXPECT_EQ(y[160 + 12 + j], db * byteOf(q::kIq3SGrid[0x20], j) * (j == 0 ? -1.0f : 1.0f)) << j;
    }
  }
}
