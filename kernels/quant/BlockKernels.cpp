//===- BlockKernels.cpp - the contract's kernels on weights in block formats --------===//
#include "kernels/quant/BlockKernels.h"

#include "contract/helm_contract.h"
#include "kernels/cpu/Numeric.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/quant/BlockFormats.h"
#include "kernels/quant/QuantGemv.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace helm;

namespace {
[[noreturn]] void invalidCall(const char *kernel, const std::string &why) {
  // Generated code never does this: the compiler checked the shapes and the formats.
  std::fprintf(stderr, "%s: invalid call: %s\n", kernel, why.c_str());
  std::abort();
}

quant::BlockFormat formatOf(const char *kernel, int32_t dtype) {
  std::optional<quant::BlockFormat> format = quant::blockFormatOfDtype(dtype);
  if (!format)
    invalidCall(kernel, "dtype code " + std::to_string(dtype) + " is not a block format");
  return *format;
}

kernels::DType elementDtypeOf(const char *kernel, int32_t dtype) {
  if (!kernels::isDType(dtype))
    invalidCall(kernel, "dtype code " + std::to_string(dtype) + " is not f32, f16 or bf16");
  return kernels::DType(dtype);
}

/// A per-thread f32 buffer of at least n floats.
float *scratch(std::vector<float> &buffer, int64_t n) {
  if (buffer.size() < size_t(n))
    buffer.resize(size_t(n));
  return buffer.data();
}
/// Rows of x up to which the integer path runs on the dequantize prefill path: a decode step's.
constexpr int64_t kDecodeRows = 8;

/// The process's prefill path: HELM_QUANT_PREFILL=dequantize, or integer (measured faster:
/// docs/quantization.md).
quant::PrefillPath prefillPathFromEnvironment() {
  static const quant::PrefillPath path = [] {
    const char *v = std::getenv("HELM_QUANT_PREFILL");
    return v && std::string(v) == "dequantize" ? quant::PrefillPath::dequantize : quant::PrefillPath::integer;
  }();
  return path;
}

/// Below this many weights a tile is dequantized on the calling thread: waking the pool costs more.
constexpr int64_t kParallelMinWeights = int64_t(1) << 16;

/// HELM_QUANT_EXACT=1: every call takes the dequantizing path, so a quantized package computes
/// exactly what an f32 model holding the dequantized weights computes (the tests' reference mode).
bool exactArithmetic() {
  static const bool exact = [] {
    const char *v = std::getenv("HELM_QUANT_EXACT");
    return v && std::string(v) == "1";
  }();
  return exact;
}

/// y = x . W^T with W's rows dequantized to f32 a tile at a time (about 4 MiB), each tile handed to
/// the f32 kernels (helm_k_linear on an [rows, K] weight): activations stay f32.
bool dequantizedLinear(quant::BlockFormat format, const float *x, int64_t M, int64_t K, const void *w, int64_t N,
                       float *y, std::string *error) {
  std::optional<int64_t> rowBytes = quant::rowBytes(format, K);
  if (!rowBytes) {
    *error = "K = " + std::to_string(K) + " is not a multiple of the block";
    return false;
  }
  int64_t tileRows = std::clamp<int64_t>((int64_t(1) << 20) / std::max<int64_t>(K, 1), 1, N);
  thread_local std::vector<float> tile, tileOut;
  float *weights = scratch(tile, tileRows * K);
  float *out = scratch(tileOut, M * tileRows);
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
    helm_k_linear(x, HELM_DTYPE_F32, weights, HELM_DTYPE_F32, /*w_transposed=*/1, out, HELM_DTYPE_F32, M, K, rows);
    for (int64_t m = 0; m < M; ++m)
      std::copy(out + m * rows, out + (m + 1) * rows, y + m * N + n0);
  }
  return true;
}
} // namespace

void quant::linearBlocks(const void *x, int32_t xDtype, const void *w, int32_t wDtype, void *y, int32_t yDtype,
                         int64_t M, int64_t K, int64_t N) {
  linearBlocksWith(prefillPathFromEnvironment(), x, xDtype, w, wDtype, y, yDtype, M, K, N);
}

void quant::linearBlocksWith(PrefillPath path, const void *x, int32_t xDtype, const void *w, int32_t wDtype, void *y,
                             int32_t yDtype, int64_t M, int64_t K, int64_t N) {
  BlockFormat format = formatOf("helm_k_linear", wDtype);
  kernels::DType xd = elementDtypeOf("helm_k_linear", xDtype), yd = elementDtypeOf("helm_k_linear", yDtype);
  if (M <= 0 || N <= 0)
    return;
  thread_local std::vector<float> xBuffer, yBuffer;
  const float *xf = static_cast<const float *>(x);
  if (xd != kernels::DType::f32) {
    float *widened = scratch(xBuffer, M * K);
    kernels::widen(x, xd, widened, M * K);
    xf = widened;
  }
  float *yf = yd == kernels::DType::f32 ? static_cast<float *>(y) : scratch(yBuffer, M * N);
  std::string error;
  if ((path == PrefillPath::dequantize && M > kDecodeRows) || exactArithmetic()) {
    if (!dequantizedLinear(format, xf, M, K, w, N, yf, &error))
      invalidCall("helm_k_linear", error);
  } else if (!quantLinear(format, xf, M, K, w, N, yf, &error)) {
    invalidCall("helm_k_linear", error);
  }
  if (yd != kernels::DType::f32)
    kernels::narrow(yf, yd, y, M * N);
}

extern "C" void helm_k_embed_blocks(const int64_t *ids, const void *table, int32_t tableDtype, void *out,
                                    int32_t outDtype, int64_t rows, int64_t vocab, int64_t width) {
  quant::BlockFormat format = formatOf("helm_k_embed_blocks", tableDtype);
  kernels::DType od = elementDtypeOf("helm_k_embed_blocks", outDtype);
  std::optional<int64_t> rowBytes = quant::rowBytes(format, width);
  if (!rowBytes || vocab <= 0)
    invalidCall("helm_k_embed_blocks", "a table of " + std::to_string(vocab) + " rows of " +
                                           std::to_string(width) + " does not hold whole blocks");
  thread_local std::vector<float> rowBuffer;
  float *row = scratch(rowBuffer, width);
  const auto *bytes = static_cast<const uint8_t *>(table);
  auto *dst = static_cast<char *>(out);
  for (int64_t r = 0; r < rows; ++r) {
    // Clamped like the element tables' gather: the runtime refuses such ids before the stage runs.
    int64_t id = std::clamp<int64_t>(ids[r], 0, vocab - 1);
    quant::QuantStatus status = quant::dequantizeRow(format, bytes + id * *rowBytes, width, row);
    if (!status.ok())
      invalidCall("helm_k_embed_blocks", status.error);
    kernels::narrow(row, od, dst + r * width * kernels::dtypeBytes(od), width);
  }
}
