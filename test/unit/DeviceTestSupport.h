//===- DeviceTestSupport.h - helpers shared by the device test suites -----------------===//
//
// test/unit/runtime/backends/cuda/CudaDeviceTest.cpp (the CUDA device and kernels),
// test/unit/runtime/backends/cuda/CudaDeviceOpsTest.cpp (the runtime's CUDA device ops) and
// test/unit/runtime/backends/host/HostDeviceOpsTest.cpp (the host device ops) check llvm::Error
// and llvm::Expected results, draw random inputs and make weights in blocks the same way.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_TEST_UNIT_DEVICETESTSUPPORT_H
#define HELM_TEST_UNIT_DEVICETESTSUPPORT_H

#include "kernels/quant/BlockFormats.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define ASSERT_OK(expr)                                                                            \
  do {                                                                                             \
    llvm::Error err_ = (expr);                                                                     \
    ASSERT_FALSE(bool(err_)) << llvm::toString(std::move(err_));                                   \
  } while (false)

/// `var` = the value of the Expected `expr`, or a fatal test failure with its error.
#define ASSERT_VALUE(var, expr)                                                                    \
  auto var##OrErr = (expr);                                                                        \
  ASSERT_TRUE(bool(var##OrErr)) << llvm::toString(var##OrErr.takeError());                         \
  auto var = std::move(*var##OrErr)

namespace helm::test {

/// The message of an Error or of a failed Expected; "" when it succeeded.
inline std::string errorText(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : std::string();
}
template <typename T> std::string errorText(llvm::Expected<T> v) {
  return v ? std::string() : llvm::toString(v.takeError());
}

/// n values uniform in [lo, hi), reproducible from `seed`.
inline std::vector<float> randomFloats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// The contract's dtype code of a block format (the inverse of quant::blockFormatOfDtype).
inline int32_t blockDtypeCode(quant::BlockFormat format) {
  for (int32_t code = 0; code < 64; ++code)
    if (quant::blockFormatOfDtype(code) == format)
      return code;
  return -1;
}

/// `rows` rows of `width` random weights in [-1, 1) quantized to `format` (quantizeRow), and
/// their values decoded by dequantizeRow, the format's definition.
inline void blockRows(quant::BlockFormat format, int64_t rows, int64_t width, uint32_t seed,
                      std::vector<char> &blocks, std::vector<float> &values) {
  const quant::BlockFormatInfo &info = quant::blockFormatInfo(format);
  const int64_t rowBytes = *quant::rowBytes(format, width);
  blocks.assign(size_t(rows * rowBytes), 0);
  values.assign(size_t(rows * width), 0.0f);
  std::mt19937 rng(seed);
  for (int64_t r = 0; r < rows; ++r) {
    auto *dst = reinterpret_cast<uint8_t *>(blocks.data()) + r * rowBytes;
    if (info.quantizable) {
      std::vector<float> row = randomFloats(size_t(width), -1, 1, seed + uint32_t(r));
      ASSERT_TRUE(quant::quantizeRow(format, row.data(), width, dst).ok());
    } else {
      // A format HELM only reads: random codes and sub-block scales, the f16 fields (iq: d at
      // the start of each block; q2_k: d and dmin; q3_k: d) of either sign in [2^-10, 2^-9).
      std::vector<size_t> halves = {0};
      if (format == quant::BlockFormat::q2_k)
        halves = {offsetof(quant::BlockQ2K, d), offsetof(quant::BlockQ2K, dmin)};
      else if (format == quant::BlockFormat::q3_k)
        halves = {offsetof(quant::BlockQ3K, d)};
      for (int64_t i = 0; i < rowBytes; ++i)
        dst[i] = uint8_t(rng());
      for (int64_t b = 0; b < width / info.weightsPerBlock; ++b)
        for (size_t at : halves) {
          const uint16_t d = uint16_t((rng() & 0x8000u) | 0x1400u | (rng() & 0x3ffu));
          std::memcpy(dst + b * info.bytesPerBlock + at, &d, 2);
        }
    }
    ASSERT_TRUE(quant::dequantizeRow(format, dst, width, values.data() + r * width).ok());
  }
}

} // namespace helm::test

#endif
