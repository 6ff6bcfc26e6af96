//===- Gemv.h - the per-ISA entry points behind helm_k_linear ---------------------===//
//
// LinearElements.cpp converts x to f32 once, picks the table of the active ISA (Isa.h) and splits the N
// output columns over the thread pool; each thread calls one range function for its columns
// [n0, n1). The range functions (GemvImpl.h, instantiated in GemvScalar/Avx2/Avx512.cpp) handle
// any M: rows of x in blocks of up to 8 with register-blocked micro-kernels, cache blocking for
// larger M. See docs/kernels.md.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CPU_GEMV_H
#define HELM_KERNELS_CPU_GEMV_H

#include "kernels/common/Isa.h"
#include "kernels/common/Numeric.h"

#include <cstdint>

namespace helm::kernels {

struct LinearProblem {
  const float *x; // [M, K], f32
  const void *w;  // [N, K] (transposed) or [K, N]
  void *y;        // [M, N] of yd
  DType yd;
  int64_t M, K, N;
};

/// Rows of x one micro-kernel call handles (larger M is processed in blocks of this many).
constexpr int64_t kGemvMaxRows = 8;

/// Scratch each thread passes to the [K, N] kernels (its column accumulators), in floats.
constexpr int64_t kGemvScratchFloats = 8192;

/// The calling thread's GEMV scratch: kGemvScratchFloats floats, 64-byte aligned.
float *gemvThreadScratch();
/// Computes y[:, n0:n1]. `scratch` holds kGemvScratchFloats floats (64-byte aligned).
using LinearRangeFn = void (*)(const LinearProblem &p, int64_t n0, int64_t n1, float *scratch);

/// acc[m, n] = sum over k in [k0, k1) of x[m, k] * W[k, n] for all M (<= 8) rows and all N
/// columns of a [K, N] weight: one slice of K, for the caller to reduce across slices.
using LinearKSliceFn = void (*)(const LinearProblem &p, int64_t k0, int64_t k1, float *acc);

struct LinearKernels {
  LinearRangeFn nk[3]; // W [N, K], indexed by the weight DType
  LinearRangeFn kn[3]; // W [K, N]
  LinearKSliceFn knSlice[3];
};

const LinearKernels &linearKernelsScalar();
const LinearKernels &linearKernelsAvx2();   // call only if isaSupported(Isa::avx2)
const LinearKernels &linearKernelsAvx512(); // call only if isaSupported(Isa::avx512)
/// The table of `isa` (one of the three above).
const LinearKernels &linearKernelsFor(Isa isa);

/// y = x . W^T (wTransposed: W is [N, K]) or x . W ([K, N]) for element weights: x widened to f32
/// once, the GEMM (Gemm.h) for prefill-sized M, else the GEMV tables of the active ISA with the N
/// columns split over the pool. The element half of helm_k_linear (kernels/linear/Linear.cpp).
void linearElements(const void *x, DType xd, const void *w, DType wd, bool wTransposed, void *y, DType yd,
                    int64_t M, int64_t K, int64_t N);

} // namespace helm::kernels

#endif
