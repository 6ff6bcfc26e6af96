//===- BlockFormats.cpp - GGUF / ggml block formats --------------------------------===//
#include "kernels/quant/BlockFormats.h"

#include "contract/helm_contract.h"

#include "kernels/common/Isa.h"
#include "kernels/common/Numeric.h"
#include "kernels/quant/IqFormats.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cstddef>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace helm::quant {

namespace {

// The table is the contract's (HELM_BLOCK_FORMATS), in its order, which is BlockFormat's; the
// layouts below must have its sizes.
#define HELM_QUANT_FORMAT_ROW(NAME, CODE, name, ggml, weights, bytes, quantizable)                                              \
  {BlockFormat(CODE - HELM_DTYPE_Q8_0), name, ggml, weights, bytes, quantizable != 0},
constexpr BlockFormatInfo kFormats[] = {HELM_BLOCK_FORMATS(HELM_QUANT_FORMAT_ROW)};
#undef HELM_QUANT_FORMAT_ROW
static_assert(std::size(kFormats) == size_t(BlockFormat::iq3_s) + 1, "one row per BlockFormat");
static_assert(kFormats[int(BlockFormat::q8_0)].name == "q8_0" && kFormats[int(BlockFormat::q4_0)].name == "q4_0" &&
                  kFormats[int(BlockFormat::q4_1)].name == "q4_1" && kFormats[int(BlockFormat::q4_k)].name == "q4_k" &&
                  kFormats[int(BlockFormat::q5_k)].name == "q5_k" && kFormats[int(BlockFormat::q6_k)].name == "q6_k" &&
                  kFormats[int(BlockFormat::q5_0)].name == "q5_0" && kFormats[int(BlockFormat::q5_1)].name == "q5_1" &&
                  kFormats[int(BlockFormat::iq4_nl)].name == "iq4_nl" &&
                  kFormats[int(BlockFormat::iq4_xs)].name == "iq4_xs" &&
                  kFormats[int(BlockFormat::q2_k)].name == "q2_k" && kFormats[int(BlockFormat::q3_k)].name == "q3_k" &&
                  kFormats[int(BlockFormat::iq2_xxs)].name == "iq2_xxs" &&
                  kFormats[int(BlockFormat::iq2_xs)].name == "iq2_xs" && kFormats[int(BlockFormat::iq2_s)].name == "iq2_s" &&
                  kFormats[int(BlockFormat::iq3_xxs)].name == "iq3_xxs" && kFormats[int(BlockFormat::iq3_s)].name == "iq3_s",
              "BlockFormat's order is the contract table's");
static_assert([] {
  for (size_t i = 0; i < std::size(kFormats); ++i)
    if (kFormats[i].format != BlockFormat(i))
      return false;
  return true;
}(), "the table's codes follow one another");
static_assert(sizeof(BlockQ8_0) == kFormats[int(BlockFormat::q8_0)].bytesPerBlock &&
              sizeof(BlockQ4_0) == kFormats[int(BlockFormat::q4_0)].bytesPerBlock &&
              sizeof(BlockQ4_1) == kFormats[int(BlockFormat::q4_1)].bytesPerBlock &&
              sizeof(BlockQ4K) == kFormats[int(BlockFormat::q4_k)].bytesPerBlock &&
              sizeof(BlockQ5K) == kFormats[int(BlockFormat::q5_k)].bytesPerBlock &&
              sizeof(BlockQ6K) == kFormats[int(BlockFormat::q6_k)].bytesPerBlock &&
              sizeof(BlockQ5_0) == kFormats[int(BlockFormat::q5_0)].bytesPerBlock &&
              sizeof(BlockQ5_1) == kFormats[int(BlockFormat::q5_1)].bytesPerBlock &&
              sizeof(BlockIq4Nl) == kFormats[int(BlockFormat::iq4_nl)].bytesPerBlock &&
              sizeof(BlockIq4Xs) == kFormats[int(BlockFormat::iq4_xs)].bytesPerBlock &&
              sizeof(BlockQ2K) == kFormats[int(BlockFormat::q2_k)].bytesPerBlock &&
              sizeof(BlockQ3K) == kFormats[int(BlockFormat::q3_k)].bytesPerBlock &&
              sizeof(BlockIq2Xxs) == kFormats[int(BlockFormat::iq2_xxs)].bytesPerBlock &&
              sizeof(BlockIq2Xs) == kFormats[int(BlockFormat::iq2_xs)].bytesPerBlock &&
              sizeof(BlockIq2S) == kFormats[int(BlockFormat::iq2_s)].bytesPerBlock &&
              sizeof(BlockIq3Xxs) == kFormats[int(BlockFormat::iq3_xxs)].bytesPerBlock &&
              sizeof(BlockIq3S) == kFormats[int(BlockFormat::iq3_s)].bytesPerBlock,
              "the layouts have the contract table's sizes");

constexpr int kSuperBlock = 256;

// Every format's largest representable magnitude (largest f16 times the largest scale code times
// the largest quant code, e.g. Q6_K's 65504 * 128 * 32 ~ 2.7e8) is below this. A block beyond it is
// refused before any arithmetic, so the scale search's sums of squares and cubes stay finite.
constexpr float kBeyondEveryFormat = 4294967296.0f; // 2^32

float fromHalf(uint16_t h) { return kernels::halfToFloat(h); }
// ggml stores scales with GGML_FP32_TO_FP16: round to nearest even, as Numeric's floatToHalf.
uint16_t toHalf(float f) { return kernels::floatToHalf(f); }
bool halfIsFinite(uint16_t h) { return (h & 0x7c00) != 0x7c00; }

/// ggml's nearest_int (round half to even) with the result clamped to [lo, hi]. The clamp happens
/// in float first, so a huge, infinite or NaN argument (NaN gives lo) never reaches the integer
/// conversion, which would be undefined.
///
/// Branch-free and without a libm call, so the quantizers' per-weight loops vectorize: after the
/// clamp |v| <= |lo| or |hi| (far below 2^22), where adding 1.5 * 2^23 leaves the nearest integer,
/// ties to even, in the low mantissa bits: exactly nearbyint in the default rounding mode.
inline int nearestClamped(float v, int lo, int hi) {
  v = v > float(lo) ? v : float(lo); // NaN fails the comparison: lo
  v = v < float(hi) ? v : float(hi);
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

/// ggml's `MIN(top, (int8_t)(v))` for the Q4_0/Q4_1/Q5_0/Q5_1 codes (v = x * id + 8.5 or + 0.5,
/// in [0, top + 1.5] for finite id): truncation toward zero, capped at top (15 or 31). Also 0 for
/// NaN and negatives, which occur only when 1/d overflowed (float-subnormal d; f16(d) is then 0 and
/// the codes decode to zero).
int truncatedCode(float v, int top) {
  if (!(v >= 0.0f))
    return 0;
  if (v >= float(top))
    return top;
  return int(v);
}

/// ggml's roundf for Q8_0 (half away from zero), clamped to the int8 codes ±127.
int roundedQ8(float v) {
  if (std::isnan(v))
    return 0;
  return int(std::round(std::clamp(v, -127.0f, 127.0f)));
}

template <typename Block> Block loadBlock(const uint8_t *p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}
template <typename Block> void storeBlock(const Block &b, uint8_t *p) { std::memcpy(p, &b, sizeof(Block)); }

std::string formatFloat(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// The error for a block whose f16 scale field overflowed (or that is beyond every format).
std::string tooLargeError(BlockFormat format, int64_t block, const float *x, int64_t count) {
  float amax = 0;
  for (int64_t i = 0; i < count; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  return std::string(blockFormatInfo(format).name) + " block " + std::to_string(block) + ": magnitude " +
         formatFloat(amax) + " needs a scale beyond f16's largest (65504); the format cannot represent it";
}

// ---- q8_0, q4_0, q4_1: ggml's reference quantizers, operation for operation ------------------
// (the float expressions keep ggml's order; the library is built with -ffp-contract=off so none
// is fused into an FMA, which would change the rounding).

bool quantizeQ8_0(const float *x, uint8_t *out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j)
    amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f; // ggml multiplies by 1/d, not divides by d
  BlockQ8_0 b;
  b.d = toHalf(d);
  for (int j = 0; j < 32; ++j)
    b.qs[j] = int8_t(roundedQ8(x[j] * id));
  storeBlock(b, out);
  return halfIsFinite(b.d);
}

/// ggml's q4_0 / q5_0 reference codes (levels 16 / 32): the signed value of largest magnitude (the
/// first one on ties) maps to code 0, i.e. d = max / -(levels / 2); code = min(levels - 1,
/// trunc(x / d + levels / 2 + 0.5)).
float symmetricCodes(const float *x, int levels, int codes[32]) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -float(levels / 2);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float offset = float(levels / 2) + 0.5f; // 8.5 / 16.5, exact
  for (int j = 0; j < 32; ++j)
    codes[j] = truncatedCode(x[j] * id + offset, levels - 1);
  return d;
}

/// ggml's q4_1 / q5_1 reference codes (levels 16 / 32): d = (max - min) / (levels - 1), m = min,
/// code = trunc((x - min) / d + 0.5), capped at levels - 1 (q5_1's reference has no cap: the codes
/// stay below 32 for x <= max).
void affineCodes(const float *x, int levels, int codes[32], float &d, float &min) {
  float max = -FLT_MAX;
  min = FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  d = (max - min) / float(levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j)
    codes[j] = truncatedCode((x[j] - min) * id + 0.5f, levels - 1);
}

/// Q4_0 / Q4_1: byte j holds code j (low nibble) and code j + 16 (high nibble).
void packCodes(const int codes[32], uint8_t qs[16]) {
  for (int j = 0; j < 16; ++j)
    qs[j] = uint8_t(codes[j] | (codes[j + 16] << 4));
}

/// Q5_0 / Q5_1: the 32 five-bit codes into the nibbles and the qh word.
void packCodes(const int codes[32], uint8_t qs[16], uint8_t qh[4]) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = uint8_t((codes[j] & 0xF) | ((codes[j + 16] & 0xF) << 4));
    high |= uint32_t((codes[j] >> 4) & 1) << j;
    high |= uint32_t((codes[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh, &high, sizeof high);
}
void packCodes(const int codes[32], BlockQ4_0 &b) { packCodes(codes, b.qs); }
void packCodes(const int codes[32], BlockQ4_1 &b) { packCodes(codes, b.qs); }
void packCodes(const int codes[32], BlockQ5_0 &b) { packCodes(codes, b.qs, b.qh); }
void packCodes(const int codes[32], BlockQ5_1 &b) { packCodes(codes, b.qs, b.qh); }

/// q4_0 (16 levels) and q5_0 (32 levels).
template <typename Block, int Levels> bool quantizeSymmetric(const float *x, uint8_t *out) {
  int codes[32];
  Block b;
  b.d = toHalf(symmetricCodes(x, Levels, codes));
  packCodes(codes, b);
  storeBlock(b, out);
  return halfIsFinite(b.d);
}

/// q4_1 (16 levels) and q5_1 (32 levels).
template <typename Block, int Levels> bool quantizeAffine(const float *x, uint8_t *out) {
  int codes[32];
  float d, min;
  affineCodes(x, Levels, codes, d, min);
  Block b;
  b.d = toHalf(d);
  b.m = toHalf(min);
  packCodes(codes, b);
  storeBlock(b, out);
  return halfIsFinite(b.d) && halfIsFinite(b.m);
}

// ---- k-quants ----------------------------------------------------------------------------------

/// An affine sub-block fit x ~ scale * q - offset with q in [0, qmax], scale >= 0, offset >= 0
/// (offset is ggml's "min", stored negated so that its 6-bit code is unsigned).
struct AffineFit {
  float scale = 0.0f;
  float offset = 0.0f;
};

// The k-quant fits search each sub-block on its own, with the same arithmetic for every one: they
// run all sub-blocks of a super-block side by side, one vector lane each (GCC vector types: the
// lanes of a V are `Lanes` sub-blocks, and xt[i] holds weight i of each). Each lane does exactly
// the operations of a loop over one sub-block, in its order (its sums add weight 0, 1, 2, ...),
// and every vector operation rounds lane by lane as the scalar one does, so the codes do not
// depend on the vector width the compiler picks or on the CPU that runs helmc. Where a loop over
// one sub-block would stop early, a lane computes on and its result is not taken.
//
// The fits are compiled three times, for AVX-512, AVX2 and baseline x86-64 (fitAffineOnIsa and
// fitSymmetric16 pick one by kernels::activeIsa()); the vector helpers are always inlined into
// them, so no vector value crosses a call (GCC's -Wpsabi notes about the vector ABI of such calls
// do not apply and are silenced here). No contraction into fused multiply-adds (the library is
// built with -ffp-contract=off): every ISA rounds each operation alike.
#pragma GCC diagnostic ignored "-Wpsabi"
using Floats8 = float __attribute__((vector_size(32)));
using Floats16 = float __attribute__((vector_size(64)));
#define HELM_LANES [[gnu::always_inline]] inline
#define HELM_LANES_LAMBDA __attribute__((always_inline))

template <class V> HELM_LANES V splat(float f) { return V{} + f; }
template <class V> HELM_LANES V absolute(V v) { return v < V{} ? -v : v; } // fabs but for -0.0f and NaN, which no comparison here tells apart
template <class V> HELM_LANES V minimum(V a, V b) { return b < a ? b : a; } // std::min(a, b)
template <class V> HELM_LANES V maximum(V a, V b) { return a < b ? b : a; } // std::max(a, b)
/// float(nearestClamped(v, lo, hi)) per lane: the clamp (NaN gives lo), then the 1.5 * 2^23 shift
/// that leaves the nearest integer, ties to even, and back; both additions are exact.
template <class V> HELM_LANES V nearestClampedLanes(V v, float lo, float hi) {
  v = v > splat<V>(lo) ? v : splat<V>(lo);
  v = v < splat<V>(hi) ? v : splat<V>(hi);
  return (v + 12582912.0f) - 12582912.0f;
}
/// |v| <= FLT_MAX: false for infinities and NaN (std::isfinite).
template <class V> HELM_LANES auto finiteLanes(V v) { return absolute(v) <= splat<V>(FLT_MAX); }

/// ggml's make_qkx2_quants in spirit: start from the min/max fit, then try nstep + 1 slightly
/// different step counts, refit scale and low end by weighted least squares on each one's codes,
/// and keep the smallest weighted squared error. Unlike ggml, a refit is only kept when its codes
/// still reach the sub-block's extremes within half a step: ggml may clip an outlier to lower
/// the weighted error, which leaves no bound on one weight's error (docs/quantization.md).
/// Returns each lane's scale and offset (the negated low end).
template <class V, int N>
HELM_LANES void fitAffine(const V (&xt)[N], const V (&wt)[N], int qmax, float rmin, float rdelta, int nstep,
                          V &scaleOut, V &offsetOut) {
  V dataMin = xt[0], dataMax = xt[0], sumW{}, sumX{};
  for (int i = 0; i < N; ++i) {
    dataMin = minimum(dataMin, xt[i]);
    dataMax = maximum(dataMax, xt[i]);
    sumW += wt[i];
    sumX += wt[i] * xt[i];
  }
  const V q = splat<V>(float(qmax));
  // Weighted squared error of every lane against scale * q + low, q the nearest code.
  auto error = [&](V scale, V low) HELM_LANES_LAMBDA {
    V err{};
    for (int i = 0; i < N; ++i) {
      const V code = nearestClampedLanes((xt[i] - low) / scale, 0.0f, float(qmax));
      const V diff = scale * code + low - xt[i];
      err += wt[i] * diff * diff;
    }
    return err;
  };
  // The low end is never above zero: the offset code is unsigned.
  const V lowEnd = minimum(dataMin, V{});
  V bestScale = (dataMax - lowEnd) / q, bestLow = lowEnd;
  V bestError = error(bestScale, lowEnd);
  for (int step = 0; step <= nstep; ++step) {
    const V iscale = (rmin + rdelta * float(step) + float(qmax)) / (dataMax - lowEnd);
    V sumL{}, sumL2{}, sumXL{};
    for (int i = 0; i < N; ++i) {
      const V code = nearestClampedLanes(iscale * (xt[i] - lowEnd), 0.0f, float(qmax));
      sumL += wt[i] * code;
      sumL2 += wt[i] * code * code;
      sumXL += wt[i] * code * xt[i];
    }
    const V det = sumW * sumL2 - sumL * sumL;
    V scale = (sumW * sumXL - sumX * sumL) / det;
    V low = (sumL2 * sumX - sumL * sumXL) / det;
    const auto lowAboveZero = low > V{};
    scale = lowAboveZero ? sumXL / sumL2 : scale;
    low = lowAboveZero ? V{} : low;
    const auto coversData = (dataMin >= low - 0.5f * scale) & (dataMax <= low + (float(qmax) + 0.5f) * scale);
    const auto usable = (det > V{}) & (scale > V{}) & finiteLanes(scale) & finiteLanes(low) & coversData;
    const V err = error(scale, low);
    const auto better = usable & (err < bestError);
    bestError = better ? err : bestError;
    bestScale = better ? scale : bestScale;
    bestLow = better ? low : bestLow;
  }
  // A constant non-positive sub-block: the offset alone represents it.
  const auto constant = dataMax == lowEnd;
  scaleOut = constant ? V{} : bestScale;
  offsetOut = -(constant ? lowEnd : bestLow);
}

#define HELM_FIT_AVX2 __attribute__((target("avx2,fma")))
#define HELM_FIT_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

template <class V, int N>
void fitAffineScalar(const V (&xt)[N], const V (&wt)[N], int qmax, float rmin, float rdelta, int nstep, V &scale,
                     V &offset) {
  fitAffine(xt, wt, qmax, rmin, rdelta, nstep, scale, offset);
}
template <class V, int N>
HELM_FIT_AVX2 void fitAffineAvx2(const V (&xt)[N], const V (&wt)[N], int qmax, float rmin, float rdelta, int nstep,
                                 V &scale, V &offset) {
  fitAffine(xt, wt, qmax, rmin, rdelta, nstep, scale, offset);
}
template <class V, int N>
HELM_FIT_AVX512 void fitAffineAvx512(const V (&xt)[N], const V (&wt)[N], int qmax, float rmin, float rdelta,
                                     int nstep, V &scale, V &offset) {
  fitAffine(xt, wt, qmax, rmin, rdelta, nstep, scale, offset);
}
/// fitAffine compiled for the CPU's ISA: the eight sub-blocks of 32 of a Q4_K / Q5_K super-block,
/// or the sixteen of 16 of a Q2_K one.
template <class V, int N>
void fitAffineOnIsa(const V (&xt)[N], const V (&wt)[N], int qmax, float rmin, float rdelta, int nstep, V &scale,
                    V &offset) {
  switch (kernels::activeIsa()) {
  case kernels::Isa::avx512: return fitAffineAvx512(xt, wt, qmax, rmin, rdelta, nstep, scale, offset);
  case kernels::Isa::avx2: return fitAffineAvx2(xt, wt, qmax, rmin, rdelta, nstep, scale, offset);
  case kernels::Isa::scalar: break;
  }
  fitAffineScalar(xt, wt, qmax, rmin, rdelta, nstep, scale, offset);
}

/// The sub-block fits of a Q4_K / Q5_K super-block packed into d, dmin and the 12 scale bytes;
/// `codes` gets each weight's q in [0, qmax] for the stored (rounded) scales. False when d or
/// dmin overflows f16.
bool quantizeAffineSuperBlock(const float *x, int qmax, float rmin, float rdelta, int nstep, uint16_t &dField,
                              uint16_t &dminField, uint8_t packed[12], uint8_t codes[kSuperBlock]) {
  // The eight sub-blocks of 32 side by side, with ggml's weights: the sub-block's RMS plus each
  // weight's magnitude.
  Floats8 xt[32], wt[32];
  for (int j = 0; j < 8; ++j) {
    const float *sub = x + 32 * j;
    float sumSquares = 0.0f;
    for (int l = 0; l < 32; ++l)
      sumSquares += sub[l] * sub[l];
    const float rms = std::sqrt(sumSquares / 32.0f);
    for (int l = 0; l < 32; ++l) {
      xt[l][j] = sub[l];
      wt[l][j] = rms + std::fabs(sub[l]);
    }
  }
  Floats8 scales, offsets;
  fitAffineOnIsa(xt, wt, qmax, rmin, rdelta, nstep, scales, offsets);
  AffineFit fits[8];
  float maxScale = 0.0f, maxOffset = 0.0f;
  for (int j = 0; j < 8; ++j) {
    fits[j] = {scales[j], offsets[j]};
    maxScale = std::max(maxScale, fits[j].scale);
    maxOffset = std::max(maxOffset, fits[j].offset);
  }
  // 6-bit codes relative to the largest sub-block scale and offset.
  const float invScale = maxScale > 0.0f ? 63.0f / maxScale : 0.0f;
  const float invOffset = maxOffset > 0.0f ? 63.0f / maxOffset : 0.0f;
  std::memset(packed, 0, 12);
  uint8_t scaleCodes[8], offsetCodes[8];
  for (int j = 0; j < 8; ++j) {
    const uint8_t sc = uint8_t(nearestClamped(invScale * fits[j].scale, 0, 63));
    const uint8_t mc = uint8_t(nearestClamped(invOffset * fits[j].offset, 0, 63));
    scaleCodes[j] = sc;
    offsetCodes[j] = mc;
    if (j < 4) {
      packed[j] |= sc;
      packed[j + 4] |= mc;
    } else {
      packed[j + 4] = uint8_t((sc & 0xF) | ((mc & 0xF) << 4));
      packed[j - 4] |= uint8_t((sc >> 4) << 6);
      packed[j] |= uint8_t((mc >> 4) << 6);
    }
  }
  dField = toHalf(maxScale / 63.0f);
  dminField = toHalf(maxOffset / 63.0f);
  if (!halfIsFinite(dField) || !halfIsFinite(dminField))
    return false;
  // The codes for the scales as stored (f16 times the 6-bit code), nearest in [0, qmax].
  const float d = fromHalf(dField), dmin = fromHalf(dminField);
  for (int j = 0; j < 8; ++j) {
    const float scale = d * float(scaleCodes[j]);
    const float offset = dmin * float(offsetCodes[j]);
    for (int l = 0; l < 32; ++l)
      codes[32 * j + l] = scale == 0.0f ? 0 : uint8_t(nearestClamped((x[32 * j + l] + offset) / scale, 0, qmax));
  }
  return true;
}

bool quantizeQ4K(const float *x, uint8_t *out) {
  BlockQ4K b;
  uint8_t codes[kSuperBlock];
  // ggml's Q4_K search parameters: 21 step counts from qmax - 1 to qmax + 1.
  const bool ok = quantizeAffineSuperBlock(x, 15, -1.0f, 0.1f, 20, b.d, b.dmin, b.scales, codes);
  for (int chunk = 0; chunk < 4; ++chunk)
    for (int l = 0; l < 32; ++l)
      b.qs[32 * chunk + l] = uint8_t(codes[64 * chunk + l] | (codes[64 * chunk + 32 + l] << 4));
  storeBlock(b, out);
  return ok;
}

bool quantizeQ5K(const float *x, uint8_t *out) {
  BlockQ5K b;
  uint8_t codes[kSuperBlock];
  // ggml's Q5_K search parameters: 16 step counts from qmax - 0.5 to qmax + 1.
  const bool ok = quantizeAffineSuperBlock(x, 31, -0.5f, 0.1f, 15, b.d, b.dmin, b.scales, codes);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t lowSub = codes[64 * chunk + l], highSub = codes[64 * chunk + 32 + l];
      b.qs[32 * chunk + l] = uint8_t((lowSub & 0xF) | ((highSub & 0xF) << 4));
      b.qh[l] |= uint8_t(((lowSub >> 4) << (2 * chunk)) | ((highSub >> 4) << (2 * chunk + 1)));
    }
  }
  storeBlock(b, out);
  return ok;
}

/// The Q6_K and Q3_K sub-block fit (ggml's make_qx_quants with squared-magnitude weights, in
/// spirit): a signed scale s with x ~ s * q, q in [-qmax, qmax - 1] (qmax 32 for Q6_K, 4 for Q3_K).
/// The start maps the value of largest magnitude to q = -qmax (so s has the opposite sign); refits
/// by weighted least squares for 19 step counts around qmax are kept when they lower the weighted
/// error and still reach every weight within one step (the start itself may clamp the opposite
/// extreme, +qmax steps, to qmax - 1). All 16 sub-blocks of 16 side by side, as fitAffine's lanes.
HELM_LANES void fitSymmetric(const Floats16 (&xt)[16], int qmax, Floats16 &scales) {
  constexpr int N = 16;
  using V = Floats16;
  V amax{}, max{};
  for (int i = 0; i < N; ++i) {
    const auto larger = absolute(xt[i]) > amax;
    amax = larger ? absolute(xt[i]) : amax;
    max = larger ? xt[i] : max;
  }
  // Weighted error and largest error of every lane for scale s.
  auto errors = [&](V s, V &maxError) HELM_LANES_LAMBDA {
    V err{};
    maxError = V{};
    for (int i = 0; i < N; ++i) {
      const V diff = xt[i] - s * nearestClampedLanes(xt[i] / s, -float(qmax), float(qmax - 1));
      err += xt[i] * xt[i] * diff * diff;
      maxError = maximum(maxError, absolute(diff));
    }
    return err;
  };
  V best = -max / float(qmax), maxError;
  V bestError = errors(best, maxError);
  for (int step = -9; step <= 9; ++step) {
    const V iscale = -(float(qmax) + 0.1f * float(step)) / max;
    V sumXL{}, sumL2{};
    for (int i = 0; i < N; ++i) {
      const V code = nearestClampedLanes(iscale * xt[i], -float(qmax), float(qmax - 1));
      const V w = xt[i] * xt[i];
      sumXL += w * xt[i] * code;
      sumL2 += w * code * code;
    }
    const V s = sumXL / sumL2;
    const V error = errors(s, maxError);
    const auto better = (sumL2 > V{}) & (s != V{}) & finiteLanes(s) & (error < bestError) &
                        (maxError <= absolute(s));
    bestError = better ? error : bestError;
    best = better ? s : best;
  }
  scales = amax < splat<V>(1e-30f) ? V{} : best; // ggml treats a tiny maximum as all zero
}

void fitSymmetric16Scalar(const Floats16 (&xt)[16], int qmax, Floats16 &scales) {
  fitSymmetric(xt, qmax, scales);
}
HELM_FIT_AVX2 void fitSymmetric16Avx2(const Floats16 (&xt)[16], int qmax, Floats16 &scales) {
  fitSymmetric(xt, qmax, scales);
}
HELM_FIT_AVX512 void fitSymmetric16Avx512(const Floats16 (&xt)[16], int qmax, Floats16 &scales) {
  fitSymmetric(xt, qmax, scales);
}
/// fitSymmetric of the 16 sub-blocks of 16 of a Q6_K or Q3_K super-block, for the CPU's ISA.
void fitSymmetric16(const Floats16 (&xt)[16], int qmax, Floats16 &scales) {
  switch (kernels::activeIsa()) {
  case kernels::Isa::avx512: return fitSymmetric16Avx512(xt, qmax, scales);
  case kernels::Isa::avx2: return fitSymmetric16Avx2(xt, qmax, scales);
  case kernels::Isa::scalar: break;
  }
  fitSymmetric16Scalar(xt, qmax, scales);
}

/// The 16 sub-blocks of 16 of a super-block side by side (xt[l][j] = weight l of sub-block j).
void transposeSixteens(const float *x, Floats16 (&xt)[16]) {
  for (int j = 0; j < 16; ++j)
    for (int l = 0; l < 16; ++l)
      xt[l][j] = x[16 * j + l];
}

/// The 2-bit code planes of Q2_K and Q3_K: weight 128n + 32t + 16h + l (n, h < 2, t < 4, l < 16)
/// is bits 2t..2t+1 of qs[32n + 16h + l].
void packTwoBitCodes(const uint8_t codes[kSuperBlock], uint8_t qs[64]) {
  std::memset(qs, 0, 64);
  for (int i = 0; i < kSuperBlock; ++i) {
    const int n = i / 128, t = i % 128 / 32, rest = i % 32;
    qs[32 * n + rest] |= uint8_t((codes[i] & 3) << (2 * t));
  }
}

/// Q6_K's 6-bit codes into ql/qh. Per 128 weights (half h): ql[64h + l] holds weight l (low
/// nibble) and l + 64 (high nibble), ql[64h + 32 + l] weights l + 32 and l + 96; qh[32h + l]
/// holds the top 2 bits of weights l, l + 32, l + 64, l + 96 at bits 0, 2, 4, 6.
void packQ6K(const uint8_t codes[kSuperBlock], BlockQ6K &b) {
  for (int half = 0; half < 2; ++half) {
    const uint8_t *q = codes + 128 * half;
    for (int l = 0; l < 32; ++l) {
      b.ql[64 * half + l] = uint8_t((q[l] & 0xF) | ((q[l + 64] & 0xF) << 4));
      b.ql[64 * half + 32 + l] = uint8_t((q[l + 32] & 0xF) | ((q[l + 96] & 0xF) << 4));
      b.qh[32 * half + l] =
          uint8_t((q[l] >> 4) | ((q[l + 32] >> 4) << 2) | ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
    }
  }
}

/// The sub-block scales of a Q6_K or Q3_K super-block: fitSymmetric's fits (weight codes in
/// [-qmax, qmax - 1]) as signed codes in [-scaleMax, scaleMax - 1] relative to the fit of largest
/// magnitude, which becomes -scaleMax; d (f16) is the step of those codes.
struct SymmetricScales {
  bool zero = false; // every fit is 0: an all-zero super-block, stored as zeros
  uint16_t d = 0;
  int codes[16] = {};
};

SymmetricScales symmetricScales(const float *x, int qmax, int scaleMax) {
  Floats16 xt[16];
  transposeSixteens(x, xt);
  Floats16 fitted;
  fitSymmetric16(xt, qmax, fitted);
  float maxScale = 0.0f, maxAbsScale = 0.0f;
  for (int j = 0; j < 16; ++j)
    if (std::fabs(fitted[j]) > maxAbsScale) {
      maxAbsScale = std::fabs(fitted[j]);
      maxScale = fitted[j];
    }
  SymmetricScales scales;
  if (maxAbsScale == 0.0f) {
    scales.zero = true;
    return scales;
  }
  const float iscale = -float(scaleMax) / maxScale;
  scales.d = toHalf(1.0f / iscale);
  for (int j = 0; j < 16; ++j)
    scales.codes[j] = nearestClamped(iscale * fitted[j], -scaleMax, scaleMax - 1);
  return scales;
}

/// Each weight's code for its sub-block's scale as stored (f16 d times the scale code): the
/// nearest in [-qmax, qmax - 1], plus qmax (qmax itself, a zero weight, where the scale is 0).
void symmetricCodes(const float *x, const SymmetricScales &scales, int qmax, uint8_t codes[kSuperBlock]) {
  const float d = fromHalf(scales.d);
  for (int j = 0; j < 16; ++j) {
    const float scale = d * float(scales.codes[j]);
    for (int l = 0; l < 16; ++l)
      codes[16 * j + l] =
          scale == 0.0f ? uint8_t(qmax) : uint8_t(nearestClamped(x[16 * j + l] / scale, -qmax, qmax - 1) + qmax);
  }
}

bool quantizeQ6K(const float *x, uint8_t *out) {
  // int8 scale codes: the largest becomes -128 (the sign flips so that d > 0).
  const SymmetricScales scales = symmetricScales(x, 32, 128);
  BlockQ6K b;
  std::memset(&b, 0, sizeof b);
  if (scales.zero) {
    storeBlock(b, out);
    return true;
  }
  b.d = scales.d;
  for (int j = 0; j < 16; ++j)
    b.scales[j] = int8_t(scales.codes[j]);
  if (!halfIsFinite(b.d)) {
    storeBlock(b, out);
    return false;
  }
  uint8_t codes[kSuperBlock];
  symmetricCodes(x, scales, 32, codes);
  packQ6K(codes, b);
  storeBlock(b, out);
  return true;
}

/// Q2_K: per sub-block of 16 an affine fit (ggml's make_qkx2_quants with magnitude weights and
/// its Q2_K search: 16 step counts from qmax - 0.5), codes q in [0, 3]; scales and offsets as
/// 4-bit codes relative to the largest of each (d = max scale / 15, dmin = max offset / 15), the
/// scale in the low and the offset in the high nibble of scales[j]; each weight's code the nearest
/// for the stored scale and offset.
bool quantizeQ2K(const float *x, uint8_t *out) {
  Floats16 xt[16], wt[16];
  transposeSixteens(x, xt);
  for (int l = 0; l < 16; ++l)
    wt[l] = absolute(xt[l]);
  Floats16 fitScales, fitOffsets;
  fitAffineOnIsa(xt, wt, 3, -0.5f, 0.1f, 15, fitScales, fitOffsets);
  float maxScale = 0.0f, maxOffset = 0.0f;
  for (int j = 0; j < 16; ++j) {
    maxScale = std::max(maxScale, fitScales[j]);
    maxOffset = std::max(maxOffset, fitOffsets[j]);
  }
  BlockQ2K b;
  const float invScale = maxScale > 0.0f ? 15.0f / maxScale : 0.0f;
  const float invOffset = maxOffset > 0.0f ? 15.0f / maxOffset : 0.0f;
  for (int j = 0; j < 16; ++j)
    b.scales[j] = uint8_t(nearestClamped(invScale * fitScales[j], 0, 15) |
                          (nearestClamped(invOffset * fitOffsets[j], 0, 15) << 4));
  b.d = toHalf(maxScale / 15.0f);
  b.dmin = toHalf(maxOffset / 15.0f);
  const bool ok = halfIsFinite(b.d) && halfIsFinite(b.dmin);
  const float d = fromHalf(b.d), dmin = fromHalf(b.dmin);
  uint8_t codes[kSuperBlock];
  for (int j = 0; j < 16; ++j) {
    const float scale = d * float(b.scales[j] & 0xF), offset = dmin * float(b.scales[j] >> 4);
    for (int l = 0; l < 16; ++l)
      codes[16 * j + l] = scale == 0.0f ? 0 : uint8_t(nearestClamped((x[16 * j + l] + offset) / scale, 0, 3));
  }
  packTwoBitCodes(codes, b.qs);
  storeBlock(b, out);
  return ok;
}

/// Q3_K: per sub-block of 16 a symmetric fit (as Q6_K's with q in [-4, 3]); 6-bit signed scale
/// codes relative to the scale of largest magnitude, which becomes code -32, stored + 32 (q3KScale's
/// layout); each weight's code the nearest for the stored scale, its low 2 bits in qs and the
/// third in hmask (bit i / 32 of hmask[i % 32] for weight i; the code is q + 4).
bool quantizeQ3K(const float *x, uint8_t *out) {
  const SymmetricScales scales = symmetricScales(x, 4, 32);
  BlockQ3K b;
  std::memset(&b, 0, sizeof b);
  if (scales.zero) { // codes 0 decode to zero too, with d = 0
    storeBlock(b, out);
    return true;
  }
  for (int j = 0; j < 16; ++j) {
    const int stored = scales.codes[j] + 32;
    b.scales[j % 8] |= uint8_t((stored & 0xF) << (4 * (j / 8)));
    b.scales[8 + j % 4] |= uint8_t((stored >> 4) << (2 * (j / 4)));
  }
  b.d = scales.d;
  if (!halfIsFinite(b.d)) {
    storeBlock(b, out);
    return false;
  }
  uint8_t codes[kSuperBlock];
  symmetricCodes(x, scales, 4, codes);
  for (int i = 0; i < kSuperBlock; ++i)
    if (codes[i] > 3)
      b.hmask[i % 32] |= uint8_t(1 << (i / 32));
  packTwoBitCodes(codes, b.qs);
  storeBlock(b, out);
  return true;
}

// ---- dequantization: ggml's dequantize_row_*, same operations in the same order ---------------

void dequantizeQ8_0(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ8_0>(in);
  const float d = fromHalf(b.d);
  for (int j = 0; j < 32; ++j)
    y[j] = float(b.qs[j]) * d;
}

void dequantizeQ4_0(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ4_0>(in);
  const float d = fromHalf(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = float((b.qs[j] & 0xF) - 8) * d;
    y[j + 16] = float((b.qs[j] >> 4) - 8) * d;
  }
}

void dequantizeQ4_1(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ4_1>(in);
  const float d = fromHalf(b.d), m = fromHalf(b.m);
  for (int j = 0; j < 16; ++j) {
    y[j] = float(b.qs[j] & 0xF) * d + m;
    y[j + 16] = float(b.qs[j] >> 4) * d + m;
  }
}

/// Q5_0 / Q5_1 element j's five-bit code.
int fiveBitCode(const uint8_t qs[16], const uint8_t qh[4], int j) {
  uint32_t high;
  std::memcpy(&high, qh, sizeof high);
  const int low = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
  return low | int(((high >> j) & 1) << 4);
}

void dequantizeQ5_0(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ5_0>(in);
  const float d = fromHalf(b.d);
  for (int j = 0; j < 32; ++j)
    y[j] = float(fiveBitCode(b.qs, b.qh, j) - 16) * d;
}

void dequantizeQ5_1(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ5_1>(in);
  const float d = fromHalf(b.d), m = fromHalf(b.m);
  for (int j = 0; j < 32; ++j)
    y[j] = float(fiveBitCode(b.qs, b.qh, j)) * d + m;
}

/// 16 bytes of iq4 nibbles (element j low, j + 16 high) times dl: ggml's dl * kvalues[q].
void dequantizeIq4Nibbles(const uint8_t qs[16], float dl, float *y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = dl * float(kIq4Values[qs[j] & 0xF]);
    y[j + 16] = dl * float(kIq4Values[qs[j] >> 4]);
  }
}

void dequantizeIq4Nl(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockIq4Nl>(in);
  dequantizeIq4Nibbles(b.qs, fromHalf(b.d), y);
}

void dequantizeIq4Xs(const uint8_t *in, float *y) {
  const float d = fromHalf(loadBlock<BlockIq4Xs>(in).d);
  for (int j = 0; j < 8; ++j)
    dequantizeIq4Nibbles(in + offsetof(BlockIq4Xs, qs) + 16 * j, d * float(iq4XsScale(in, j) - 32), y + 32 * j);
}

void dequantizeQ2K(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ2K>(in);
  const float d = fromHalf(b.d), dmin = fromHalf(b.dmin);
  for (int s = 0; s < 16; ++s) {
    const int n = s / 8, t = s % 8 / 2, h = s % 2;
    // ggml: dl * q - ml with dl = d * sc, ml = dmin * m.
    const float dl = d * float(b.scales[s] & 0xF), ml = dmin * float(b.scales[s] >> 4);
    for (int l = 0; l < 16; ++l)
      y[16 * s + l] = dl * float((b.qs[32 * n + 16 * h + l] >> (2 * t)) & 3) - ml;
  }
}

void dequantizeQ3K(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ3K>(in);
  const float d = fromHalf(b.d);
  for (int s = 0; s < 16; ++s) {
    const int n = s / 8, t = s % 8 / 2, h = s % 2;
    const float dl = d * float(q3KScale(b.scales, s) - 32);
    for (int l = 0; l < 16; ++l) {
      const int low = (b.qs[32 * n + 16 * h + l] >> (2 * t)) & 3;
      const int high = (b.hmask[16 * h + l] >> (4 * n + t)) & 1;
      y[16 * s + l] = dl * float(low - (high ? 0 : 4));
    }
  }
}

void dequantizeQ4K(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ4K>(in);
  const float d = fromHalf(b.d), dmin = fromHalf(b.dmin);
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int half = 0; half < 2; ++half) {
      uint8_t sc, mc;
      unpackScaleMin(b.scales, 2 * chunk + half, sc, mc);
      const float scale = d * float(sc), offset = dmin * float(mc);
      for (int l = 0; l < 32; ++l) {
        const int q = half == 0 ? (b.qs[32 * chunk + l] & 0xF) : (b.qs[32 * chunk + l] >> 4);
        y[64 * chunk + 32 * half + l] = scale * float(q) - offset;
      }
    }
  }
}

void dequantizeQ5K(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ5K>(in);
  const float d = fromHalf(b.d), dmin = fromHalf(b.dmin);
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int half = 0; half < 2; ++half) {
      const int sub = 2 * chunk + half;
      uint8_t sc, mc;
      unpackScaleMin(b.scales, sub, sc, mc);
      const float scale = d * float(sc), offset = dmin * float(mc);
      for (int l = 0; l < 32; ++l) {
        const int low = half == 0 ? (b.qs[32 * chunk + l] & 0xF) : (b.qs[32 * chunk + l] >> 4);
        const int q = low | (((b.qh[l] >> sub) & 1) << 4);
        y[32 * sub + l] = scale * float(q) - offset;
      }
    }
  }
}

void dequantizeQ6K(const uint8_t *in, float *y) {
  const auto b = loadBlock<BlockQ6K>(in);
  const float d = fromHalf(b.d);
  for (int half = 0; half < 2; ++half) {
    const uint8_t *ql = b.ql + 64 * half, *qh = b.qh + 32 * half;
    const int8_t *sc = b.scales + 8 * half;
    float *out = y + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int sub = l / 16;
      const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      // ggml: d * sc * q, i.e. (d * sc) * q in float.
      out[l] = d * float(sc[sub]) * float(q0);
      out[l + 32] = d * float(sc[sub + 2]) * float(q1);
      out[l + 64] = d * float(sc[sub + 4]) * float(q2);
      out[l + 96] = d * float(sc[sub + 6]) * float(q3);
    }
  }
}

/// ggml's value of an iq weight: (d times the sub-block's factor) times the signed lattice
/// magnitude, which is decodeIq's (D * s) * c (IqFormats.h).
template <BlockFormat F> void dequantizeIq(const uint8_t *in, float *y) {
  int8_t c[kSuperBlock];
  int16_t s[16];
  float D;
  decodeIq<F>(in, c, s, D);
  for (int sub = 0; sub < 16; ++sub) {
    const float db = D * float(s[sub]);
    for (int l = 0; l < 16; ++l)
      y[16 * sub + l] = db * float(c[16 * sub + l]);
  }
}

using QuantizeBlockFn = bool (*)(const float *, uint8_t *);
using DequantizeBlockFn = void (*)(const uint8_t *, float *);

QuantizeBlockFn quantizer(BlockFormat format) {
  switch (format) {
  case BlockFormat::q8_0: return quantizeQ8_0;
  case BlockFormat::q4_0: return quantizeSymmetric<BlockQ4_0, 16>;
  case BlockFormat::q4_1: return quantizeAffine<BlockQ4_1, 16>;
  case BlockFormat::q4_k: return quantizeQ4K;
  case BlockFormat::q5_k: return quantizeQ5K;
  case BlockFormat::q6_k: return quantizeQ6K;
  case BlockFormat::q5_0: return quantizeSymmetric<BlockQ5_0, 32>;
  case BlockFormat::q5_1: return quantizeAffine<BlockQ5_1, 32>;
  case BlockFormat::q2_k: return quantizeQ2K;
  case BlockFormat::q3_k: return quantizeQ3K;
  case BlockFormat::iq4_nl:
  case BlockFormat::iq4_xs:
  case BlockFormat::iq2_xxs:
  case BlockFormat::iq2_xs:
  case BlockFormat::iq2_s:
  case BlockFormat::iq3_xxs:
  case BlockFormat::iq3_s: return nullptr; // read only (the table's quantizable column)
  }
  return nullptr;
}

DequantizeBlockFn dequantizer(BlockFormat format) {
  switch (format) {
  case BlockFormat::q8_0: return dequantizeQ8_0;
  case BlockFormat::q4_0: return dequantizeQ4_0;
  case BlockFormat::q4_1: return dequantizeQ4_1;
  case BlockFormat::q4_k: return dequantizeQ4K;
  case BlockFormat::q5_k: return dequantizeQ5K;
  case BlockFormat::q6_k: return dequantizeQ6K;
  case BlockFormat::q5_0: return dequantizeQ5_0;
  case BlockFormat::q5_1: return dequantizeQ5_1;
  case BlockFormat::iq4_nl: return dequantizeIq4Nl;
  case BlockFormat::iq4_xs: return dequantizeIq4Xs;
  case BlockFormat::q2_k: return dequantizeQ2K;
  case BlockFormat::q3_k: return dequantizeQ3K;
  case BlockFormat::iq2_xxs: return dequantizeIq<BlockFormat::iq2_xxs>;
  case BlockFormat::iq2_xs: return dequantizeIq<BlockFormat::iq2_xs>;
  case BlockFormat::iq2_s: return dequantizeIq<BlockFormat::iq2_s>;
  case BlockFormat::iq3_xxs: return dequantizeIq<BlockFormat::iq3_xxs>;
  case BlockFormat::iq3_s: return dequantizeIq<BlockFormat::iq3_s>;
  }
  return nullptr;
}

/// The one-line reason a row length does not fit the format, or "".
std::string rowLengthError(BlockFormat format, int64_t n, bool hasData) {
  const BlockFormatInfo &info = blockFormatInfo(format);
  if (n < 0 || n % info.weightsPerBlock != 0)
    return std::string(info.name) + ": row length " + std::to_string(n) + " is not a multiple of its block size " +
           std::to_string(info.weightsPerBlock);
  if (n > 0 && !hasData)
    return std::string(info.name) + ": null buffer for a row of " + std::to_string(n) + " weights";
  return {};
}

} // namespace

std::span<const BlockFormatInfo> allBlockFormats() { return kFormats; }

const BlockFormatInfo &blockFormatInfo(BlockFormat format) { return kFormats[size_t(format)]; }

std::optional<BlockFormat> blockFormatOfDtype(int32_t helmDtype) {
#define HELM_QUANT_DTYPE_CASE(NAME, CODE, name, ggml, weights, bytes, quantizable)                                             \
  case CODE:                                                                                                     \
    return BlockFormat(CODE - HELM_DTYPE_Q8_0);
  switch (helmDtype) {
    HELM_BLOCK_FORMATS(HELM_QUANT_DTYPE_CASE)
  default:
    return std::nullopt;
  }
#undef HELM_QUANT_DTYPE_CASE
}

std::optional<BlockFormat> parseBlockFormat(std::string_view name) {
  for (const BlockFormatInfo &info : kFormats)
    if (info.name == name)
      return info.format;
  return std::nullopt;
}

std::optional<int64_t> rowBytes(BlockFormat format, int64_t n) {
  const BlockFormatInfo &info = blockFormatInfo(format);
  if (n < 0 || n % info.weightsPerBlock != 0)
    return std::nullopt;
  return n / info.weightsPerBlock * info.bytesPerBlock;
}

QuantStatus quantizeRow(BlockFormat format, const float *src, int64_t n, uint8_t *dst) {
  if (std::string err = rowLengthError(format, n, src && dst); !err.empty())
    return {std::move(err)};
  const BlockFormatInfo &info = blockFormatInfo(format);
  if (!info.quantizable)
    return {std::string(info.name) + ": HELM reads this format from GGUF files but does not quantize to it"};
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(src[i]))
      return {std::string(info.name) + ": element " + std::to_string(i) + " is not finite (" + formatFloat(src[i]) +
              ")"};
  const QuantizeBlockFn quantizeBlock = quantizer(format);
  for (int64_t block = 0; block < n / info.weightsPerBlock; ++block) {
    const float *x = src + block * info.weightsPerBlock;
    uint8_t *out = dst + block * info.bytesPerBlock;
    bool inRange = true;
    for (int64_t i = 0; i < info.weightsPerBlock && inRange; ++i)
      inRange = std::fabs(x[i]) < kBeyondEveryFormat;
    if (!inRange || !quantizeBlock(x, out))
      return {tooLargeError(format, block, x, info.weightsPerBlock)};
  }
  return {};
}

QuantStatus dequantizeRow(BlockFormat format, const uint8_t *src, int64_t n, float *dst) {
  if (std::string err = rowLengthError(format, n, src && dst); !err.empty())
    return {std::move(err)};
  const BlockFormatInfo &info = blockFormatInfo(format);
  const DequantizeBlockFn dequantizeBlock = dequantizer(format);
  for (int64_t block = 0; block < n / info.weightsPerBlock; ++block)
    dequantizeBlock(src + block * info.bytesPerBlock, dst + block * info.weightsPerBlock);
  return {};
}

} // namespace helm::quant
