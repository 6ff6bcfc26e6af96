//===- GemvScalar.cpp - the portable path of helm_k_linear -------------------------===//
#include "kernels/cpu/Gemv.h"
#include "kernels/common/Numeric.h"

#include <cstdint>

#define HELM_GEMV_TARGET

namespace helm::kernels {
namespace {
/// One float per "vector"; the compiler may still vectorise what it can for baseline x86-64.
struct ScalarTraits {
  using V = float;
  static constexpr int kWidth = 1, kAccRegs = 8;
  static inline V zero() { return 0.0f; }
  static inline V set1(float v) { return v; }
  static inline V loadF32(const float *p) { return *p; }
  static inline void storeF32(float *p, V v) { *p = v; }
  static inline V fma(V a, V b, V c) { return a * b + c; }
  static inline V add(V a, V b) { return a + b; }
  static inline float hsum(V v) { return v; }
  template <DType WD> static inline V load(const void *w, int64_t i) { return loadElem<WD>(w, i); }
};
} // namespace
} // namespace helm::kernels

#include "kernels/cpu/GemvImpl.h"

namespace helm::kernels {
const LinearKernels &linearKernelsScalar() { return GemvImpl<ScalarTraits>::table(); }
} // namespace helm::kernels
