//===- QuantGemvTest.cpp - kernels/quant: the quantized decode GEMV ------------------===//
//
// (a) every vector path this CPU has returns the scalar reference's bits;
// (b) the scalar reference equals an independent computation (weights from dequantizeRow, the
//     activation quantization re-implemented here in double) within the f32 rounding bound:
//       each block's term(s) round twice (the scale product, then the product with the integer
//       sum), and each lane of the eight partial sums takes at most ceil(blocks / 8) additions per
//       term kind, then 3 more in the final tree, so with u = 2^-24 and depth = (terms per block)
//       * ceil(blocks / 8) + 3:  |y - Y| <= (depth + 4) u * sum_b A_b, where A_b = d_x * sum_j
//       |c_j| (|q_j d_w| + |m_w|) bounds the block's terms (and, for q4_1, the f32 rounding of the
//       dequantized weight q d + m, u |w| per weight);
// (c) against the plain product x . dequant(W): the activation codes c = round(clamp(fl(x / d)))
//     satisfy |x/d - c| <= 1/2 + 127 (1 + 2u) u <= 1/2 + 2^-17 (fl(x/d) is within 127 (1 + 2u) u of
//     x/d; the clamp only removes rounding excess), so |x - c d| <= d (1/2 + 2^-17) per element and
//       |y - x . W| <= sum_b d_b (1/2 + 2^-17) sum_j |w_j| + the bound of (b);
//     the k-quants' terms are bounded the same way from their parts: per weight, w = a - b with
//     a = d sc q (q6_k: d sc (q - 32)) and b = dmin mc (q6_k: 0), decoded here from ggml's layout
//     and checked against dequantizeRow; A_b = d_x sum_j |c_j| (|a_j| + |b_j|), two terms per
//     block for q4_k / q5_k, one for q6_k (whose integer sum may round once when converted);
// (d) M = 1..8 x K in {32, 64, 256, 4096, 4128} x N in {1, 7, 64, 1000}: 1 and 2 threads, and
//     every path, give identical results (the k-quants: the K that are whole super-blocks);
// (e) bad arguments give a one-line error and leave y untouched.
//===------------------------------------------------------------------------------===//
#include "kernels/quant/QuantGemv.h"

#include "kernels/common/Isa.h"
#include "kernels/common/ThreadPool.h"
#include "kernels/quant/BlockFormats.h"
#include "kernels/quant/IqFormats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace q = helm::quant;
namespace k = helm::kernels;
using q::BlockFormat;
using q::QuantPath;

namespace {

constexpr BlockFormat kFormats[] = {BlockFormat::q8_0, BlockFormat::q4_0, BlockFormat::q4_1,  BlockFormat::q4_k,
                                    BlockFormat::q5_k, BlockFormat::q6_k, BlockFormat::q5_0, BlockFormat::q5_1,
                                    BlockFormat::iq4_nl, BlockFormat::iq4_xs, BlockFormat::q2_k, BlockFormat::q3_k,
                                    BlockFormat::iq2_xxs, BlockFormat::iq2_xs, BlockFormat::iq2_s,
                                    BlockFormat::iq3_xxs, BlockFormat::iq3_s};

using q::isIq;
/// The k-quants and iq lattice formats, whose weights are w = a - b per sub-block (kQuantParts).
bool isKQuant(BlockFormat f) {
  return f == BlockFormat::q4_k || f == BlockFormat::q5_k || f == BlockFormat::q6_k || f == BlockFormat::q2_k ||
         f == BlockFormat::q3_k || isIq(f);
}
bool quantizable(BlockFormat f) { return q::blockFormatInfo(f).quantizable; }
/// Whether rows of K weights are whole blocks of f.
bool fits(BlockFormat f, int64_t K) { return K % q::blockFormatInfo(f).weightsPerBlock == 0; }
constexpr QuantPath kPaths[] = {QuantPath::scalar, QuantPath::avx2, QuantPath::avx512vnni};

double halfValue(uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v = exponent == 0 ? std::ldexp(double(mantissa), -24) : std::ldexp(double(1024 + mantissa), exponent - 25);
  return sign ? -v : v;
}

int64_t bytesPerBlock(BlockFormat f) { return q::blockFormatInfo(f).bytesPerBlock; }

/// Raw blocks: every code value (q8_0's -128 included), finite f16 scales of either sign between
/// 2^-10 and 2^6, and for q4_1 a finite f16 min of either sign (k-quants: d and dmin so, every
/// 6-bit or int8 sub-block scale).
std::vector<uint8_t> randomWeights(BlockFormat f, int64_t N, int64_t K, std::mt19937 &rng) {
  const int64_t bs = bytesPerBlock(f), blocks = N * K / q::blockFormatInfo(f).weightsPerBlock;
  std::vector<uint8_t> w(size_t(blocks * bs));
  std::uniform_int_distribution<int> byte(0, 255), exponent(5, 21), mantissa(0, 1023), sign(0, 1);
  auto randomHalf = [&] { return uint16_t((sign(rng) << 15) | (exponent(rng) << 10) | mantissa(rng)); };
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t *p = w.data() + b * bs;
    for (int64_t i = 0; i < bs; ++i)
      p[i] = uint8_t(byte(rng));
    // The f16 fields: d (q6_k at byte 208, q2_k at 80, q3_k at 108, the others first) and a min
    // after it (q4_1, q5_1, q4_k, q5_k, q2_k).
    const int dAt = f == BlockFormat::q6_k ? 208 : f == BlockFormat::q2_k ? 80 : f == BlockFormat::q3_k ? 108 : 0;
    const uint16_t d = randomHalf();
    std::memcpy(p + dAt, &d, 2);
    if (f == BlockFormat::q4_1 || f == BlockFormat::q5_1 || f == BlockFormat::q4_k || f == BlockFormat::q5_k ||
        f == BlockFormat::q2_k) {
      const uint16_t m = randomHalf();
      std::memcpy(p + dAt + 2, &m, 2);
    }
  }
  return w;
}

/// Weights as helmc would write them: quantizeRow of normally distributed rows (for a format helmc
/// does not quantize to, random blocks).
std::vector<uint8_t> quantizedWeights(BlockFormat f, int64_t N, int64_t K, std::mt19937 &rng) {
  if (!quantizable(f))
    return randomWeights(f, N, K, rng);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(K));
  const int64_t rowBytes = *q::rowBytes(f, K);
  std::vector<uint8_t> w(size_t(N * rowBytes));
  for (int64_t n = 0; n < N; ++n) {
    for (float &v : row)
      v = normal(rng);
    EXPECT_TRUE(q::quantizeRow(f, row.data(), K, w.data() + n * rowBytes).ok());
  }
  return w;
}

/// Activations with the cases that matter: normal values, an all-zero block, an outlier block,
/// exact rounding ties (amax 127, so d = 1 and x / d = k + 1/2), tiny and, if `extreme`, subnormal
/// blocks (d subnormal or zero).
std::vector<float> activations(int64_t M, int64_t K, std::mt19937 &rng, bool extreme) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 9), tie(-127, 126);
  std::vector<float> x(size_t(M * K));
  for (int64_t b = 0; b < M * K / 32; ++b) {
    float *xb = x.data() + b * 32;
    const int c = kind(rng);
    for (int j = 0; j < 32; ++j) {
      switch (c) {
      case 0: xb[j] = 0.0f; break;
      case 1: xb[j] = normal(rng) * (j == 7 ? 1000.0f : 1.0f); break;
      case 2: xb[j] = j == 0 ? 127.0f : float(tie(rng)) + 0.5f; break;
      case 3: xb[j] = normal(rng) * (extreme ? 1e-30f : 1e-20f); break;
      case 4: xb[j] = extreme ? normal(rng) * 1e-38f : normal(rng); break;
      case 5: xb[j] = extreme ? normal(rng) * 1e-44f : normal(rng); break;
      default: xb[j] = normal(rng); break;
      }
    }
  }
  return x;
}

struct PathGuard { // restores the ISA choice and the pool size
  ~PathGuard() {
    k::resetIsaForTesting();
    k::setThreads(1);
  }
};

std::vector<float> run(QuantPath path, BlockFormat f, const std::vector<float> &x, int64_t M, int64_t K,
                       const std::vector<uint8_t> &w, int64_t N, int threads) {
  k::setThreads(threads);
  std::vector<float> y(size_t(M * N), -12345.0f);
  std::string error;
  EXPECT_TRUE(q::quantLinearOnPath(path, f, x.data(), M, K, w.data(), N, y.data(), &error)) << error;
  return y;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The first index where a and b differ in bits, for the failure message.
std::string firstDifference(const std::vector<float> &a, const std::vector<float> &b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return "index " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
  return "none";
}

// ---- (b), (c): the independent computation ------------------------------------------------------

/// `v` rounded to f16 (nearest even, 11 significant bits; subnormal halves in steps of 2^-24),
/// written here from the format's definition rather than taken from the library.
double roundToHalfHere(double v) {
  if (v == 0 || !std::isfinite(v))
    return v;
  int e;
  std::frexp(v, &e); // |v| in [2^(e-1), 2^e)
  const double step = std::ldexp(1.0, std::max(e - 11, -24));
  return std::nearbyint(v / step) * step;
}

struct QuantizedBlock { // one activation block re-quantized here, as ggml's q8_0 / q8_1 (in double)
  double dRaw = 0, d = 0, s = 0; // d = amax / 127 (f32), its f16 rounding, f16(dRaw * sum)
  int sum = 0;
  int codes[32] = {};
};

QuantizedBlock quantizeHere(const float *xb) {
  QuantizedBlock qb;
  double amax = 0;
  for (int j = 0; j < 32; ++j)
    amax = std::max(amax, std::fabs(double(xb[j])));
  // f32 division = the double quotient rounded to f32 (double rounding is innocuous for division).
  qb.dRaw = double(float(amax / 127.0));
  qb.d = roundToHalfHere(qb.dRaw);
  if (amax == 0)
    return qb;
  const double id = double(float(127.0 / amax));
  for (int j = 0; j < 32; ++j) {
    // The f32 product: the exact double product of two floats, rounded once.
    const double v = std::clamp(double(float(double(xb[j]) * id)), -127.0, 127.0);
    qb.codes[j] = int(std::nearbyint(v));
    qb.sum += qb.codes[j];
  }
  qb.s = roundToHalfHere(double(float(qb.dRaw * double(qb.sum))));
  return qb;
}

/// What the f16 rounding of d may move each weight's product by, on top of the codes' own rounding
/// (|x - c dRaw| <= dRaw / 2): |c| <= 127 times |d - dRaw| (at most dRaw 2^-11 for a normal half;
/// all of dRaw where it underflows).
double scaleRoundingError(const QuantizedBlock &qb) { return 127.0 * std::fabs(qb.d - qb.dRaw); }

struct Expected {
  double y, bound;
};

/// For row n of w and row m of x: the exact value of the kernel's arithmetic on the codes (from
/// the dequantized weights), its f32 bound (b), and the plain product's value and bound (c).
/// A k-quant row's weights as w = a - b (see (b) above), decoded here from ggml-common.h's layout.
void kQuantParts(BlockFormat f, const uint8_t *row, int64_t K, std::vector<double> &a, std::vector<double> &b) {
  a.assign(size_t(K), 0.0);
  b.assign(size_t(K), 0.0);
  const int64_t bs = bytesPerBlock(f);
  for (int64_t s = 0; s < K / 256; ++s) {
    const uint8_t *blk = row + s * bs;
    double *as = a.data() + s * 256, *bsub = b.data() + s * 256;
    uint16_t dh, mh;
    if (isIq(f)) {
      // ggml-common.h's block_iq*: per 8 weights (iq3: two lattice entries of 4) an index and 8
      // sign bits; a 4-bit scale code ls per 32 (iq2_xs, iq2_s: per 16); the weight is
      // d * factor(ls) * lattice value * sign, factor (0.5 + ls) / 4 (iq2), (0.5 + ls) / 2
      // (iq3_xxs), 1 + 2 ls (iq3_s). The lattices are the library's tables (data, not logic).
      std::memcpy(&dh, blk, 2);
      const double d = halfValue(dh);
      auto word = [&](int at) { return uint32_t(blk[at]) | uint32_t(blk[at + 1]) << 8 | uint32_t(blk[at + 2]) << 16 | uint32_t(blk[at + 3]) << 24; };
      auto parityFilled = [](uint32_t seven) { return seven | (uint32_t(__builtin_popcount(seven)) & 1u) << 7; };
      for (int g = 0; g < 32; ++g) { // group of 8 weights
        const int sub = g / 4, t = g % 4;
        uint64_t lattice = 0;
        uint32_t signs = 0;
        double factor = 0;
        if (f == BlockFormat::iq2_xxs) {
          const uint32_t aux = word(2 + 8 * sub + 4);
          lattice = q::kIq2XxsGrid[blk[2 + 8 * sub + t]];
          signs = parityFilled((aux >> (7 * t)) & 127);
          factor = (0.5 + double(aux >> 28)) / 4;
        } else if (f == BlockFormat::iq2_xs) {
          const int e = blk[2 + 2 * g] | blk[3 + 2 * g] << 8;
          lattice = q::kIq2XsGrid[e & 511];
          signs = parityFilled(uint32_t(e) >> 9);
          factor = (0.5 + double((blk[66 + sub] >> (t < 2 ? 0 : 4)) & 0xF)) / 4;
        } else if (f == BlockFormat::iq2_s) {
          lattice = q::kIq2SGrid[blk[2 + g] | ((blk[66 + sub] >> (2 * t)) & 3) << 8];
          signs = blk[34 + g];
          factor = (0.5 + double((blk[74 + sub] >> (t < 2 ? 0 : 4)) & 0xF)) / 4;
        } else if (f == BlockFormat::iq3_xxs) {
          const uint32_t aux = word(66 + 4 * sub);
          lattice = uint64_t(q::kIq3XxsGrid[blk[2 + 2 * g]]) | uint64_t(q::kIq3XxsGrid[blk[3 + 2 * g]]) << 32;
          signs = parityFilled((aux >> (7 * t)) & 127);
          factor = (0.5 + double(aux >> 28)) / 2;
        } else { // iq3_s: 9-bit indices, the 9th of index i in qh[i / 8] bit i % 8
          const int i0 = 2 * g, i1 = 2 * g + 1;
          lattice = uint64_t(q::kIq3SGrid[blk[2 + i0] | ((blk[66 + i0 / 8] >> (i0 % 8)) & 1) << 8]) |
                    uint64_t(q::kIq3SGrid[blk[2 + i1] | ((blk[66 + i1 / 8] >> (i1 % 8)) & 1) << 8]) << 32;
          signs = blk[74 + g];
          factor = 1.0 + 2.0 * double((blk[106 + sub / 2] >> (4 * (sub % 2))) & 0xF);
        }
        for (int j = 0; j < 8; ++j)
          as[8 * g + j] = d * factor * double((lattice >> (8 * j)) & 0xFF) * ((signs >> j) & 1 ? -1.0 : 1.0);
      }
      continue;
    }
    if (f == BlockFormat::q2_k || f == BlockFormat::q3_k) {
      // Sub-block s = 8n + 2t + h of 16: bits 2t of qs[32n + 16h + l]; q3_k's third bit is
      // hmask[16h + l] bit 4n + t (set: +0, clear: -4) and its 6-bit scale code is split over
      // nibble s / 8 of byte s % 8 and bits 2 (s / 4) of byte 8 + s % 4 of its 12 scale bytes.
      const bool q2 = f == BlockFormat::q2_k;
      std::memcpy(&dh, blk + (q2 ? 80 : 108), 2);
      const double d = halfValue(dh);
      double dmin = 0;
      if (q2) {
        std::memcpy(&mh, blk + 82, 2);
        dmin = halfValue(mh);
      }
      for (int e = 0; e < 256; ++e) {
        const int sub = e / 16, n = sub / 8, t = sub % 8 / 2, h = sub % 2, l = e % 16;
        int code = (blk[(q2 ? 16 : 32) + 32 * n + 16 * h + l] >> (2 * t)) & 3;
        if (q2) {
          as[e] = d * double(blk[sub] & 0xF) * double(code);
          bsub[e] = dmin * double(blk[sub] >> 4);
        } else {
          if (!((blk[16 * h + l] >> (4 * n + t)) & 1))
            code -= 4;
          const uint8_t *sc = blk + 96;
          const int scale = ((sc[sub % 8] >> (4 * (sub / 8))) & 0xF) | (((sc[8 + sub % 4] >> (2 * (sub / 4))) & 3) << 4);
          as[e] = d * double(scale - 32) * double(code);
        }
      }
      continue;
    }
    if (f == BlockFormat::q6_k) {
      std::memcpy(&dh, blk + 208, 2);
      const double d = halfValue(dh);
      for (int e = 0; e < 256; ++e) {
        const int half = e / 128, quarter = e % 128 / 32, l = e % 32;
        const uint8_t lo = blk[64 * half + 32 * (quarter % 2) + l];
        const int low4 = quarter < 2 ? lo & 0xF : lo >> 4;
        const int high2 = (blk[128 + 32 * half + l] >> (2 * quarter)) & 3;
        as[e] = d * double(int8_t(blk[192 + e / 16])) * double((low4 | (high2 << 4)) - 32);
      }
      continue;
    }
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    const double d = halfValue(dh), dmin = halfValue(mh);
    const uint8_t *sc = blk + 4, *qs = blk + (f == BlockFormat::q4_k ? 16 : 48), *qh = blk + 16;
    for (int e = 0; e < 256; ++e) {
      const int sub = e / 32, l = e % 32;
      // ggml's get_scale_min_k4, written out again
      const int scale = sub < 4 ? sc[sub] & 63 : (sc[sub + 4] & 0xF) | ((sc[sub - 4] >> 6) << 4);
      const int min = sub < 4 ? sc[sub + 4] & 63 : (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4);
      int code = sub % 2 == 0 ? qs[32 * (sub / 2) + l] & 0xF : qs[32 * (sub / 2) + l] >> 4;
      if (f == BlockFormat::q5_k)
        code |= ((qh[l] >> sub) & 1) << 4;
      as[e] = d * double(scale) * double(code);
      bsub[e] = dmin * double(min);
    }
  }
}

/// ggml's iq4 grid (kvalues_iq4nl), written out again.
constexpr int kIq4Grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/// Block b (32 weights) of a row of a 32-weight format or of iq4_xs as w_j = code_j * dw + mw,
/// decoded here from ggml-common.h's layouts.
void blockParts(BlockFormat f, const uint8_t *row, int64_t b, double code[32], double &dw, double &mw) {
  auto half = [](const uint8_t *p) { return halfValue(uint16_t(p[0] | (p[1] << 8))); };
  mw = 0;
  if (f == BlockFormat::iq4_xs) {
    const uint8_t *blk = row + b / 8 * 136;
    const int sub = int(b % 8);
    const int scaleHigh = (blk[2] | (blk[3] << 8)) >> (2 * sub) & 3;
    const int scale = ((blk[4 + sub / 2] >> (4 * (sub % 2))) & 0xF) | (scaleHigh << 4);
    dw = half(blk) * double(scale - 32);
    for (int j = 0; j < 16; ++j) {
      code[j] = kIq4Grid[blk[8 + 16 * sub + j] & 0xF];
      code[j + 16] = kIq4Grid[blk[8 + 16 * sub + j] >> 4];
    }
    return;
  }
  const uint8_t *blk = row + b * bytesPerBlock(f);
  dw = half(blk);
  switch (f) {
  case BlockFormat::q8_0:
    for (int j = 0; j < 32; ++j)
      code[j] = double(int8_t(blk[2 + j]));
    return;
  case BlockFormat::q4_0:
  case BlockFormat::q4_1:
  case BlockFormat::iq4_nl: {
    const uint8_t *qs = blk + (f == BlockFormat::q4_1 ? 4 : 2);
    if (f == BlockFormat::q4_1)
      mw = half(blk + 2);
    for (int j = 0; j < 32; ++j) {
      const int nibble = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
      code[j] = f == BlockFormat::iq4_nl ? kIq4Grid[nibble] : f == BlockFormat::q4_0 ? nibble - 8 : nibble;
    }
    return;
  }
  case BlockFormat::q5_0:
  case BlockFormat::q5_1: {
    const uint8_t *qh = blk + (f == BlockFormat::q5_1 ? 4 : 2), *qs = qh + 4;
    if (f == BlockFormat::q5_1)
      mw = half(blk + 2);
    for (int j = 0; j < 32; ++j) {
      const int nibble = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
      const int fifth = (qh[j / 8] >> (j % 8)) & 1;
      code[j] = (nibble | (fifth << 4)) - (f == BlockFormat::q5_0 ? 16 : 0);
    }
    return;
  }
  default: FAIL() << "not a format of 32-weight blocks";
  }
}

void independent(BlockFormat f, const float *x, int64_t K, const uint8_t *row, Expected &quantized,
                 Expected &plain) {
  std::vector<float> wdeq(static_cast<size_t>(K));
  ASSERT_TRUE(q::dequantizeRow(f, row, K, wdeq.data()).ok());
  const double u = std::ldexp(1.0, -24);
  if (isKQuant(f)) {
    std::vector<double> a, b;
    kQuantParts(f, row, K, a, b);
    const int64_t blocks = K / 32;
    const double depth =
        double((f == BlockFormat::q6_k || f == BlockFormat::q3_k || isIq(f) ? 1 : 2) * ((blocks + 7) / 8) + 3);
    // The k-quants' mins (q2_k, q4_k, q5_k) take the exact code sums (times d_x), not the block's
    // f16(d * sum).
    const bool minFromCodes = f == BlockFormat::q2_k || f == BlockFormat::q4_k || f == BlockFormat::q5_k;
    double y = 0, termBound = 0, plainY = 0, activationError = 0;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const QuantizedBlock qb = quantizeHere(x + blk * 32);
      double absW = 0;
      for (int j = 0; j < 32; ++j) {
        const size_t e = size_t(blk * 32 + j);
        // The test's decoding against the library's dequantizer (f32 rounding of d sc q - dmin mc).
        ASSERT_LE(std::fabs(double(wdeq[e]) - (a[e] - b[e])), 4 * u * (std::fabs(a[e]) + std::fabs(b[e])))
            << q::blockFormatInfo(f).name << " element " << e;
        const double w = a[e] - b[e];
        // With the mins from the codes, the min term is d_x times the codes' sum: part of each code's
        // product here.
        y += double(qb.codes[j]) * qb.d * (minFromCodes ? a[e] - b[e] : a[e]);
        termBound += std::fabs(double(qb.codes[j])) * qb.d * (std::fabs(a[e]) + std::fabs(b[e]));
        plainY += double(x[blk * 32 + j]) * w;
        absW += std::fabs(w);
      }
      const double bBlock = minFromCodes ? 0.0 : b[size_t(blk * 32)]; // one min per sub-block of 32 (q6_k: none)
      y -= bBlock * qb.s;
      activationError += (qb.dRaw * (0.5 + std::ldexp(1.0, -17)) + scaleRoundingError(qb)) * absW +
                         std::fabs(bBlock) * std::fabs(qb.s - qb.dRaw * qb.sum);
    }
    quantized = {y, (depth + 4) * u * termBound};
    plain = {plainY, activationError + quantized.bound};
    return;
  }
  const int64_t blocks = K / 32;
  const bool hasMin = f == BlockFormat::q4_1 || f == BlockFormat::q5_1;
  const int termsPerBlock = hasMin ? 2 : 1;
  const double depth = double(termsPerBlock * ((blocks + 7) / 8) + 3);
  double y = 0, termBound = 0, plainY = 0, activationError = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const QuantizedBlock qb = quantizeHere(x + b * 32);
    double code[32], dw, mw;
    blockParts(f, row, b, code, dw, mw);
    double absW = 0;
    for (int j = 0; j < 32; ++j) {
      const double wj = wdeq[size_t(b * 32 + j)];
      // The test's decoding against the library's dequantizer (code * dw + mw rounded to f32).
      ASSERT_LE(std::fabs(wj - (code[j] * dw + mw)), 3 * u * (std::fabs(code[j] * dw) + std::fabs(mw)))
          << q::blockFormatInfo(f).name << " element " << b * 32 + j;
      // |q_j d_w| + |m_w| >= |w_j| (with a min: w_j is q d + m rounded to f32, within u |w_j| of
      // it, which the bound's +4 covers).
      y += double(qb.codes[j]) * qb.d * (code[j] * dw);
      termBound += std::fabs(double(qb.codes[j])) * qb.d * (std::fabs(code[j] * dw) + std::fabs(mw));
      plainY += double(x[b * 32 + j]) * wj;
      absW += std::fabs(wj);
    }
    // q4_1's / q5_1's min term: m_w times the block's f16(d * sum) (ggml's q8_1 s).
    y += mw * qb.s;
    activationError += (qb.dRaw * (0.5 + std::ldexp(1.0, -17)) + scaleRoundingError(qb)) * absW +
                       std::fabs(mw) * std::fabs(qb.s - qb.dRaw * qb.sum);
  }
  quantized = {y, (depth + 4) * u * termBound};
  plain = {plainY, activationError + quantized.bound};
}

// ---- tests --------------------------------------------------------------------------------------

TEST(QuantGemv, PathChoiceFollowsTheIsa) {
  PathGuard guard;
  ASSERT_TRUE(k::setIsaForTesting(k::Isa::scalar));
  EXPECT_EQ(q::activeQuantPath(), QuantPath::scalar);
  if (k::setIsaForTesting(k::Isa::avx2)) {
    EXPECT_EQ(q::activeQuantPath(), QuantPath::avx2);
  }
  if (k::setIsaForTesting(k::Isa::avx512)) {
    EXPECT_EQ(q::activeQuantPath(),
              q::quantPathSupported(QuantPath::avx512vnni) ? QuantPath::avx512vnni : QuantPath::avx2);
  }
  EXPECT_STREQ(q::quantPathName(QuantPath::avx512vnni), "avx512vnni");
}

TEST(QuantGemv, SmallExactExample) {
  // d_x = 1 (amax 127), integer x; q8_0 weights with d = 1 (f16 0x3c00): y is the integer dot product.
  PathGuard guard;
  std::vector<float> x(64);
  std::vector<uint8_t> w(2 * 34);
  int64_t expected = 0;
  for (int j = 0; j < 64; ++j) {
    x[size_t(j)] = j == 0 ? 127.0f : float((j * 37) % 255 - 127);
    const int8_t code = int8_t((j * 91) % 256 - 128); // -128 included
    w[size_t(j / 32 * 34 + 2 + j % 32)] = uint8_t(code);
    expected += int64_t(x[size_t(j)]) * code;
  }
  const uint16_t one = 0x3c00;
  std::memcpy(&w[0], &one, 2);
  std::memcpy(&w[34], &one, 2);
  for (QuantPath path : kPaths) {
    if (!q::quantPathSupported(path))
      continue;
    const std::vector<float> y = run(path, BlockFormat::q8_0, x, 1, 64, w, 1, 1);
    EXPECT_EQ(double(y[0]), double(expected)) << q::quantPathName(path);
  }
}

// (a)
void expectPathEqualsScalar(QuantPath path) {
  PathGuard guard;
  std::mt19937 rng(11);
  for (BlockFormat f : kFormats)
    // The AVX-512 path takes up to 16 rows a call, and keeps the rows of 16-row calls in quads;
    // those calls run K in chunks of 4 groups of 256 (2304, 2336: three chunks, the last partial)
    // over slices of 32 weight rows (N = 33: two slices).
    for (int64_t M : {1, 2, 3, 5, 8, 11, 16, 21, 32, 37})
      for (int64_t K : {32, 64, 96, 256, 288, 768, 1056, 2304, 2336})
        for (int64_t N : {1, 7, 33}) {
          if (!fits(f, K))
            continue;
          const std::vector<float> x = activations(M, K, rng, true);
          for (bool raw : {true, false}) {
            const std::vector<uint8_t> w = raw ? randomWeights(f, N, K, rng) : quantizedWeights(f, N, K, rng);
            const std::vector<float> ref = run(QuantPath::scalar, f, x, M, K, w, N, 1);
            const std::vector<float> got = run(path, f, x, M, K, w, N, 1);
            ASSERT_TRUE(sameBits(ref, got))
                << q::quantPathName(path) << " " << q::blockFormatInfo(f).name << " M " << M << " K " << K << " N "
                << N << (raw ? " raw" : " quantized") << ": " << firstDifference(ref, got);
          }
        }
}

TEST(QuantGemv, Avx2EqualsScalarReference) {
  if (!q::quantPathSupported(QuantPath::avx2))
    GTEST_SKIP() << "this CPU lacks AVX2+FMA+F16C";
  expectPathEqualsScalar(QuantPath::avx2);
}

TEST(QuantGemv, Avx512VnniEqualsScalarReference) {
  if (!q::quantPathSupported(QuantPath::avx512vnni))
    GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL + VNNI";
  expectPathEqualsScalar(QuantPath::avx512vnni);
}

// (a) at the integer ranges' edges: every activation code +-127 and every weight code at its
// largest (q4_k 15, q5_k 31, q6_k 63: the largest u8 x s8 pairs any path forms in int16), q6_k's
// int8 scales -128 and 127, q4_k / q5_k's 6-bit scales and mins 63. x = +-127/128 makes the
// activation scale exactly 2^-7, so every partial sum below is exact in f32: each path must give
// the value computed here in double, which the scalar reference gives too.
TEST(QuantGemv, IntegerRangeEdgesAreExactOnEveryPath) {
  PathGuard guard;
  constexpr int64_t K = 512, supers = K / 256, N = 3;
  for (BlockFormat f : {BlockFormat::q4_k, BlockFormat::q5_k, BlockFormat::q6_k}) {
    const int64_t bs = bytesPerBlock(f);
    std::vector<uint8_t> w(size_t(N * supers * bs), 0xFF); // every code bit set: the largest codes
    double perCode[N];                                      // y / (sign * 127 * 2^-7 * codes) per row
    const uint16_t one = 0x3c00, half = 0x3800;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < supers; ++s) {
        uint8_t *p = w.data() + (n * supers + s) * bs;
        if (f == BlockFormat::q6_k) {
          // Row 0: every scale -128; row 1: 127; row 2: -128 and 127 in turn. d = 1.
          for (int i = 0; i < 16; ++i)
            p[192 + i] = uint8_t(int8_t(n == 0 ? -128 : n == 1 ? 127 : i % 2 ? 127 : -128));
          std::memcpy(p + 208, &one, 2);
          perCode[n] = 31.0 * (n == 0 ? -128.0 : n == 1 ? 127.0 : -0.5); // (q - 32) * mean scale
        } else {
          // 0xFF scale bytes: every 6-bit scale and min is 63; d = 1, dmin = 1/2.
          std::memcpy(p, &one, 2);
          std::memcpy(p + 2, &half, 2);
          perCode[n] = 63.0 * (f == BlockFormat::q4_k ? 15.0 : 31.0);
        }
      }
    for (float sign : {1.0f, -1.0f}) {
      const std::vector<float> x(size_t(3 * K), sign * 127.0f / 128.0f); // 3 rows: a pair and one alone
      for (QuantPath path : kPaths) {
        if (!q::quantPathSupported(path))
          continue;
        const std::vector<float> y = run(path, f, x, 3, K, w, N, 1);
        for (int64_t m = 0; m < 3; ++m)
          for (int64_t n = 0; n < N; ++n) {
            // Codes sign * 127, activation scale 2^-7; q4_k / q5_k subtract dmin * min * (d * sum)
            // = 0.5 * 63 * sign * 31.75 per block of 32.
            double want = sign * (perCode[n] * 127.0 / 128.0) * double(K);
            if (f != BlockFormat::q6_k)
              want -= sign * 0.5 * 63.0 * 31.75 * double(K / 32);
            EXPECT_EQ(double(y[size_t(m * N + n)]), want)
                << q::quantPathName(path) << " " << q::blockFormatInfo(f).name << " x " << sign << " m " << m
                << " row " << n;
          }
      }
    }
  }
}

// (a) at the iq formats' integer edges: the largest lattice magnitude (iq3_xxs' 62, which the
// vector paths hold as 126 after their offset of 64: u8 x s8 pairs of 2 * 126 * 127) against
// activation codes of +-127, with either sign, and the largest scale code. x = 127/128 makes the
// activation scale 2^-7 and every partial sum exact: each path must give the double value.
TEST(QuantGemv, IqLatticeEdgesAreExactOnEveryPath) {
  PathGuard guard;
  int best = 0, bestCount = -1; // the iq3_xxs entry with the most 62s
  for (int i = 0; i < 256; ++i) {
    int count = 0;
    for (int j = 0; j < 4; ++j)
      count += ((q::kIq3XxsGrid[i] >> (8 * j)) & 0xFF) == 62;
    if (count > bestCount)
      best = i, bestCount = count;
  }
  ASSERT_GE(bestCount, 1);
  constexpr int64_t K = 256, N = 3;
  std::vector<uint8_t> w(size_t(N * 98), 0);
  for (int64_t n = 0; n < N; ++n) {
    uint8_t *p = w.data() + n * 98;
    const uint16_t d = 0x3c00;
    std::memcpy(p, &d, 2);
    std::memset(p + 2, best, 64);
    for (int j = 0; j < 8; ++j) {
      // Row 0: no signs, ls 0; row 1: every sign (index 127, parity bit too), ls 0; row 2: no
      // signs, ls 15.
      const uint32_t aux = (n == 1 ? 0x0FFFFFFFu : 0u) | (n == 2 ? 15u << 28 : 0u);
      std::memcpy(p + 66 + 4 * j, &aux, 4);
    }
  }
  std::vector<float> x(static_cast<size_t>(K));
  for (int64_t i = 0; i < K; ++i)
    x[size_t(i)] = i % 3 == 0 ? -127.0f / 128.0f : 127.0f / 128.0f;
  std::vector<float> wdeq(static_cast<size_t>(K));
  for (QuantPath path : kPaths) {
    if (!q::quantPathSupported(path))
      continue;
    const std::vector<float> y = run(path, BlockFormat::iq3_xxs, x, 1, K, w, N, 1);
    for (int64_t n = 0; n < N; ++n) {
      ASSERT_TRUE(q::dequantizeRow(BlockFormat::iq3_xxs, w.data() + n * 98, K, wdeq.data()).ok());
      double expected = 0;
      for (int64_t i = 0; i < K; ++i)
        expected += double(x[size_t(i)]) * double(wdeq[size_t(i)]);
      EXPECT_EQ(double(y[size_t(n)]), expected) << q::quantPathName(path) << " row " << n;
    }
  }
}

TEST(QuantGemv, NonFiniteActivationsGiveNanRows) {
  PathGuard guard;
  std::mt19937 rng(5);
  const int64_t M = 3, N = 9;
  for (BlockFormat f : kFormats) {
    const int64_t K = q::blockFormatInfo(f).weightsPerBlock == 256 ? 256 : 96;
    std::vector<float> x = activations(M, K, rng, false);
    x[size_t(1 * K + 40)] = std::numeric_limits<float>::infinity();
    x[size_t(2 * K + 3)] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<uint8_t> w = randomWeights(f, N, K, rng);
    for (QuantPath path : kPaths) {
      if (!q::quantPathSupported(path))
        continue;
      const std::vector<float> y = run(path, f, x, M, K, w, N, 1);
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_TRUE(std::isfinite(y[size_t(n)])) << q::quantPathName(path);
        EXPECT_TRUE(std::isnan(y[size_t(N + n)])) << q::quantPathName(path);
        EXPECT_TRUE(std::isnan(y[size_t(2 * N + n)])) << q::quantPathName(path);
      }
    }
  }
}

// A row whose length is not a whole group of 8 blocks ends in a partial group that the vector
// paths read in place, the next row's first blocks included; those must not count, even when
// their scales are infinite or NaN. M = 16 and 19 run the AVX-512 path's 16-row kernel too.
TEST(QuantGemv, PartialLastGroupIgnoresTheNextRow) {
  PathGuard guard;
  std::mt19937 rng(11);
  for (BlockFormat f : {BlockFormat::q8_0, BlockFormat::q4_0, BlockFormat::q4_1, BlockFormat::q5_0, BlockFormat::q5_1,
                        BlockFormat::iq4_nl})
    for (int64_t M : {3, 16, 19})
      for (int64_t K : {64, 576, 4128}) { // 2 blocks (no whole group), 2 groups + 2, 16 groups + 1
        const int64_t N = 5, rowBytes = *q::rowBytes(f, K);
        const std::vector<float> x = activations(M, K, rng, false);
        std::vector<uint8_t> w = quantizedWeights(f, N, K, rng);
        const std::vector<float> clean = run(QuantPath::scalar, f, x, M, K, w, N, 1);
        // Rows 1..N-1: every block's f16 d (and q4_1's m) becomes +inf or NaN; row 0's outputs must
        // not change, and no path may differ from the scalar reference on any row.
        const int64_t blockBytes = q::blockFormatInfo(f).bytesPerBlock;
        for (int64_t n = 1; n < N; ++n)
          for (int64_t b = 0; b < K / 32; ++b) {
            uint8_t *blk = w.data() + n * rowBytes + b * blockBytes;
            const uint16_t special = (n + b) % 2 ? 0x7c00 : 0x7e00;
            std::memcpy(blk, &special, 2);
            if (f == BlockFormat::q4_1 || f == BlockFormat::q5_1)
              std::memcpy(blk + 2, &special, 2);
          }
        const std::vector<float> reference = run(QuantPath::scalar, f, x, M, K, w, N, 1);
        for (int64_t m = 0; m < M; ++m)
          EXPECT_EQ(std::memcmp(&reference[size_t(m * N)], &clean[size_t(m * N)], sizeof(float)), 0)
              << q::blockFormatInfo(f).name << " K = " << K << " row of x " << m;
        for (QuantPath path : kPaths) {
          if (!q::quantPathSupported(path))
            continue;
          for (int threads : {1, 2}) {
            const std::vector<float> y = run(path, f, x, M, K, w, N, threads);
            // Rows 1.. have infinite / NaN scales: their outputs are NaN or infinite, and which NaN
            // (its sign) depends on operand order, which the IEEE rules leave open; every other
            // output, row 0's included, must match in bits.
            for (size_t i = 0; i < y.size(); ++i) {
              if (!(std::isnan(y[i]) && std::isnan(reference[i]))) {
                EXPECT_EQ(std::memcmp(&y[i], &reference[i], sizeof(float)), 0)
                    << q::quantPathName(path) << " " << q::blockFormatInfo(f).name << " M = " << M << " K = " << K
                    << " index " << i << ": " << y[i] << " vs " << reference[i];
              }
            }
          }
        }
      }
}

// (b) and (c)
TEST(QuantGemv, ScalarReferenceMatchesIndependentComputation) {
  PathGuard guard;
  std::mt19937 rng(3);
  double worstB = 0, worstC = 0; // observed error / bound
  for (BlockFormat f : kFormats)
    for (int64_t K : {32, 256, 4128, 4096})
      for (bool raw : {true, false}) {
        if (!fits(f, K))
          continue;
        const int64_t M = 3, N = 17;
        const std::vector<float> x = activations(M, K, rng, false);
        const std::vector<uint8_t> w = raw ? randomWeights(f, N, K, rng) : quantizedWeights(f, N, K, rng);
        const std::vector<float> y = run(QuantPath::scalar, f, x, M, K, w, N, 1);
        const int64_t rowBytes = *q::rowBytes(f, K);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            Expected quantized{}, plain{};
            independent(f, x.data() + m * K, K, w.data() + n * rowBytes, quantized, plain);
            const double got = y[size_t(m * N + n)];
            ASSERT_LE(std::fabs(got - quantized.y), quantized.bound)
                << "(b) " << q::blockFormatInfo(f).name << " K " << K << " m " << m << " n " << n;
            ASSERT_LE(std::fabs(got - plain.y), plain.bound)
                << "(c) " << q::blockFormatInfo(f).name << " K " << K << " m " << m << " n " << n;
            if (quantized.bound > 0)
              worstB = std::max(worstB, std::fabs(got - quantized.y) / quantized.bound);
            if (plain.bound > 0)
              worstC = std::max(worstC, std::fabs(got - plain.y) / plain.bound);
          }
      }
  std::cout << "worst error / bound: (b) " << worstB << ", (c) " << worstC << "\n";
}

// (d)
TEST(QuantGemv, ThreadsAndPathsGiveIdenticalResults) {
  PathGuard guard;
  std::mt19937 rng(17);
  for (BlockFormat f : kFormats)
    for (int64_t K : {32, 64, 256, 4096, 4096 + 32})
      for (int64_t N : {1, 7, 64, 1000}) {
        if (!fits(f, K))
          continue;
        const std::vector<uint8_t> w = randomWeights(f, N, K, rng);
        for (int64_t M = 1; M <= 8; ++M) {
          const std::vector<float> x = activations(M, K, rng, false);
          const std::vector<float> ref = run(QuantPath::scalar, f, x, M, K, w, N, 1);
          for (QuantPath path : kPaths) {
            if (!q::quantPathSupported(path))
              continue;
            for (int threads : {1, 2}) {
              if (path == QuantPath::scalar && threads == 1)
                continue;
              const std::vector<float> got = run(path, f, x, M, K, w, N, threads);
              ASSERT_TRUE(sameBits(ref, got))
                  << q::quantPathName(path) << " " << threads << " threads " << q::blockFormatInfo(f).name << " M "
                  << M << " K " << K << " N " << N << ": " << firstDifference(ref, got);
            }
          }
        }
      }
}

// (e)
TEST(QuantGemv, BadArgumentsAreOneLineErrors) {
  std::vector<float> x(64, 1.0f), y(4, 7.0f);
  std::vector<uint8_t> w(4 * 34);
  auto expectError = [&](BlockFormat f, int64_t M, int64_t K, int64_t N, const char *fragment) {
    std::string error;
    EXPECT_FALSE(q::quantLinear(f, x.data(), M, K, w.data(), N, y.data(), &error));
    EXPECT_NE(error.find(fragment), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return v == 7.0f; }));
    EXPECT_FALSE(q::quantLinear(f, x.data(), M, K, w.data(), N, y.data(), nullptr)); // no error string
  };
  expectError(BlockFormat::q8_0, 1, 33, 2, "K = 33 is not a multiple of the block size 32");
  expectError(BlockFormat::q4_0, 1, 48, 2, "K = 48");
  expectError(BlockFormat::q4_1, 1, -32, 2, "K = -32");
  expectError(BlockFormat::q4_k, 1, 288, 1, "K = 288 is not a multiple of the block size 256 (q4_k)");
  expectError(BlockFormat::q6_k, 1, 32, 1, "K = 32 is not a multiple of the block size 256 (q6_k)");
  expectError(BlockFormat::iq4_xs, 1, 96, 1, "K = 96 is not a multiple of the block size 256 (iq4_xs)");
  expectError(BlockFormat::q5_1, 1, 40, 1, "K = 40 is not a multiple of the block size 32 (q5_1)");
  expectError(BlockFormat::q8_0, -1, 32, 2, "negative size");
  std::string error;
  EXPECT_FALSE(q::quantLinear(BlockFormat::q8_0, nullptr, 1, 32, w.data(), 2, y.data(), &error));
  EXPECT_NE(error.find("null buffer"), std::string::npos) << error;
  // K = 0: y = 0; M or N = 0: nothing.
  EXPECT_TRUE(q::quantLinear(BlockFormat::q8_0, x.data(), 2, 0, w.data(), 2, y.data(), &error));
  EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return v == 0.0f; }));
  EXPECT_TRUE(q::quantLinear(BlockFormat::q8_0, nullptr, 0, 32, nullptr, 5, nullptr, &error));
}

} // namespace
