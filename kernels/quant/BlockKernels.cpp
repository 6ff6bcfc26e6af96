//===- BlockKernels.cpp - helm_k_embed_blocks and the block kernels' call checks ----===//
#include "kernels/quant/BlockKernels.h"

#include "contract/helm_contract.h"
#include "kernels/common/Numeric.h"
#include "kernels/common/Scratch.h"
#include "kernels/quant/BlockFormats.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace helm;

[[noreturn]] void quant::invalidCall(const char *kernel, const std::string &why) {
  // Generated code never does this: the compiler checked the shapes and the formats.
  std::fprintf(stderr, "%s: invalid call: %s\n", kernel, why.c_str());
  std::abort();
}

quant::BlockFormat quant::blockFormatOrAbort(const char *kernel, int32_t dtype) {
  std::optional<quant::BlockFormat> format = quant::blockFormatOfDtype(dtype);
  if (!format)
    invalidCall(kernel, "dtype code " + std::to_string(dtype) + " is not a block format");
  return *format;
}

kernels::DType quant::elementDtypeOrAbort(const char *kernel, int32_t dtype) {
  if (!kernels::isDType(dtype))
    invalidCall(kernel, "dtype code " + std::to_string(dtype) + " is not f32, f16 or bf16");
  return kernels::DType(dtype);
}

extern "C" void helm_k_embed_blocks(const int64_t *ids, const void *table, int32_t tableDtype, void *out,
                                    int32_t outDtype, int64_t rows, int64_t vocab, int64_t width) {
  quant::BlockFormat format = quant::blockFormatOrAbort("helm_k_embed_blocks", tableDtype);
  kernels::DType od = quant::elementDtypeOrAbort("helm_k_embed_blocks", outDtype);
  std::optional<int64_t> rowBytes = quant::rowBytes(format, width);
  if (!rowBytes || vocab <= 0)
    quant::invalidCall("helm_k_embed_blocks", "a table of " + std::to_string(vocab) + " rows of " +
                                           std::to_string(width) + " does not hold whole blocks");
  thread_local std::vector<float> rowBuffer;
  float *row = kernels::grownTo(rowBuffer, width);
  const auto *bytes = static_cast<const uint8_t *>(table);
  auto *dst = static_cast<char *>(out);
  for (int64_t r = 0; r < rows; ++r) {
    // Clamped like the element tables' gather: the runtime refuses such ids before the stage runs.
    int64_t id = std::clamp<int64_t>(ids[r], 0, vocab - 1);
    quant::QuantStatus status = quant::dequantizeRow(format, bytes + id * *rowBytes, width, row);
    if (!status.ok())
      quant::invalidCall("helm_k_embed_blocks", status.error);
    kernels::narrow(row, od, dst + r * width * kernels::dtypeBytes(od), width);
  }
}
