//===- QuantGemv.cpp - quantized decode GEMV: dispatch and threads ------------------===//
//
// The scalar kernels (QuantGemvScalar.cpp) are the definition of the arithmetic (QuantGemvImpl.h);
// the AVX2 and AVX-512 VNNI paths (QuantGemvAvx2.cpp, QuantGemvAvx512.cpp) compute the same
// operations in the same order and are tested bit-identical to them.
//
//===------------------------------------------------------------------------------===//
#include "kernels/quant/QuantGemv.h"

#include "kernels/common/Isa.h"
#include "kernels/common/Numeric.h"
#include "kernels/common/ThreadPool.h"
#include "kernels/quant/QuantGemvImpl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace helm::quant {

using namespace detail;

namespace {

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
  // Every format takes the path's rows a call; a path of 16-row calls reads the rows of those
  // calls stored in quads.
  const int64_t maxRows = kernels.maxRows;
  QuantizedX q = activationBuffers(M, K / kBlock);
  q.quads = maxRows >= kMaxRowsOfXWide;
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
