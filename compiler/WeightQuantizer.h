//===- WeightQuantizer.h - a weight's bytes in a block format ----------------------===//
//
// The package builder's compile-time quantization: one tensor at a time, from its source bytes
// (f32, f16 or bf16) to the rows of blocks the kernels read (docs/quantization.md).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_WEIGHTQUANTIZER_H
#define HELM_COMPILER_WEIGHTQUANTIZER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace helm {

/// Quantizes a 2-D tensor of `sourceDtype` ("f32", "f16", "bf16") with shape `sourceShape` to
/// helm_dtype `blockDtype`, rows along source dimension `rowDim` (1: the source is [K, N] and its
/// columns become the rows, transposed on the way). `out` receives rows x (K / block) blocks.
/// Errors name the tensor and the problem in one line.
llvm::Error quantizeWeight(llvm::StringRef name, llvm::ArrayRef<char> source, llvm::StringRef sourceDtype,
                           llvm::ArrayRef<int64_t> sourceShape, int64_t rowDim, int32_t blockDtype,
                           std::vector<char> &out);

} // namespace helm

#endif
