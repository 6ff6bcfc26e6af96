//===- BlockLinear.cpp - helm_k_linear on weights in block formats -----------------===//
//
// Two paths (docs/quantization.md): the integer path (kernels/quant's quantLinear: x quantized per
// block of 32, integer dot products), and for prefill-sized M under HELM_QUANT_PREFILL=dequantize,
// or for every call under HELM_QUANT_EXACT=1, W dequantized in tiles for the f32 kernels of
// kernels/cpu. Above both kernel libraries, with the linear entry.
//
//===----------------------------------------------------------------------===//
#include "kernels/linear/BlockLinear.h"

#include "kernels/common/Knobs.h"
#include "kernels/common/Numeric.h"
#include "kernels/common/Scratch.h"
#include "kernels/common/ThreadPool.h"
#include "kernels/cpu/Gemv.h"
#include "kernels/quant/BlockFormats.h"
#include "kernels/quant/BlockKernels.h"
#include "kernels/quant/QuantGemv.h"

#include <algorithm>
#include <string>
#include <vector>

using namespace helm;

namespace {
using kernels::grownTo;

/// Rows of x up to which the integer path runs on the dequantize prefill path: a decode step's.
constexpr int64_t kDecodeRows = 8;

/// The process's prefill path: HELM_QUANT_PREFILL=dequantize, or integer (measured faster:
/// docs/quantization.md).
kernels::BlockPrefillPath prefillPathFromEnvironment() {
  static const kernels::BlockPrefillPath path = [] {
    return kernels::knobValue(kernels::Knob::QuantPrefill, "integer") == "dequantize" ? kernels::BlockPrefillPath::dequantize
                                                                                      : kernels::BlockPrefillPath::integer;
  }();
  return path;
}

/// Below this many weights a tile is dequantized on the calling thread: waking the pool costs more.
constexpr int64_t kParallelMinWeights = int64_t(1) << 16;

/// HELM_QUANT_EXACT=1: every call takes the dequantizing path, so a quantized package computes
/// exactly what an f32 model holding the dequantized weights computes (the tests' reference mode).
bool exactArithmetic() {
  static const bool exact = [] {
    return kernels::knobValue(kernels::Knob::QuantExact, "0") == "1";
  }();
  return exact;
}

/// y = x . W^T with W's rows dequantized to f32 a tile at a time (about 4 MiB), each tile handed to
/// the f32 kernels (linearElements on an [rows, K] weight): activations stay f32.
bool dequantizedLinear(quant::BlockFormat format, const float *x, int64_t M, int64_t K, const void *w, int64_t N,
                       float *y, std::string *error) {
  std::optional<int64_t> rowBytes = quant::rowBytes(format, K);
  if (!rowBytes) {
    *error = "K = " + std::to_string(K) + " is not a multiple of the block";
    return false;
  }
  int64_t tileRows = std::clamp<int64_t>((int64_t(1) << 20) / std::max<int64_t>(K, 1), 1, N);
  thread_local std::vector<float> tile, tileOut;
  float *weights = grownTo(tile, tileRows * K);
  float *out = grownTo(tileOut, M * tileRows);
  const auto *bytes = static_cast<const uint8_t *>(w);
  for (int64_t n0 = 0; n0 < N; n0 += tileRows) {
    int64_t rows = std::min(tileRows, N - n0);
    // Dequantizing is a pass over the weight as long as the GEMM's: split over the pool like it.
    // K is a whole number of blocks and the buffers exist, so dequantizeRow cannot refuse a row.
    auto dequantize = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        (void)quant::dequantizeRow(format, bytes + (n0 + r) * *rowBytes, K, weights + r * K);
    };
    kernels::ThreadPool &threads = kernels::pool();
    if (threads.threads() > 1 && rows * K >= kParallelMinWeights)
      threads.parallelFor(rows, 4, dequantize);
    else
      dequantize(0, rows);
    kernels::linearElements(x, kernels::DType::f32, weights, kernels::DType::f32, /*wTransposed=*/true, out,
                            kernels::DType::f32, M, K, rows);
    for (int64_t m = 0; m < M; ++m)
      std::copy(out + m * rows, out + (m + 1) * rows, y + m * N + n0);
  }
  return true;
}
} // namespace

void kernels::linearBlocks(const void *x, int32_t xDtype, const void *w, int32_t wDtype, void *y, int32_t yDtype,
                         int64_t M, int64_t K, int64_t N) {
  linearBlocksWith(prefillPathFromEnvironment(), x, xDtype, w, wDtype, y, yDtype, M, K, N);
}

void kernels::linearBlocksWith(BlockPrefillPath path, const void *x, int32_t xDtype, const void *w, int32_t wDtype, void *y,
                             int32_t yDtype, int64_t M, int64_t K, int64_t N) {
  quant::BlockFormat format = quant::blockFormatOrAbort("helm_k_linear", wDtype);
  kernels::DType xd = quant::elementDtypeOrAbort("helm_k_linear", xDtype),
                 yd = quant::elementDtypeOrAbort("helm_k_linear", yDtype);
  if (M <= 0 || N <= 0)
    return;
  thread_local std::vector<float> xBuffer, yBuffer;
  const float *xf = static_cast<const float *>(x);
  if (xd != kernels::DType::f32) {
    float *widened = grownTo(xBuffer, M * K);
    kernels::widen(x, xd, widened, M * K);
    xf = widened;
  }
  float *yf = yd == kernels::DType::f32 ? static_cast<float *>(y) : grownTo(yBuffer, M * N);
  std::string error;
  if ((path == BlockPrefillPath::dequantize && M > kDecodeRows) || exactArithmetic()) {
    if (!dequantizedLinear(format, xf, M, K, w, N, yf, &error))
      quant::invalidCall("helm_k_linear", error);
  } else if (!quant::quantLinear(format, xf, M, K, w, N, yf, &error)) {
    quant::invalidCall("helm_k_linear", error);
  }
  if (yd != kernels::DType::f32)
    kernels::narrow(yf, yd, y, M * N);
}

