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

namespace {
/// An OnnxBlockedSource checked against its sizes, read code by code: the one reading of the
/// layouts that both the repacking and the dequantizing use.
class OnnxBlockView {
public:
  /// Checks the dtypes and sizes; the message names the problem (the caller names the tensor).
  static llvm::Expected<OnnxBlockView> make(const OnnxBlockedSource &source) {
    OnnxBlockView v(source);
    const int64_t N = source.N, K = source.K, bits = source.bits, blockSize = source.blockSize;
    if (bits != 4 && bits != 8)
      return fail(llvm::formatv("{0}-bit codes (4 or 8 expected)", bits));
    std::optional<kernels::DType> scaleType = elementDtype(source.scaleDtype);
    if (!scaleType || *scaleType == kernels::DType::bf16)
      return fail("scales of dtype " + source.scaleDtype + " (f32 or f16 expected)");
    v.scaleType = *scaleType;
    v.byteCodes = source.codeDtype == "u8";
    v.signedCodes = source.codeDtype == "i4" || source.codeDtype == "i8";
    const bool elementCodes = bits == 4 ? source.codeDtype == "i4" || source.codeDtype == "u4" : source.codeDtype == "i8";
    if (!v.byteCodes && !elementCodes)
      return fail(llvm::formatv("{0}-bit codes of dtype {1} ({2} expected)", bits, source.codeDtype,
                                bits == 4 ? "u8, i4 or u4" : "u8 or i8"));
    if (source.kMajor && v.byteCodes)
      return fail("K-major codes of dtype u8 (i4, u4 or i8 expected)");
    v.hasZeroPoints = !source.zeroPoints.empty();
    v.rowPaddedZeroPoints = v.hasZeroPoints && source.zeroPointDtype == "u8" && v.byteCodes;
    v.packedZeroPoints = v.hasZeroPoints && source.zeroPointDtype == source.codeDtype && !v.byteCodes;
    if (v.hasZeroPoints && !v.rowPaddedZeroPoints && !v.packedZeroPoints && source.zeroPointDtype != source.scaleDtype)
      return fail("zero points of dtype " + source.zeroPointDtype + " (the codes' or the scales' dtype expected)");
    if (N <= 0 || K <= 0 || blockSize <= 0)
      return fail(llvm::formatv("N {0}, K {1}, block_size {2}: sizes must be positive", N, K, blockSize));
    v.blocks = (K + blockSize - 1) / blockSize;
    v.blob = blockSize * bits / 8;
    const int64_t scaleBytes = kernels::dtypeBytes(*scaleType);
    v.zpRowBytes = (v.blocks * bits + 7) / 8;
    const int64_t zpBytes = v.rowPaddedZeroPoints ? N * v.zpRowBytes
                            : v.packedZeroPoints  ? (N * v.blocks * bits + 7) / 8
                                                  : N * v.blocks * scaleBytes;
    const int64_t codeBytes = v.byteCodes ? N * v.blocks * v.blob : (N * K * bits + 7) / 8;
    if (int64_t(source.codes.size()) != codeBytes)
      return fail(llvm::formatv("{0} bytes of codes, {1} expected ({2} x {3} {4}-bit codes in blocks of {5})",
                                source.codes.size(), codeBytes, N, K, bits, blockSize));
    if (int64_t(source.scales.size()) != N * v.blocks * scaleBytes)
      return fail(llvm::formatv("{0} bytes of scales, {1} expected ({2} x {3} {4})", source.scales.size(),
                                N * v.blocks * scaleBytes, N, v.blocks, source.scaleDtype));
    if (v.hasZeroPoints && int64_t(source.zeroPoints.size()) != zpBytes)
      return fail(llvm::formatv("{0} bytes of zero points, {1} expected", source.zeroPoints.size(), zpBytes));
    return v;
  }

  /// Code (n, k) as stored (unsigned: a nibble, or a byte): MatMulNBits' padded rows of blocks, or
  /// an element of the [N, K] or (K-major) [K, N] tensor.
  int storedCode(int64_t n, int64_t k) const {
    if (byteCodes) {
      const uint8_t *blob0 = codeData() + (n * blocks + k / s.blockSize) * blob;
      return s.bits == 8 ? blob0[k % s.blockSize] : nibble(blob0, k % s.blockSize);
    }
    const int64_t e = s.kMajor ? k * s.N + n : n * s.K + k;
    return s.bits == 8 ? codeData()[e] : nibble(codeData(), e);
  }
  /// Its value: signed codes sign-extended.
  int code(int64_t n, int64_t k) const { return signedCodes ? signExtend(storedCode(n, k)) : storedCode(n, k); }
  float scale(int64_t n, int64_t block) const {
    return kernels::loadAs(s.scales.data(), scaleType, blockIndex(n, block));
  }
  /// Block `block` of row n's zero point, in the codes' values: absent ones are 2^(bits - 1) for
  /// byte codes and 0 for element-typed ones.
  float zeroPoint(int64_t n, int64_t block) const {
    if (!hasZeroPoints)
      return byteCodes ? float(1 << (s.bits - 1)) : 0.0f;
    const auto *zp = reinterpret_cast<const uint8_t *>(s.zeroPoints.data());
    if (rowPaddedZeroPoints) {
      const uint8_t *row = zp + n * zpRowBytes;
      return float(s.bits == 8 ? row[block] : nibble(row, block));
    }
    if (packedZeroPoints) {
      const int64_t e = blockIndex(n, block);
      const int stored = s.bits == 8 ? zp[e] : nibble(zp, e);
      return float(signedCodes ? signExtend(stored) : stored);
    }
    return kernels::loadAs(s.zeroPoints.data(), scaleType, blockIndex(n, block));
  }

  const OnnxBlockedSource &s;
  kernels::DType scaleType = kernels::DType::f32;
  bool byteCodes = false, signedCodes = false;
  bool hasZeroPoints = false, rowPaddedZeroPoints = false, packedZeroPoints = false;
  int64_t blocks = 0, blob = 0, zpRowBytes = 0;

private:
  explicit OnnxBlockView(const OnnxBlockedSource &source) : s(source) {}
  static llvm::Error fail(const llvm::Twine &why) { return llvm::createStringError(why); }
  static int nibble(const uint8_t *p, int64_t i) { return (p[i / 2] >> (4 * (i % 2))) & 0xF; }
  int signExtend(int stored) const { return s.bits == 8 ? int(int8_t(uint8_t(stored))) : ((stored ^ 8) - 8); }
  const uint8_t *codeData() const { return reinterpret_cast<const uint8_t *>(s.codes.data()); }
  /// Scales and element-typed zero points: [N, blocks], or [blocks, N] when K-major.
  int64_t blockIndex(int64_t n, int64_t block) const { return s.kMajor ? block * s.N + n : n * blocks + block; }
};
} // namespace

llvm::Error repackOnnxBlocks(llvm::StringRef name, const OnnxBlockedSource &source, int32_t blockDtype,
                             std::vector<char> &out) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError("cannot repack the blocks of weight '" + name + "': " + why);
  };
  llvm::Expected<OnnxBlockView> view = OnnxBlockView::make(source);
  if (!view)
    return fail(llvm::toString(view.takeError()));
  const OnnxBlockView &v = *view;
  const int64_t N = source.N, K = source.K, bits = source.bits, blockSize = source.blockSize;
  // Which format is chosen is OnnxBlocksAttr::getStorageFormat's decision (verified on the
  // declaration); here only whether the codes fit it. Signed 4-bit values are stored shifted by 8
  // (nibble ^ 8 = value + 8); q8_0 and q4_0 subtract a fixed 128 / 8 from the stored code, so they
  // hold exactly the codes whose zero point is that after the shift, with no zero points given;
  // q4_1's minimum holds any zero point.
  const int codeShift = v.signedCodes && bits == 4 ? 8 : 0;
  const int defaultZero = v.byteCodes ? 1 << (bits - 1) : 0; // absent zero points
  std::optional<quant::BlockFormat> format = quant::blockFormatOfDtype(blockDtype);
  const bool fits = bits == 8 ? format == quant::BlockFormat::q8_0 && !v.hasZeroPoints
                              : format == quant::BlockFormat::q4_1 ||
                                    (format == quant::BlockFormat::q4_0 && !v.hasZeroPoints && defaultZero + codeShift == 8);
  if (!fits)
    return fail(llvm::formatv("{0}-bit {1} codes {2} zero points cannot be stored as {3}", bits, source.codeDtype,
                              v.hasZeroPoints ? "with" : "without", helm_dtype_name(blockDtype)));
  if (K % 32 != 0 || blockSize < 32 || blockSize % 32 != 0)
    return fail(llvm::formatv("N {0}, K {1}, block_size {2}: K must be a multiple of 32 and the block of 32 or more",
                              N, K, blockSize));

  const quant::BlockFormatInfo &info = quant::blockFormatInfo(*format);
  const int64_t perRow = K / 32;
  out.assign(size_t(N * perRow * info.bytesPerBlock), 0);
  auto toHalf = [](float v) -> std::optional<uint16_t> {
    // f16 holds magnitudes up to 65504; beyond (or a NaN / infinity) the block cannot be stored.
    if (!std::isfinite(v) || std::fabs(v) > 65504.0f)
      return std::nullopt;
    return kernels::floatToHalf(v);
  };
  auto *dst = reinterpret_cast<uint8_t *>(out.data());
  // Rows in groups, so that K-major codes are read a cache line per group rather than a byte per
  // line (the same order for row-major codes costs nothing).
  constexpr int64_t kGroup = 64;
  for (int64_t n0 = 0; n0 < N; n0 += kGroup) {
    const int64_t n1 = std::min(N, n0 + kGroup);
    for (int64_t j = 0; j < perRow; ++j) {
      const int64_t k0 = j * 32, block = k0 / blockSize;
      for (int64_t n = n0; n < n1; ++n) {
        const float scale = v.scale(n, block);
        std::optional<uint16_t> d = toHalf(scale);
        if (!d)
          return fail(llvm::formatv("scale {0} of row {1}, block {2} does not fit f16", scale, n, block));
        uint8_t *b = dst + (n * perRow + j) * info.bytesPerBlock;
        std::memcpy(b, &*d, 2);
        if (bits == 8) { // q8_0: u8 code q - 128 (flipping the top bit), or an i8 code as it is
          const uint8_t flip = v.byteCodes ? 0x80 : 0;
          for (int i = 0; i < 32; ++i)
            b[2 + i] = uint8_t(v.storedCode(n, k0 + i) ^ flip);
          continue;
        }
        // ggml's byte i holds elements i (low nibble) and i + 16 (high nibble) of its block of 32.
        uint8_t *qs = b + (*format == quant::BlockFormat::q4_1 ? 4 : 2);
        for (int i = 0; i < 16; ++i)
          qs[i] = uint8_t((v.storedCode(n, k0 + i) ^ codeShift) | ((v.storedCode(n, k0 + i + 16) ^ codeShift) << 4));
        if (*format == quant::BlockFormat::q4_1) { // q d + m with m = -z s, in f32 then f16
          const float m = -(v.zeroPoint(n, block) + float(codeShift)) * scale;
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

llvm::Error dequantizeOnnxBlocks(llvm::StringRef name, const OnnxBlockedSource &source, std::vector<char> &out) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError("cannot dequantize the blocks of weight '" + name + "': " + why);
  };
  llvm::Expected<OnnxBlockView> view = OnnxBlockView::make(source);
  if (!view)
    return fail(llvm::toString(view.takeError()));
  const OnnxBlockView &v = *view;
  const int64_t N = source.N, K = source.K;
  const int64_t elementBytes = kernels::dtypeBytes(v.scaleType);
  out.assign(size_t(N * K * elementBytes), 0);
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t block = k / source.blockSize;
      row[size_t(k)] = (float(v.code(n, k)) - v.zeroPoint(n, block)) * v.scale(n, block);
    }
    kernels::narrow(row.data(), v.scaleType, out.data() + n * K * elementBytes, K);
  }
  return llvm::Error::success();
}

} // namespace helm
