//===- CudaTestSupport.h - helpers shared by the GPU-only test suites -----------------===//
//
// test/unit/runtime/backends/cuda/CudaDeviceTest.cpp (the CUDA device and kernels) and
// test/unit/runtime/backends/cuda/CudaDeviceOpsTest.cpp (the runtime's CUDA device ops) check
// llvm::Error and llvm::Expected results and draw random inputs the same way.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_TEST_UNIT_CUDATESTSUPPORT_H
#define HELM_TEST_UNIT_CUDATESTSUPPORT_H

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <cstdint>
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

} // namespace helm::test

#endif
