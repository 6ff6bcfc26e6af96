//===- QuantGemv.cpp - quantized decode GEMV: dispatch, threads, scalar reference ---===//
//
// The scalar kernels below are the definition of the arithmetic (QuantGemvImpl.h); the AVX2 and
// AVX-512 VNNI paths (QuantGemvAvx2.cpp, QuantGemvAvx512.cpp) compute the same operations in the
// same order and are tested bit-identical to them.
//
//===------------------------------------------------------------------------------===//
#include "kernels/quant/QuantGemv.h"

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Numeric.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/quant/QuantGemvImpl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace helm::quant {

using namespace detail;

float detail::roundToHalf(float v) { return kernels::halfToFloat(kernels::floatToHalf(v)); }

namespace {

// ---- the scalar reference ----------------------------------------------------------------------

void quantizeBlockScalar(const float *xb, int8_t *codes, float &scale, int32_t &sum, float &scaledSum) {
  uint32_t amaxBits = 0;
  for (int j = 0; j < kBlock; ++j) {
    uint32_t bits;
    std::memcpy(&bits, &xb[j], sizeof bits);
    amaxBits = std::max(amaxBits, bits & 0x7fffffffu);
  }
  sum = 0;
  if (amaxBits >= 0x7f800000u) { // an infinity or NaN: the whole row of y becomes NaN
    scale = scaledSum = std::numeric_limits<float>::quiet_NaN();
    std::memset(codes, 0, kBlock);
    return;
  }
  float amax;
  std::memcpy(&amax, &amaxBits, sizeof amax);
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f; // amax 0: id 0, codes 0
  const bool coded = id <= std::numeric_limits<float>::max(); // a subnormal amax: 127 / amax overflows
  for (int j = 0; j < kBlock; ++j) {
    int c = 0;
    if (coded) {
      // |x * id| exceeds 127 only by rounding: clamp.
      const float v = std::min(std::max(xb[j] * id, -127.0f), 127.0f);
      c = int(std::nearbyint(v)); // the current rounding mode (nearest even), as cvtps2dq
    }
    codes[j] = int8_t(c);
    sum += c;
  }
  scale = roundToHalf(d);
  scaledSum = roundToHalf(d * float(sum));
}

void quantizeXScalar(const float *x, const QuantizedX &q, int64_t m0, int64_t m1) {
  const int64_t K = q.blocks * kBlock;
  for (int64_t m = m0; m < m1; ++m)
    for (int64_t b = 0; b < q.blocks; ++b) {
      const int64_t i = q.blockIndex(m, b);
      quantizeBlockScalar(x + m * K + b * kBlock, q.codes + i * kBlock, q.scale[i], q.sum[i], q.scaledSum[i]);
    }
}

float halfAt(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return kernels::halfToFloat(h);
}

/// The exact integer dot product of one weight block with 32 activation codes.
template <BlockFormat F> int32_t blockDot(const uint8_t *blk, const int8_t *c) {
  int32_t isum = 0;
  if constexpr (F == BlockFormat::q8_0) {
    for (int j = 0; j < 32; ++j)
      isum += int32_t(int8_t(blk[2 + j])) * c[j];
  } else {
    const int offset = F == BlockFormat::q4_0 ? 8 : 0;
    const uint8_t *qs = blk + (F == BlockFormat::q4_0 ? 2 : 4);
    for (int j = 0; j < 16; ++j) {
      isum += (int32_t(qs[j] & 0xF) - offset) * c[j];
      isum += (int32_t(qs[j] >> 4) - offset) * c[j + 16];
    }
  }
  return isum;
}

template <BlockFormat F>
void rowsScalarT(const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1, float *y,
                 int64_t N) {
  const int64_t bs = blockBytes(F);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t *row = w + n * q.blocks * bs;
    for (int64_t m = m0; m < m0 + mb; ++m) {
      float lanes[kLanes] = {};
      for (int64_t b = 0; b < q.blocks; ++b) {
        const int64_t i = q.blockIndex(m, b);
        const uint8_t *blk = row + b * bs;
        const float s = halfAt(blk) * q.scale[i];
        const float term = float(blockDot<F>(blk, q.codes + i * kBlock)) * s;
        float &lane = lanes[b % kLanes];
        lane = lane + term;
        if constexpr (F == BlockFormat::q4_1)
          lane = lane + halfAt(blk + 2) * q.scaledSum[i];
      }
      y[m * N + n] = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    }
  }
}

/// One k-quant super-block decoded: the 256 weight codes as the integer dot product uses them
/// (q4_k / q5_k: q; q6_k: q - 32), the sub-block scales, and for q4_k / q5_k the min codes.
struct SuperBlock {
  int8_t q[256];
  int32_t scale[16];
  int32_t min[8];
  float d, dmin;
};

template <BlockFormat F> void decodeSuperBlock(const uint8_t *blk, SuperBlock &sb) {
  if constexpr (F == BlockFormat::q6_k) {
    const uint8_t *ql = blk, *qh = blk + kQ6KQhOffset;
    for (int half = 0; half < 2; ++half)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo0 = ql[64 * half + l], lo1 = ql[64 * half + 32 + l], hi = qh[32 * half + l];
        int8_t *q = sb.q + 128 * half + l;
        q[0] = int8_t(((lo0 & 0xF) | ((hi & 3) << 4)) - 32);
        q[32] = int8_t(((lo1 & 0xF) | (((hi >> 2) & 3) << 4)) - 32);
        q[64] = int8_t(((lo0 >> 4) | (((hi >> 4) & 3) << 4)) - 32);
        q[96] = int8_t(((lo1 >> 4) | (((hi >> 6) & 3) << 4)) - 32);
      }
    for (int j = 0; j < 16; ++j)
      sb.scale[j] = int8_t(blk[kQ6KScOffset + j]);
    sb.d = halfAt(blk + kQ6KDOffset);
    sb.dmin = 0.0f;
  } else {
    const uint8_t *qs = blk + (F == BlockFormat::q4_k ? kQ4KQsOffset : kQ5KQsOffset);
    for (int pair = 0; pair < 4; ++pair)
      for (int l = 0; l < 32; ++l) {
        sb.q[64 * pair + l] = int8_t(qs[32 * pair + l] & 0xF);
        sb.q[64 * pair + 32 + l] = int8_t(qs[32 * pair + l] >> 4);
      }
    if constexpr (F == BlockFormat::q5_k)
      for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l)
          sb.q[32 * j + l] = int8_t(sb.q[32 * j + l] | (((blk[kQ5KQhOffset + l] >> j) & 1) << 4));
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mc;
      unpackScaleMin(blk + kScalesOffset, j, sc, mc);
      sb.scale[j] = sc;
      sb.min[j] = mc;
    }
    sb.d = halfAt(blk);
    sb.dmin = halfAt(blk + 2);
  }
}

template <BlockFormat F>
void kRowsScalarT(const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1, float *y,
                  int64_t N) {
  const int64_t supers = q.blocks / kLanes, gb = groupBytes(F);
  SuperBlock sb;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t *row = w + n * supers * gb;
    float lanes[kMaxRowsOfX][kLanes] = {};
    for (int64_t s = 0; s < supers; ++s) {
      decodeSuperBlock<F>(row + s * gb, sb);
      for (int64_t m = 0; m < mb; ++m) {
        const int64_t first = q.blockIndex(m0 + m, s * kLanes); // the super-block's 8 blocks follow
        for (int j = 0; j < kLanes; ++j) {
          const int8_t *c = q.codes + (first + j) * kBlock;
          const int8_t *qv = sb.q + 32 * j;
          float &lane = lanes[m][j];
          if constexpr (F == BlockFormat::q6_k) {
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 16; ++l) {
              lo += int32_t(qv[l]) * c[l];
              hi += int32_t(qv[16 + l]) * c[16 + l];
            }
            const int32_t isum = sb.scale[2 * j] * lo + sb.scale[2 * j + 1] * hi;
            lane = lane + float(isum) * (sb.d * q.scale[first + j]);
          } else {
            int32_t isum = 0;
            for (int l = 0; l < 32; ++l)
              isum += int32_t(qv[l]) * c[l];
            const float dsc = sb.d * float(sb.scale[j]), dmn = sb.dmin * float(sb.min[j]);
            lane = lane + float(isum) * (dsc * q.scale[first + j]);
            lane = lane - dmn * q.scaledSum[first + j];
          }
        }
      }
    }
    for (int64_t m = 0; m < mb; ++m) {
      const float *l = lanes[m];
      y[(m0 + m) * N + n] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    }
  }
}

void rowsScalar(BlockFormat f, const QuantizedX &q, int64_t m0, int64_t mb, const uint8_t *w, int64_t n0, int64_t n1,
                float *y, int64_t N) {
  withFormat(f, [&](auto format) {
    if constexpr (isKQuant(format))
      kRowsScalarT<format>(q, m0, mb, w, n0, n1, y, N);
    else
      rowsScalarT<format>(q, m0, mb, w, n0, n1, y, N);
  });
}

// ---- dispatch ----------------------------------------------------------------------------------

/// Below this many multiply-adds a call stays on the calling thread (as helm_k_linear).
constexpr int64_t kParallelMinMacs = int64_t(1) << 16;
/// From this many activations (M * K) on, x is quantized by all threads, a range of rows each.
constexpr int64_t kParallelQuantizeMin = int64_t(1) << 15;
/// Rows of W per thread chunk are multiples of this.
constexpr int64_t kRowGrain = 16;

const QuantKernels &kernelsFor(QuantPath path) {
  switch (path) {
  case QuantPath::avx512vnni: return quantKernelsAvx512Vnni();
  case QuantPath::avx2: return quantKernelsAvx2();
  case QuantPath::scalar: break;
  }
  return quantKernelsScalar();
}

bool fail(std::string *error, std::string message) {
  if (error)
    *error = std::move(message);
  return false;
}

/// The calling thread's activation buffers (grow only; 64-byte aligned pieces).
QuantizedX activationBuffers(int64_t M, int64_t blocks) {
  QuantizedX q;
  q.M = M;
  q.blocks = blocks;
  q.paddedBlocks = (blocks + kLanes - 1) / kLanes * kLanes;
  const size_t perRow = size_t(q.paddedBlocks);
  const size_t codeBytes = size_t(M) * perRow * kBlock, fieldBytes = size_t(M) * perRow * 4;
  // halfSum: two int16 per block, as many bytes as one of the four-byte fields.
  const size_t round = 64, total = codeBytes + 4 * (fieldBytes + round) + 2 * round;
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < total)
    buffer.resize(total);
  auto align = [&](uintptr_t a) { return (a + round - 1) & ~uintptr_t(round - 1); };
  uintptr_t p = align(reinterpret_cast<uintptr_t>(buffer.data()));
  q.codes = reinterpret_cast<int8_t *>(p);
  p = align(p + codeBytes);
  q.scale = reinterpret_cast<float *>(p);
  p = align(p + fieldBytes);
  q.sum = reinterpret_cast<int32_t *>(p);
  p = align(p + fieldBytes);
  q.scaledSum = reinterpret_cast<float *>(p);
  p = align(p + fieldBytes);
  q.halfSum = reinterpret_cast<int16_t *>(p);
  // The padding blocks (in each row's last group) must read as zero codes, scales and sums. The
  // whole last group of every row is cleared (the quantizer then writes its real blocks): the
  // AVX-512 layouts interleave the halves of 4 blocks, and the rows of 16-row calls by 4 as well.
  if (blocks != q.paddedBlocks) {
    const int64_t lastGroup = q.paddedBlocks - kLanes;
    for (int64_t m = 0; m < M; ++m) {
      const int64_t first = q.blockIndex(m, lastGroup);
      std::memset(q.codes + first * kBlock, 0, size_t(kLanes * kBlock));
      std::fill_n(q.scale + first, kLanes, 0.0f);
      std::fill_n(q.sum + first, kLanes, 0);
      std::fill_n(q.scaledSum + first, kLanes, 0.0f);
      std::fill_n(q.halfSum + 2 * first, 2 * kLanes, int16_t(0));
    }
  }
  return q;
}

} // namespace

namespace detail {
const QuantKernels &quantKernelsScalar() {
  static const QuantKernels k{&quantizeXScalar, &rowsScalar, kMaxRowsOfX};
  return k;
}
} // namespace detail

const char *quantPathName(QuantPath path) {
  switch (path) {
  case QuantPath::scalar: return "scalar";
  case QuantPath::avx2: return "avx2";
  case QuantPath::avx512vnni: return "avx512vnni";
  }
  return "?";
}

bool quantPathSupported(QuantPath path) {
  switch (path) {
  case QuantPath::scalar: return true;
  case QuantPath::avx2: return kernels::isaSupported(kernels::Isa::avx2);
  case QuantPath::avx512vnni: {
#if defined(__x86_64__) || defined(__i386__)
    static const bool vnni = [] {
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
    }();
    return vnni && kernels::isaSupported(kernels::Isa::avx512);
#else
    return false;
#endif
  }
  }
  return false;
}

QuantPath activeQuantPath() {
  switch (kernels::activeIsa()) {
  case kernels::Isa::avx512:
    return quantPathSupported(QuantPath::avx512vnni) ? QuantPath::avx512vnni : QuantPath::avx2;
  case kernels::Isa::avx2: return QuantPath::avx2;
  case kernels::Isa::scalar: break;
  }
  return QuantPath::scalar;
}

bool quantLinearOnPath(QuantPath path, BlockFormat wFormat, const float *x, int64_t M, int64_t K, const void *w,
                       int64_t N, float *y, std::string *error) {
  const std::string_view name = blockFormatInfo(wFormat).name;
  const int64_t weightsPerBlock = blockFormatInfo(wFormat).weightsPerBlock;
  if (K < 0 || K % weightsPerBlock != 0)
    return fail(error, "quantLinear: K = " + std::to_string(K) + " is not a multiple of the block size " +
                           std::to_string(weightsPerBlock) + " (" + std::string(name) + ")");
  if (M < 0 || N < 0)
    return fail(error, "quantLinear: negative size M = " + std::to_string(M) + ", N = " + std::to_string(N));
  if (!quantPathSupported(path))
    return fail(error, std::string("quantLinear: path ") + quantPathName(path) + " is not supported by this CPU");
  if (M == 0 || N == 0)
    return true;
  if (!y || (K > 0 && (!x || !w)))
    return fail(error, "quantLinear: null buffer");
  if (K == 0) {
    std::fill_n(y, M * N, 0.0f);
    return true;
  }
  const QuantKernels &kernels = kernelsFor(path);
  const QuantizedX q = activationBuffers(M, K / kBlock);
  kernels::ThreadPool &threads = kernels::pool();
  // Prefill: the rows of x are quantized on every thread (on one, the others would wait for it).
  if (threads.threads() > 1 && M >= 2 && M * K >= kParallelQuantizeMin)
    threads.parallelFor(M, 1, [&](int64_t m0, int64_t m1) { kernels.quantizeX(x, q, m0, m1); });
  else
    kernels.quantizeX(x, q, 0, M);

  const auto *weights = static_cast<const uint8_t *>(w);
  // More rows of x than one kernel call takes (prefill): W in tiles of about 256 KiB, every group of
  // rows of x over a tile while it is in L2, so W streams from memory once rather than once per
  // group. Each output is one kernel call's whatever the tiling, so the bits do not depend on it.
  const int64_t rowBytes = K / weightsPerBlock * blockFormatInfo(wFormat).bytesPerBlock;
  const int64_t maxRows = kernels.maxRows;
  const int64_t tileRows = M <= maxRows ? N : std::max<int64_t>(kRowGrain, (int64_t(256) << 10) / rowBytes);
  auto run = [&](int64_t n0, int64_t n1) {
    for (int64_t t0 = n0; t0 < n1; t0 += tileRows)
      for (int64_t m0 = 0; m0 < M; m0 += maxRows)
        kernels.rows(wFormat, q, m0, std::min(maxRows, M - m0), weights, t0, std::min(n1, t0 + tileRows), y, N);
  };
  if (threads.threads() == 1 || M * K * N < kParallelMinMacs) {
    run(0, N);
    return true;
  }
  // Each thread one contiguous range of rows of W: one sequential stream through its part.
  threads.parallelFor(N, kRowGrain, [&run](int64_t n0, int64_t n1) { run(n0, n1); });
  return true;
}

bool quantLinear(BlockFormat wFormat, const float *x, int64_t M, int64_t K, const void *w, int64_t N, float *y,
                 std::string *error) {
  return quantLinearOnPath(activeQuantPath(), wFormat, x, M, K, w, N, y, error);
}

} // namespace helm::quant
