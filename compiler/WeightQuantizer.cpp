//===- WeightQuantizer.cpp - a weight's bytes in a block format --------------------===//
#include "compiler/WeightQuantizer.h"

#include "contract/manifest_schema.h"
#include "kernels/cpu/Numeric.h"
#include "kernels/quant/BlockFormats.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace helm {

namespace {
std::optional<kernels::DType> elementDtype(llvm::StringRef name) {
  if (name == HELM_MANIFEST_DTYPE_F32)
    return kernels::DType::f32;
  if (name == HELM_MANIFEST_DTYPE_F16)
    return kernels::DType::f16;
  if (name == HELM_MANIFEST_DTYPE_BF16)
    return kernels::DType::bf16;
  return std::nullopt;
}
} // namespace

llvm::Error quantizeWeight(llvm::StringRef name, llvm::ArrayRef<char> source, llvm::StringRef sourceDtype,
                           llvm::ArrayRef<int64_t> sourceShape, int64_t rowDim, int32_t blockDtype,
                           std::vector<char> &out) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError("cannot quantize weight '" + name + "': " + why);
  };
  std::optional<quant::BlockFormat> format = quant::blockFormatOfDtype(blockDtype);
  std::optional<kernels::DType> dtype = elementDtype(sourceDtype);
  if (!format)
    return fail("block dtype " + llvm::Twine(blockDtype) + " is not a block format");
  if (!dtype)
    return fail("its dtype " + sourceDtype + " is not f32, f16 or bf16");
  if (sourceShape.size() != 2 || (rowDim != 0 && rowDim != 1))
    return fail("it is not a 2-D tensor");
  int64_t rows = sourceShape[rowDim], columns = sourceShape[1 - rowDim];
  int64_t elementBytes = kernels::dtypeBytes(*dtype);
  if (rows <= 0 || columns <= 0 || int64_t(source.size()) != rows * columns * elementBytes)
    return fail(llvm::formatv("{0} bytes of data for a {1}x{2} {3} tensor", source.size(), sourceShape[0],
                              sourceShape[1], sourceDtype));
  std::optional<int64_t> rowBytes = quant::rowBytes(*format, columns);
  if (!rowBytes)
    return fail(llvm::formatv("its rows of {0} do not split into blocks of {1} ({2})", columns,
                              quant::blockFormatInfo(*format).weightsPerBlock, helm_dtype_name(blockDtype)));
  out.assign(size_t(rows * *rowBytes), 0);
  // Rows in groups: a transposed source is read one source row (K index) at a time across the
  // group's columns, so the strided reads touch each cache line once per group.
  constexpr int64_t kGroup = 16;
  std::vector<float> group(size_t(kGroup * columns));
  std::vector<float> staging(static_cast<size_t>(kGroup));
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    int64_t count = std::min(kGroup, rows - r0);
    if (rowDim == 0) {
      kernels::widen(source.data() + r0 * columns * elementBytes, *dtype, group.data(), count * columns);
    } else {
      for (int64_t k = 0; k < columns; ++k) {
        kernels::widen(source.data() + (k * rows + r0) * elementBytes, *dtype, staging.data(), count);
        for (int64_t i = 0; i < count; ++i)
          group[size_t(i * columns + k)] = staging[size_t(i)];
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      auto *dst = reinterpret_cast<uint8_t *>(out.data()) + (r0 + i) * *rowBytes;
      quant::QuantStatus status = quant::quantizeRow(*format, group.data() + i * columns, columns, dst);
      if (!status.ok())
        return fail("row " + llvm::Twine(r0 + i) + ": " + status.error);
    }
  }
  return llvm::Error::success();
}

} // namespace helm
