//===- QuantGemv.h - decode GEMV on ggml block-quantized weights ------------------===//
//
// y[m, n] = sum_k x[m, k] * W[n, k] for W stored as N rows of blocks (q8_0, q4_0, q4_1: 32 weights
// per block; q4_k, q5_k, q6_k: 256 per super-block): the GGUF / ggml layout of an [out, in]
// matrix, each row rowBytes(format, K) bytes, rows back to back.
// x and y are f32. As in llama.cpp, x is first quantized once per call to int8 codes with one f32
// scale per 32 values; each block's integer dot product of activation and weight codes is exact,
// and is scaled by the two scales and accumulated in f32. The arithmetic is defined exactly
// (docs/quantization.md, "Kernels"), so the scalar, AVX2 and AVX-512 VNNI paths return
// bit-identical y for the same inputs, on any number of threads.
//
// The path follows kernels::activeIsa() (HELM_KERNEL_ISA, setIsaForTesting): avx512 runs the
// VNNI kernels where the CPU has AVX512-VNNI and AVX512-VBMI (Ice Lake and later, Zen 4) and the
// AVX2 kernels otherwise. The N output rows are
// split over kernels::pool(), one contiguous range of weight rows (one sequential stream) per thread.
//
//===------------------------------------------------------------------------------===//
#ifndef HELM_KERNELS_QUANT_QUANTGEMV_H
#define HELM_KERNELS_QUANT_QUANTGEMV_H

#include "kernels/quant/BlockFormats.h"

#include <cstdint>
#include <string>

namespace helm::quant {

/// y[M, N] = x[M, K] . W^T for W of `wFormat` (any block format), N rows of K weights. K must be
/// a multiple of the format's block (32, or 256 for the k-quants); any M >= 0 (larger M runs in
/// blocks of 8 rows, 16 on the AVX-512 path). Returns false with a one-line reason in *error (if
/// error is not null) on a bad K, M or N, or a null buffer; y is then untouched. A non-finite x
/// makes its row of y NaN.
bool quantLinear(BlockFormat wFormat, const float *x, int64_t M, int64_t K, const void *w, int64_t N, float *y,
                 std::string *error);

/// The implementations; quantLinear uses the one activeQuantPath() names.
enum class QuantPath { scalar, avx2, avx512vnni };
const char *quantPathName(QuantPath path);
/// Whether this CPU can run the path (avx2: AVX2+FMA+F16C; avx512vnni: AVX-512 F/BW/VL + VNNI +
/// VBMI).
bool quantPathSupported(QuantPath path);
/// kernels::activeIsa() mapped to a path: avx512 -> avx512vnni where the CPU has it, else avx2.
QuantPath activeQuantPath();
/// quantLinear on a given path (tests, benchmarks); false with an error if the CPU lacks it.
bool quantLinearOnPath(QuantPath path, BlockFormat wFormat, const float *x, int64_t M, int64_t K, const void *w,
                       int64_t N, float *y, std::string *error);

} // namespace helm::quant

#endif
