//===- Gemm.h - the prefill GEMM behind helm_k_linear (oneDNN) ------------------------===//
//
// For M >= gemmMinRows rows of x (prefill) helm_k_linear hands the call to linearGemm, which splits
// N over helm's pool and runs one single-threaded oneDNN matmul per thread and column panel. f16
// weights (and bf16 weights against f32/f16 activations) are widened to f32 panel by panel first,
// so products and sums stay f32; bf16 x against bf16 W runs oneDNN's bf16 matmul directly (the
// products of two bf16 values are exact in f32). Each output is rounded once to y's type. Design
// and measurements: docs/kernels.md.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CPU_GEMM_H
#define HELM_KERNELS_CPU_GEMM_H

#include "kernels/common/Isa.h"
#include "kernels/common/Numeric.h"

#include <cstdint>

namespace helm::kernels {

/// Rows of x from which the GEMM beats the GEMV micro-kernels, measured on 1 and 2 threads
/// (Zen 4; docs/kernels.md): bf16 x against bf16 W (oneDNN's bf16 matmul, twice the f32 rate) from
/// just past the decode sizes; [N, K] weights from 16 rows; [K, N] weights, where the GEMV kernels
/// are strongest, from 32 rows for f32 and from 48 for f16/bf16 (widened first).
constexpr int64_t kGemmMinRowsBf16 = 9;
constexpr int64_t kGemmMinRowsNK = 16;
constexpr int64_t kGemmMinRowsKN = 32;
constexpr int64_t kGemmMinRowsKN16 = 48;
/// The threshold that applies to a call with these element types and layout.
int64_t gemmMinRows(DType xd, DType wd, bool wTransposed);

/// Which path helm_k_linear takes: chosen by shape, or forced (tests, benchmarks).
enum class PrefillPath : int { automatic = 0, gemv = 1, gemm = 2 };
/// Forces a path for every later call (any M; the scalar ISA still never uses the GEMM);
/// automatic restores the choice by shape. Without a call, HELM_KERNEL_GEMM=auto|always|never
/// (read once) picks automatic, gemm or gemv.
void setPrefillPathForTesting(PrefillPath path);
PrefillPath prefillPathForTesting();
/// Column panels so far that oneDNN declined or failed and the GEMV kernels computed instead.
int64_t gemmFallbackPanelsForTesting();

/// Whether helm_k_linear should call linearGemm: M >= gemmMinRows and a product of at least 2^18
/// multiply-adds, on a vector path. Never on the scalar path, which stays free of vector code and
/// of oneDNN.
bool gemmWanted(Isa isa, DType xd, DType wd, bool wTransposed, int64_t M, int64_t K, int64_t N);

/// y[M, N] = x[M, K] . W, the helm_k_linear contract (f32 products and sums, one rounding per
/// output), on the current pool. `xf` is x widened to f32 (x itself when xd is f32); bf16 x goes
/// to oneDNN's bf16 matmul as it is. M, N, K >= 1 (gemmWanted is false for K = 0).
void linearGemm(const void *x, const float *xf, DType xd, const void *w, DType wd,
                bool wTransposed, void *y, DType yd, int64_t M, int64_t K, int64_t N);

} // namespace helm::kernels

#endif
