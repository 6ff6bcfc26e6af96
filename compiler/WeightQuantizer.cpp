//===- WeightQuantizer.cpp - a weight's bytes in a block format --------------------===//
#include "compiler/WeightQuantizer.h"

#include "contract/manifest_schema.h"
#include "kernels/common/Numeric.h"
#include "kernels/common/ThreadPool.h"
#include "kernels/quant/BlockFormats.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>

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
  // group's columns, so the strided reads touch each cache line once per group. The groups are
  // split over the kernels' thread pool (every core helmc may use); each row's bytes depend on
  // that row alone, so the output is the same for any thread count.
  constexpr int64_t kGroup = 16;
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  std::mutex failureMutex;
  int64_t failedRow = -1;
  std::string failure;
  kernels::pool().parallelFor(groups, 1, [&](int64_t firstGroup, int64_t endGroup) {
    std::vector<float> group(size_t(kGroup * columns));
    std::vector<float> staging(static_cast<size_t>(kGroup));
    for (int64_t r0 = firstGroup * kGroup; r0 < std::min(rows, endGroup * kGroup); r0 += kGroup) {
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
        if (status.ok())
          continue;
        // The first bad row in row order, whichever thread finds it first.
        std::lock_guard<std::mutex> lock(failureMutex);
        if (failedRow < 0 || r0 + i < failedRow) {
          failedRow = r0 + i;
          failure = status.error;
        }
        return;
      }
    }
  });
  if (failedRow >= 0)
    return fail("row " + llvm::Twine(failedRow) + ": " + failure);
  return llvm::Error::success();
}

llvm::Error repackOnnxBlocks(llvm::StringRef name, const OnnxBlockedSource &source, int32_t blockDtype,
                             std::vector<char> &out) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError("cannot repack the blocks of weight '" + name + "': " + why);
  };
  const int64_t N = source.N, K = source.K, bits = source.bits, blockSize = source.blockSize;
  const bool kMajor = source.kMajor;
  llvm::StringRef codeDtype = source.codeDtype, scaleDtype = source.scaleDtype,
                  zeroPointDtype = source.zeroPointDtype;
  if (bits != 4 && bits != 8)
    return fail(llvm::formatv("{0}-bit codes (4 or 8 expected)", bits));
  std::optional<kernels::DType> scaleType = elementDtype(scaleDtype);
  if (!scaleType || *scaleType == kernels::DType::bf16)
    return fail("scales of dtype " + scaleDtype + " (f32 or f16 expected)");
  const bool byteCodes = codeDtype == "u8", signedCodes = codeDtype == "i4";
  const bool elementCodes = bits == 4 ? signedCodes || codeDtype == "u4" : codeDtype == "i8";
  if (!byteCodes && !elementCodes)
    return fail(llvm::formatv("{0}-bit codes of dtype {1} ({2} expected)", bits, codeDtype,
                              bits == 4 ? "u8, i4 or u4" : "u8 or i8"));
  if (kMajor && byteCodes)
    return fail("K-major codes of dtype u8 (i4, u4 or i8 expected)");
  const bool hasZeroPoints = !source.zeroPoints.empty();
  const bool rowPaddedZeroPoints = hasZeroPoints && zeroPointDtype == "u8" && byteCodes;
  const bool packedZeroPoints = hasZeroPoints && zeroPointDtype == codeDtype && !byteCodes;
  if (hasZeroPoints && !rowPaddedZeroPoints && !packedZeroPoints && zeroPointDtype != scaleDtype)
    return fail("zero points of dtype " + zeroPointDtype + " (the codes' or the scales' dtype expected)");
  // Which format is chosen is OnnxBlocksAttr::getStorageFormat's decision (verified on the
  // declaration); here only whether the codes fit it. Signed 4-bit values are stored shifted by 8
  // (nibble ^ 8 = value + 8); q8_0 and q4_0 subtract a fixed 128 / 8 from the stored code, so they
  // hold exactly the codes whose zero point is that after the shift, with no zero points given;
  // q4_1's minimum holds any zero point.
  const int codeShift = signedCodes ? 8 : 0;
  const int defaultZero = byteCodes ? 1 << (bits - 1) : 0; // absent zero points
  std::optional<quant::BlockFormat> format = quant::blockFormatOfDtype(blockDtype);
  const bool fits = bits == 8 ? format == quant::BlockFormat::q8_0 && !hasZeroPoints
                              : format == quant::BlockFormat::q4_1 ||
                                    (format == quant::BlockFormat::q4_0 && !hasZeroPoints && defaultZero + codeShift == 8);
  if (!fits)
    return fail(llvm::formatv("{0}-bit {1} codes {2} zero points cannot be stored as {3}", bits, codeDtype,
                              hasZeroPoints ? "with" : "without", helm_dtype_name(blockDtype)));
  if (N <= 0 || K <= 0 || K % 32 != 0 || blockSize < 32 || blockSize % 32 != 0)
    return fail(llvm::formatv("N {0}, K {1}, block_size {2}: K must be a multiple of 32 and the block of 32 or more",
                              N, K, blockSize));
  const int64_t blocks = (K + blockSize - 1) / blockSize, blob = blockSize * bits / 8;
  const int64_t scaleBytes = kernels::dtypeBytes(*scaleType);
  const int64_t zpBytes = rowPaddedZeroPoints ? N * ((blocks * bits + 7) / 8)
                          : packedZeroPoints  ? (N * blocks * bits + 7) / 8
                                              : N * blocks * scaleBytes;
  const int64_t codeBytes = byteCodes ? N * blocks * blob : (N * K * bits + 7) / 8;
  if (int64_t(source.codes.size()) != codeBytes)
    return fail(llvm::formatv("{0} bytes of codes, {1} expected ({2} x {3} {4}-bit codes in blocks of {5})",
                              source.codes.size(), codeBytes, N, K, bits, blockSize));
  if (int64_t(source.scales.size()) != N * blocks * scaleBytes)
    return fail(llvm::formatv("{0} bytes of scales, {1} expected ({2} x {3} {4})", source.scales.size(),
                              N * blocks * scaleBytes, N, blocks, scaleDtype));
  if (hasZeroPoints && int64_t(source.zeroPoints.size()) != zpBytes)
    return fail(llvm::formatv("{0} bytes of zero points, {1} expected", source.zeroPoints.size(), zpBytes));

  const quant::BlockFormatInfo &info = quant::blockFormatInfo(*format);
  const int64_t perRow = K / 32;
  out.assign(size_t(N * perRow * info.bytesPerBlock), 0);
  auto toHalf = [](float v) -> std::optional<uint16_t> {
    // f16 holds magnitudes up to 65504; beyond (or a NaN / infinity) the block cannot be stored.
    if (!std::isfinite(v) || std::fabs(v) > 65504.0f)
      return std::nullopt;
    return kernels::floatToHalf(v);
  };
  auto nibble = [](const uint8_t *p, int64_t i) { return (p[i / 2] >> (4 * (i % 2))) & 0xF; };
  const auto *codeData = reinterpret_cast<const uint8_t *>(source.codes.data());
  const auto *zpData = reinterpret_cast<const uint8_t *>(source.zeroPoints.data());
  // Code (n, k) as stored: MatMulNBits' padded rows of blocks, or an element of the [N, K] or
  // (K-major) [K, N] tensor.
  auto code = [&](int64_t n, int64_t k) -> int {
    if (byteCodes) {
      const uint8_t *blob0 = codeData + (n * blocks + k / blockSize) * blob;
      return bits == 8 ? blob0[k % blockSize] : nibble(blob0, k % blockSize);
    }
    const int64_t e = kMajor ? k * N + n : n * K + k;
    return bits == 8 ? codeData[e] : nibble(codeData, e);
  };
  // Scales and element-typed zero points: [N, blocks], or [blocks, N] when K-major.
  auto blockIndex = [&](int64_t n, int64_t block) { return kMajor ? block * N + n : n * blocks + block; };
  auto *dst = reinterpret_cast<uint8_t *>(out.data());
  // Rows in groups, so that K-major codes are read a cache line per group rather than a byte per
  // line (the same order for row-major codes costs nothing).
  constexpr int64_t kGroup = 64;
  for (int64_t n0 = 0; n0 < N; n0 += kGroup) {
    const int64_t n1 = std::min(N, n0 + kGroup);
    for (int64_t j = 0; j < perRow; ++j) {
      const int64_t k0 = j * 32, block = k0 / blockSize;
      for (int64_t n = n0; n < n1; ++n) {
        const float scale = kernels::loadAs(source.scales.data(), *scaleType, blockIndex(n, block));
        std::optional<uint16_t> d = toHalf(scale);
        if (!d)
          return fail(llvm::formatv("scale {0} of row {1}, block {2} does not fit f16", scale, n, block));
        uint8_t *b = dst + (n * perRow + j) * info.bytesPerBlock;
        std::memcpy(b, &*d, 2);
        if (bits == 8) { // q8_0: u8 code q - 128 (flipping the top bit), or an i8 code as it is
          const uint8_t flip = byteCodes ? 0x80 : 0;
          for (int i = 0; i < 32; ++i)
            b[2 + i] = uint8_t(code(n, k0 + i) ^ flip);
          continue;
        }
        // ggml's byte i holds elements i (low nibble) and i + 16 (high nibble) of its block of 32.
        uint8_t *qs = b + (*format == quant::BlockFormat::q4_1 ? 4 : 2);
        for (int i = 0; i < 16; ++i)
          qs[i] = uint8_t((code(n, k0 + i) ^ codeShift) | ((code(n, k0 + i + 16) ^ codeShift) << 4));
        if (*format == quant::BlockFormat::q4_1) { // q d + m with m = -z s, in f32 then f16
          float z = float(defaultZero);
          if (rowPaddedZeroPoints)
            z = float(nibble(zpData + n * ((blocks * bits + 7) / 8), block));
          else if (packedZeroPoints)
            z = float(signedCodes ? int(int8_t(uint8_t(nibble(zpData, blockIndex(n, block)) << 4)) >> 4)
                                  : nibble(zpData, blockIndex(n, block)));
          else if (hasZeroPoints)
            z = kernels::loadAs(source.zeroPoints.data(), *scaleType, blockIndex(n, block));
          const float m = -(z + float(codeShift)) * scale;
          std::optional<uint16_t> mh = toHalf(m);
          if (!mh)
            return fail(llvm::formatv("zero point times scale {0} of row {1}, block {2} does not fit f16", m, n,
                                      block));
          std::memcpy(b + 2, &*mh, 2);
        }
      }
    }
  }
  return llvm::Error::success();
}

} // namespace helm
